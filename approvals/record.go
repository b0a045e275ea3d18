package approvals

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/gateway"
)

// Bucket is the JetStream KV bucket of the approvals' records, each under its id.
const Bucket = "tg-approvals"

// Decision is where an approval stands.
type Decision string

// The decisions: pending until a person decides or it expires.
const (
	Pending  Decision = "pending"
	Approved Decision = "approved"
	Denied   Decision = "denied"
	Expired  Decision = "expired"
	// Withdrawn: the call ended before anyone decided (it was cancelled, or its
	// caller went away), so there is nothing left to approve.
	Withdrawn Decision = "withdrawn"
)

// Record is one call waiting for, or given, a person's decision.
type Record struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	// KeyID is the key that made the call; Link is set instead for a call through the
	// account's link to the tool.
	KeyID  string `json:"key_id,omitempty"`
	Link   bool   `json:"link,omitempty"`
	Tool   string `json:"tool"`
	Method string `json:"method"`
	// ArgsSHA256 is the hex sha256 of the call's arguments in canonical form
	// (Digest), or of their bytes as sent when the edge stored them as a payload as
	// they arrived (never held whole): the approval is of these arguments only.
	ArgsSHA256 string `json:"args_sha256"`
	// Arguments is what the person deciding is shown: the arguments as the tool is
	// sent them, cut at MaxShown bytes.
	Arguments string `json:"arguments,omitempty"`
	// PolicyVersion is the version of the account's rule that asked for approval
	// (registry.ApprovalRule.Version).
	PolicyVersion string    `json:"policy_version"`
	CallID        string    `json:"call_id,omitempty"` // the record of package calls, for a call answered 202
	CreatedAt     time.Time `json:"created_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	Decision      Decision  `json:"decision"`
	// DecidedBy names who decided: "admin" for the admin key, else "key:" and the
	// id of the account's key that decided.
	DecidedBy string    `json:"decided_by,omitempty"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	Reason    string    `json:"reason,omitempty"`
	// RanAt is when an edge claimed the approved record and sent the call: an
	// approval lets its call run once.
	RanAt time.Time `json:"ran_at,omitzero"`
}

// MaxShown bounds the arguments a record shows the person deciding.
const MaxShown = 4 << 10

// MaxReason bounds a decision's reason.
const MaxReason = 1000

// Lapsed reports whether r is pending past its expiry: it reads as expired.
func (r *Record) Lapsed(now time.Time) bool {
	return r.Decision == Pending && !now.Before(r.ExpiresAt)
}

// Standing is r's decision as of now: Expired for a pending record past its expiry.
func (r *Record) Standing(now time.Time) Decision {
	if r.Lapsed(now) {
		return Expired
	}
	return r.Decision
}

// Digest is the hex sha256 of args, a JSON object, in canonical form: decoded and
// encoded again, object keys sorted and numbers as written, so that the same
// arguments sent with other spacing or key order are the same call.
func Digest(args []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("approvals: arguments: %w", err)
	}
	canon, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("approvals: arguments: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// argsDigest is c's arguments' ArgsSHA256: their Digest, or, for arguments the edge
// stored as a payload as they arrived (c.Payload, c.Params empty), the sha256 of
// their bytes its writer took.
func argsDigest(c *gateway.Call) (string, error) {
	if len(c.Params) == 0 && c.Payload != nil {
		if c.Payload.SHA256 == "" {
			return "", errors.New("approvals: the stored arguments carry no digest")
		}
		return c.Payload.SHA256, nil
	}
	return Digest(c.Params)
}

// The failures of a call held for approval, and of a decision.
var (
	errNotFound = gateway.Fail(gateway.KindNotFound, "no such approval: it does not exist, it expired, or it is another account's")
)

// DeniedError is the failure of a call a person denied, with their reason.
func DeniedError(r *Record) error {
	if r.Reason != "" {
		return gateway.Fail(gateway.KindApprovalDenied, "the call was denied approval by %s: %s", r.DecidedBy, r.Reason)
	}
	return gateway.Fail(gateway.KindApprovalDenied, "the call was denied approval by %s", r.DecidedBy)
}

// ExpiredError is the failure of a call nobody decided on before r expired.
func ExpiredError(r *Record) error {
	return gateway.Fail(gateway.KindApprovalExpired, "nobody approved the call before its approval %s expired at %s", r.ID, r.ExpiresAt.UTC().Format(time.RFC3339))
}
