package edge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// ConnectionState is whether an account's connection to a tool has every value the
// tool requires: "ready", or "needs_credentials" with the fields missing (and
// "oauth" when the tool's OAuth provider has not authorized it), or
// "needs_reauthorization" when the provider refused to refresh its grant.
type ConnectionState struct {
	State   string   `json:"state"`
	Missing []string `json:"missing"`
	// ConnectURL is where the account holder authorizes the tool at its OAuth
	// provider, when that is missing (the dashboard's Connect page).
	ConnectURL string `json:"connect_url,omitempty"`
	// Fields are what the tool asks of a connection, when it asks anything: each
	// field's name, whether it is a secret, and what it is.
	Fields []wire.Field `json:"fields,omitempty"`
}

// Connection states.
const (
	ConnectionReady            = "ready"
	ConnectionNeedsCredentials = "needs_credentials"
	ConnectionNeedsReauth      = "needs_reauthorization"
)

// CredentialsInfo is the answer of GET (and PUT, PATCH)
// /admin/connections/{account}/{tool}/credentials: what the tool asks for and what of
// it is set, never a value.
type CredentialsInfo struct {
	Account string            `json:"account"`
	Tool    string            `json:"tool"`
	Fields  []CredentialField `json:"fields"`
	State   ConnectionState   `json:"connection"`
	Updated *time.Time        `json:"updated_at,omitempty"`
}

// CredentialField is one field of a connection: its declaration and, when set, when
// and a keyed fingerprint of its value.
type CredentialField struct {
	wire.Field
	Set         bool       `json:"set"`
	SetAt       *time.Time `json:"set_at,omitempty"`
	Fingerprint string     `json:"fingerprint,omitempty"`
}

// KeyRotation is the answer of POST /admin/credentials/rotate-key.
type KeyRotation struct {
	KeyID     string `json:"key_id"`
	Rewrapped int    `json:"rewrapped"`
	Records   int    `json:"records"`
	// The OAuth token signing keys (tg-oauth-keys), sealed under the same KEK, when
	// this edge issues tokens: how many were sealed again (or sealed for the first
	// time, those stored before the edges had a key file) and how many there are.
	SigningKeysRewrapped int `json:"signing_keys_rewrapped"`
	SigningKeys          int `json:"signing_keys"`
}

func (e *Edge) credentialRoutes(g *gin.RouterGroup) {
	g.GET("/connections/:account/:tool/credentials", e.getCredentials)
	g.PUT("/connections/:account/:tool/credentials", e.putCredentials)
	g.PATCH("/connections/:account/:tool/credentials", e.patchCredentials)
	g.DELETE("/connections/:account/:tool/credentials", e.clearCredentials)
	g.POST("/credentials/rotate-key", e.rotateCredentialsKey)
}

// errNoVault: this edge was started without a key-encryption key.
var errNoVault = newHTTPError(gateway.KindNotFound, "credentials are off on this edge: start it with --credentials-key-file")

// connectionState is account's connection state for t, read from the vault (ready
// when t needs nothing).
func (e *Edge) connectionState(c *gin.Context, account string, t *registry.Tool) ConnectionState {
	if !t.Connection.Needs() {
		return ConnectionState{State: ConnectionReady, Missing: []string{}}
	}
	var r *credentials.Record
	if e.cfg.Credentials != nil {
		var err error
		if r, _, err = e.cfg.Credentials.Lookup(c.Request.Context(), account, t); err != nil {
			e.log.WarnContext(c.Request.Context(), "edge: credentials: read", "account", account, "tool", t.ID, "err", err)
		}
	}
	st := e.stateOf(t, r)
	st.Fields = t.Connection.Fields
	return st
}

// stateOf is the state of a connection to t whose record is r (nil: none).
func (e *Edge) stateOf(t *registry.Tool, r *credentials.Record) ConnectionState {
	st := StateOf(t, r)
	if slices.Contains(st.Missing, credentials.MissingOAuth) {
		st.ConnectURL = e.connectURL(t.ID)
	}
	return st
}

// StateOf is the state of a connection to t whose record is r (nil: none), without
// its connect URL.
func StateOf(t *registry.Tool, r *credentials.Record) ConnectionState {
	st := ConnectionState{State: ConnectionReady, Missing: []string{}}
	missing := credentials.Missing(t.Connection, r)
	if len(missing) == 0 {
		return st
	}
	st.State, st.Missing = ConnectionNeedsCredentials, missing
	if slices.Contains(missing, credentials.MissingOAuth) && credentials.Reauthorize(r) {
		st.State = ConnectionNeedsReauth
	}
	return st
}

// credentialsTarget is the connection a credentials route names, and its tool's
// record: the connection must exist.
func (e *Edge) credentialsTarget(c *gin.Context) (account string, t *registry.Tool, ok bool) {
	if e.cfg.Credentials == nil {
		e.fail(c, errNoVault)
		return "", nil, false
	}
	account, tool, ok := e.pathConnection(c)
	if !ok {
		return "", nil, false
	}
	if _, err := e.store.Connection(c.Request.Context(), account, tool); err != nil {
		e.fail(c, err)
		return "", nil, false
	}
	entry := e.view.Snapshot().RawTool(tool)
	if entry == nil {
		e.fail(c, registry.ErrToolNotFound)
		return "", nil, false
	}
	return account, entry.Tool, true
}

func (e *Edge) getCredentials(c *gin.Context) {
	account, t, ok := e.credentialsTarget(c)
	if !ok {
		return
	}
	r, _, err := e.cfg.Credentials.Read(c.Request.Context(), account, t.ID)
	if err != nil && !errors.Is(err, registry.ErrNotFound) {
		e.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, e.credentialsInfo(account, t, r))
}

func (e *Edge) putCredentials(c *gin.Context)   { e.setCredentials(c, true) }
func (e *Edge) patchCredentials(c *gin.Context) { e.setCredentials(c, false) }

// setCredentials sets a connection's values: all of them (replace), or those the
// body names, a null removing one.
func (e *Edge) setCredentials(c *gin.Context, replace bool) {
	account, t, ok := e.credentialsTarget(c)
	if !ok {
		return
	}
	values, err := readValues(c.Request.Body, !replace)
	if err != nil {
		e.fail(c, err)
		return
	}
	r, err := e.cfg.Credentials.Update(c.Request.Context(), account, t.ID, t.Connection, values, replace)
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusOK, audit.ActionSetCredentials, account, "", t.ID)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, e.credentialsInfo(account, t, r))
}

func (e *Edge) clearCredentials(c *gin.Context) {
	account, t, ok := e.credentialsTarget(c)
	if !ok {
		return
	}
	if err := e.cfg.Credentials.Clear(c.Request.Context(), account, t.ID); err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionClearCredentials, account, "", t.ID)
	c.Status(http.StatusNoContent)
}

// rotateCredentialsKey wraps every record, and every token signing key, again under
// this edge's current KEK.
func (e *Edge) rotateCredentialsKey(c *gin.Context) {
	if e.cfg.Credentials == nil {
		e.fail(c, errNoVault)
		return
	}
	n, total, err := e.cfg.Credentials.Rotate(c.Request.Context())
	if err != nil {
		e.fail(c, err)
		return
	}
	r := KeyRotation{KeyID: e.cfg.Credentials.Keys().Current().ID, Rewrapped: n, Records: total}
	if e.cfg.SignIn != nil && e.cfg.SignIn.Keys().Sealed() {
		if r.SigningKeysRewrapped, r.SigningKeys, err = e.cfg.SignIn.Keys().Rewrap(c.Request.Context()); err != nil {
			e.fail(c, err)
			return
		}
	}
	e.adminChange(c, http.StatusOK, audit.ActionRotateKey, "", "", "")
	c.JSON(http.StatusOK, r)
}

// readValues reads a JSON object of field values: each a string, or, where nulls
// are allowed (PATCH), null to remove the field. Its errors name fields, never a
// value: a body that is not JSON is refused without saying where.
func readValues(body io.Reader, nulls bool) (map[string]*string, error) {
	b, err := io.ReadAll(body)
	defer clear(b)
	if err != nil {
		return nil, decodeError(err)
	}
	var raw map[string]json.RawMessage
	if !json.Valid(b) || json.Unmarshal(b, &raw) != nil || raw == nil {
		return nil, newHTTPError(gateway.KindInvalidJSON, "the body must be one JSON object of field values")
	}
	values := make(map[string]*string, len(raw))
	var vs []registry.Violation
	for name, v := range raw {
		if string(v) == "null" && nulls {
			values[name] = nil
			continue
		}
		var s string
		if json.Unmarshal(v, &s) != nil {
			vs = append(vs, registry.Violation{Pointer: "/" + name, Message: "must be a string"})
			continue
		}
		values[name] = &s
	}
	if len(vs) > 0 {
		slices.SortFunc(vs, func(a, b registry.Violation) int { return strings.Compare(a.Pointer, b.Pointer) })
		return nil, invalidInput(vs)
	}
	return values, nil
}

// credentialsInfo is what may be shown of r, a connection's record (nil: none), for
// tool t.
func (e *Edge) credentialsInfo(account string, t *registry.Tool, r *credentials.Record) CredentialsInfo {
	info := CredentialsInfo{Account: account, Tool: t.ID, Fields: []CredentialField{},
		State: ConnectionState{State: ConnectionReady, Missing: []string{}}}
	if r != nil {
		info.Updated = &r.UpdatedAt
	}
	if t.Connection == nil {
		return info
	}
	for _, f := range t.Connection.Fields {
		cf := CredentialField{Field: f}
		if r != nil {
			if st, ok := r.Fields[f.Name]; ok {
				at := st.SetAt
				cf.Set, cf.SetAt, cf.Fingerprint = true, &at, st.Fingerprint
			}
		}
		info.Fields = append(info.Fields, cf)
	}
	info.State = e.stateOf(t, r)
	return info
}
