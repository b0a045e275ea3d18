package approvals

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Decider is who decides: the admin key (Account empty: any account's approvals),
// or a key of an account (its own account's only).
type Decider struct {
	Account string // empty for the admin key
	KeyID   string
	// Transport is the door the decision came in by, for the audit trail.
	Transport string
	RequestID string
}

// Name is how a record names the decider.
func (d Decider) Name() string {
	if d.Account == "" {
		return "admin"
	}
	return "key:" + d.KeyID
}

// may reports whether d may see and decide r.
func (d Decider) may(r *Record) bool { return d.Account == "" || d.Account == r.Account }

// Get reads the approval id as d may see it: another account's is not found.
func (a *Approvals) Get(ctx context.Context, d Decider, id string) (*Record, error) {
	r, _, err := a.get(ctx, id)
	if err != nil {
		return nil, err
	}
	if !d.may(r) {
		return nil, errNotFound
	}
	return r, nil
}

// Decide approves (approve) or denies the pending approval id for d, with reason. A
// record decided already, or used, is a conflict; one past its expiry is
// gateway.KindApprovalExpired; another account's is not found. The decision is
// written with a compare-and-set on the record's revision, so two people deciding at
// once cannot both succeed, and is recorded in the audit trail.
func (a *Approvals) Decide(ctx context.Context, d Decider, id string, approve bool, reason string) (*Record, error) {
	if len(reason) > MaxReason {
		return nil, gateway.Fail(gateway.KindInvalidRequest, "reason: at most %d bytes", MaxReason)
	}
	for {
		r, rev, err := a.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if !d.may(r) {
			return nil, errNotFound
		}
		switch now := time.Now(); r.Standing(now) {
		case Pending:
		case Expired:
			return nil, ExpiredError(r)
		case Withdrawn:
			return nil, gateway.Fail(gateway.KindConflict, "the approval %s was withdrawn: its call ended before a decision", r.ID)
		default:
			return nil, gateway.Fail(gateway.KindConflict, "the approval %s was %s already by %s", r.ID, r.Decision, r.DecidedBy)
		}
		r.Decision, r.DecidedBy, r.DecidedAt, r.Reason = Denied, d.Name(), time.Now().UTC(), reason
		if approve {
			r.Decision = Approved
		}
		if _, err := a.update(ctx, r, rev); errors.Is(err, registry.ErrChanged) {
			continue
		} else if err != nil {
			return nil, err
		}
		a.record(d, r)
		return r, nil
	}
}

// The audit trail's names of a decision.
const (
	ActionApprove = "approve-call"
	ActionDeny    = "deny-call"
)

// record writes d's decision on r in the audit trail: the approval's id as the
// request id, the call's arguments' digest, and who decided as the key ("admin" for
// the admin key).
func (a *Approvals) record(d Decider, r *Record) {
	if a.trail == nil {
		return
	}
	action := ActionDeny
	if r.Decision == Approved {
		action = ActionApprove
	}
	key := d.KeyID
	if d.Account == "" {
		key = "admin"
	}
	a.trail.Write(audit.Record{
		Time: r.DecidedAt, Kind: audit.KindAdmin, Account: r.Account, Key: key, Tool: r.Tool, Method: action,
		Transport: d.Transport, ArgsSHA256: r.ArgsSHA256, Outcome: audit.OutcomeOK, RequestID: r.ID,
	})
}

// Pending lists the approvals d may see that wait for a decision, of account only
// when it is not empty, oldest first.
func (a *Approvals) Pending(ctx context.Context, d Decider, account string) ([]Record, error) {
	keys, err := a.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("approvals: list: %w", err)
	}
	out := []Record{}
	now := time.Now()
	for id := range keys.Keys() {
		r, _, err := a.get(ctx, id)
		if errors.Is(err, errNotFound) {
			continue // expired, or purged, since it was listed
		}
		if err != nil {
			_ = keys.Stop()
			return nil, err
		}
		if d.may(r) && (account == "" || r.Account == account) && r.Standing(now) == Pending {
			out = append(out, *r)
		}
	}
	slices.SortFunc(out, func(x, y Record) int { return x.CreatedAt.Compare(y.CreatedAt) })
	return out, nil
}
