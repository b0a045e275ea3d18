package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Field is one field of a JSON merge patch (RFC 7396): left out, null, or a value.
// A field left out keeps what the record has; null puts it back to its default.
type Field[T any] struct {
	Set   bool // the patch names the field
	Null  bool // as null
	Value T
}

// Value is a Field that sets v.
func Value[T any](v T) Field[T] { return Field[T]{Set: true, Value: v} }

// IsZero is true for a field left out, which encoding/json's omitzero then leaves out.
func (f Field[T]) IsZero() bool { return !f.Set }

func (f Field[T]) MarshalJSON() ([]byte, error) {
	if f.Null {
		return []byte("null"), nil
	}
	return json.Marshal(f.Value)
}

func (f *Field[T]) UnmarshalJSON(b []byte) error {
	f.Set = true
	if string(b) == "null" {
		f.Null = true
		return nil
	}
	return json.Unmarshal(b, &f.Value)
}

// apply merges f into v: its value, the zero value (the default) for null, or v as
// it is when f is left out.
func (f Field[T]) apply(v *T) {
	switch {
	case f.Null:
		var zero T
		*v = zero
	case f.Set:
		*v = f.Value
	}
}

// AccountUpdate is the body of PATCH /admin/accounts/{id}: a JSON merge patch of the
// account's name, limits, audit settings and whether its links require sign-in. A
// limit set to 0 or null is the edge's default again.
type AccountUpdate struct {
	Name   Field[string]       `json:"name,omitzero"`
	Limits Field[LimitsUpdate] `json:"limits,omitzero"`
	// Audit changes what the audit trail keeps of the account's calls; null puts
	// every setting back to its default (nothing kept, nothing required).
	Audit         Field[AuditUpdate] `json:"audit,omitzero"`
	RequireSignIn Field[bool]        `json:"require_sign_in,omitzero"`
}

// AuditUpdate is the audit settings' part of an AccountUpdate (registry.AuditSettings).
type AuditUpdate struct {
	IncludeArguments Field[bool] `json:"include_arguments,omitzero"`
	IncludeResult    Field[bool] `json:"include_result,omitzero"`
	MaxDataSize      Field[int]  `json:"max_data_size,omitzero"`
	Required         Field[bool] `json:"required,omitzero"`
}

// LimitsUpdate is the limits' part of an AccountUpdate. Quotas, when given, replace
// the account's list whole (as a merge patch replaces an array); null or [] clears it.
type LimitsUpdate struct {
	Rate     Field[float64] `json:"rate,omitzero"`
	Burst    Field[int]     `json:"burst,omitzero"`
	Sessions Field[int]     `json:"sessions,omitzero"`
	// PayloadBytes bounds a call's request and reply below the deployment's limit.
	PayloadBytes Field[int64]            `json:"payload_bytes,omitzero"`
	Quotas       Field[[]registry.Quota] `json:"quotas,omitzero"`
	// Approvals, when given, replace the account's approval rules whole; null or []
	// clears them.
	Approvals Field[[]registry.ApprovalRule] `json:"approvals,omitzero"`
}

// violations are what is wrong with u, each naming its field.
func (u AccountUpdate) violations(maxExpiry time.Duration) []registry.Violation {
	l := u.Limits.Value
	vs := checkLimits(nil, registry.Limits{Rate: l.Rate.Value, Burst: l.Burst.Value, Sessions: l.Sessions.Value,
		PayloadBytes: l.PayloadBytes.Value, Quotas: l.Quotas.Value, Approvals: l.Approvals.Value}, maxExpiry)
	return checkAudit(vs, registry.AuditSettings{MaxDataSize: u.Audit.Value.MaxDataSize.Value})
}

// checkAudit checks an account's audit settings: the size kept is 0 (the default)
// or from 1 to registry.MaxAuditDataSize bytes.
func checkAudit(vs []registry.Violation, a registry.AuditSettings) []registry.Violation {
	if a.MaxDataSize < 0 || a.MaxDataSize > registry.MaxAuditDataSize {
		vs = append(vs, registry.Violation{Pointer: "/audit/max_data_size",
			Message: "must be from 1 to " + strconv.Itoa(registry.MaxAuditDataSize) + " bytes, or 0 for " + strconv.Itoa(registry.DefaultAuditDataSize)})
	}
	return vs
}

// decodeAccountUpdate reads an AccountUpdate as strictly as decodeStrict reads a
// body, the limits' fields included: a misspelt one is an error naming it.
func decodeAccountUpdate(r io.Reader) (AccountUpdate, error) {
	var body struct {
		Name          Field[string]   `json:"name"`
		Limits        json.RawMessage `json:"limits"`
		Audit         json.RawMessage `json:"audit"`
		RequireSignIn Field[bool]     `json:"require_sign_in"`
	}
	if err := decodeStrict(r, &body); err != nil {
		return AccountUpdate{}, err
	}
	u := AccountUpdate{Name: body.Name, RequireSignIn: body.RequireSignIn}
	if err := decodePart(body.Audit, "/audit", &u.Audit); err != nil {
		return u, err
	}
	switch limits := bytes.TrimSpace(body.Limits); {
	case len(limits) == 0:
	case string(limits) == "null":
		u.Limits = Field[LimitsUpdate]{Set: true, Null: true}
	case limits[0] != '{':
		return u, invalidInput([]registry.Violation{{Pointer: "/limits", Message: "must be an object or null"}})
	default:
		u.Limits.Set = true
		if err := checkQuotaFields(limits); err != nil {
			return u, err
		}
		if err := decodeStrict(bytes.NewReader(limits), &u.Limits.Value); err != nil {
			return u, within("/limits", err)
		}
	}
	return u, nil
}

// decodePart reads raw, a member of a patch at pointer, strictly into f: left out,
// null, or an object.
func decodePart[T any](raw json.RawMessage, pointer string, f *Field[T]) error {
	switch raw = bytes.TrimSpace(raw); {
	case len(raw) == 0:
		return nil
	case string(raw) == "null":
		*f = Field[T]{Set: true, Null: true}
		return nil
	case raw[0] != '{':
		return invalidInput([]registry.Violation{{Pointer: pointer, Message: "must be an object or null"}})
	}
	f.Set = true
	return within(pointer, decodeStrict(bytes.NewReader(raw), &f.Value))
}

// decodeAccountRequest reads the body of POST /admin/accounts strictly, a quota's
// fields named with their rule's index (see checkQuotaFields).
func decodeAccountRequest(r io.Reader) (AccountRequest, error) {
	var req AccountRequest
	b, err := io.ReadAll(r)
	if err != nil {
		return req, decodeError(err)
	}
	var body struct {
		Limits json.RawMessage `json:"limits"`
	}
	if json.Unmarshal(b, &body) == nil && len(body.Limits) > 0 {
		if err := checkQuotaFields(body.Limits); err != nil {
			return req, err
		}
	}
	return req, decodeStrict(bytes.NewReader(b), &req)
}

// checkQuotaFields reads the rules of limits, a JSON object, its quotas and its
// approval rules, one by one as strictly as decodeStrict reads a body, so that a
// misspelt field of a rule, or one of the wrong type, is an error naming the rule and
// the field (encoding/json names neither an array's index nor, under a Field, the
// way there).
func checkQuotaFields(limits []byte) error {
	var l struct {
		Quotas    json.RawMessage `json:"quotas"`
		Approvals json.RawMessage `json:"approvals"`
	}
	if err := json.Unmarshal(limits, &l); err != nil {
		return nil // the limits were read already: nothing more to say
	}
	if err := checkRules[registry.Quota]("/limits/quotas/", l.Quotas); err != nil {
		return err
	}
	return checkRules[registry.ApprovalRule]("/limits/approvals/", l.Approvals)
}

// checkRules decodes each rule of list, a JSON array of T, strictly.
func checkRules[T any](pointer string, list json.RawMessage) error {
	var rules []json.RawMessage
	if len(list) == 0 || string(list) == "null" || json.Unmarshal(list, &rules) != nil {
		return nil
	}
	for i, r := range rules {
		var v T
		if err := decodeStrict(bytes.NewReader(r), &v); err != nil {
			return within(pointer+strconv.Itoa(i), err)
		}
	}
	return nil
}

// within puts the pointers of err's violations under pointer: an error of a part of
// the body decoded on its own.
func within(pointer string, err error) error {
	var he *gateway.Error
	if !errors.As(err, &he) || he.Kind != gateway.KindInvalidRequest {
		return err
	}
	vs := make([]registry.Violation, 0, len(he.Details))
	for _, d := range he.Details {
		if v, ok := d.(registry.Violation); ok {
			v.Pointer = pointer + v.Pointer
			vs = append(vs, v)
		}
	}
	return invalidInput(vs)
}

// apply merges u into a.
func (u AccountUpdate) apply(a *registry.Account) {
	u.Name.apply(&a.Name)
	u.RequireSignIn.apply(&a.RequireSignIn)
	if u.Limits.Null {
		a.Limits = registry.Limits{}
	} else {
		l := u.Limits.Value
		l.Rate.apply(&a.Limits.Rate)
		l.Burst.apply(&a.Limits.Burst)
		l.Sessions.apply(&a.Limits.Sessions)
		l.PayloadBytes.apply(&a.Limits.PayloadBytes)
		l.Quotas.apply(&a.Limits.Quotas)
		l.Approvals.apply(&a.Limits.Approvals)
	}
	if u.Audit.Null {
		a.Audit = registry.AuditSettings{}
	} else {
		au := u.Audit.Value
		au.IncludeArguments.apply(&a.Audit.IncludeArguments)
		au.IncludeResult.apply(&a.Audit.IncludeResult)
		au.MaxDataSize.apply(&a.Audit.MaxDataSize)
		au.Required.apply(&a.Audit.Required)
	}
}

// updateAccount changes an account's name or limits. Every edge applies a changed
// limit to the next call once its view of the registry has the change: the view
// follows the accounts' bucket, and the rate, session and quota limits are read from
// it on each call and each new session.
func (e *Edge) updateAccount(c *gin.Context) {
	id, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	u, err := decodeAccountUpdate(c.Request.Body)
	if err != nil {
		e.fail(c, err)
		return
	}
	if vs := u.violations(e.approvalMax()); len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	a, err := e.store.UpdateAccount(c.Request.Context(), id, func(a *registry.Account) error {
		u.apply(a)
		return nil
	})
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusOK, audit.ActionUpdateAccount, a.ID, "", "")
	c.JSON(http.StatusOK, a.Public())
}
