package edge

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

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
// account's name, limits and whether its links require sign-in. A limit set to 0 or
// null is the edge's default again.
type AccountUpdate struct {
	Name          Field[string]       `json:"name,omitzero"`
	Limits        Field[LimitsUpdate] `json:"limits,omitzero"`
	RequireSignIn Field[bool]         `json:"require_sign_in,omitzero"`
}

// LimitsUpdate is the limits' part of an AccountUpdate. Quotas, when given, replace
// the account's list whole (as a merge patch replaces an array); null or [] clears it.
type LimitsUpdate struct {
	Rate     Field[float64]          `json:"rate,omitzero"`
	Burst    Field[int]              `json:"burst,omitzero"`
	Sessions Field[int]              `json:"sessions,omitzero"`
	Quotas   Field[[]registry.Quota] `json:"quotas,omitzero"`
}

// violations are what is wrong with u, each naming its field.
func (u AccountUpdate) violations() []registry.Violation {
	l := u.Limits.Value
	return checkLimits(nil, registry.Limits{Rate: l.Rate.Value, Burst: l.Burst.Value, Sessions: l.Sessions.Value, Quotas: l.Quotas.Value})
}

// decodeAccountUpdate reads an AccountUpdate as strictly as decodeStrict reads a
// body, the limits' fields included: a misspelt one is an error naming it.
func decodeAccountUpdate(r io.Reader) (AccountUpdate, error) {
	var body struct {
		Name          Field[string]   `json:"name"`
		Limits        json.RawMessage `json:"limits"`
		RequireSignIn Field[bool]     `json:"require_sign_in"`
	}
	if err := decodeStrict(r, &body); err != nil {
		return AccountUpdate{}, err
	}
	u := AccountUpdate{Name: body.Name, RequireSignIn: body.RequireSignIn}
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

// checkQuotaFields reads the quotas of limits, a JSON object, rule by rule as strictly
// as decodeStrict reads a body, so that a misspelt field of a rule, or one of the
// wrong type, is an error naming the rule and the field (encoding/json names neither
// an array's index nor, under a Field, the way there).
func checkQuotaFields(limits []byte) error {
	var l struct {
		Quotas json.RawMessage `json:"quotas"`
	}
	if err := json.Unmarshal(limits, &l); err != nil || len(l.Quotas) == 0 || string(l.Quotas) == "null" {
		return nil // the limits were read already: nothing more to say
	}
	var rules []json.RawMessage
	if err := json.Unmarshal(l.Quotas, &rules); err != nil {
		return nil
	}
	for i, r := range rules {
		var q registry.Quota
		if err := decodeStrict(bytes.NewReader(r), &q); err != nil {
			return within("/limits/quotas/"+strconv.Itoa(i), err)
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
		return
	}
	l := u.Limits.Value
	l.Rate.apply(&a.Limits.Rate)
	l.Burst.apply(&a.Limits.Burst)
	l.Sessions.apply(&a.Limits.Sessions)
	l.Quotas.apply(&a.Limits.Quotas)
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
	if vs := u.violations(); len(vs) > 0 {
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
	c.JSON(http.StatusOK, a)
}
