package edge

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// AccountRequest is the body of POST /admin/accounts.
type AccountRequest struct {
	ID     string          `json:"id"`
	Name   string          `json:"name,omitempty"`
	Limits registry.Limits `json:"limits,omitzero"`
}

// AccountList is the answer of GET /admin/accounts.
type AccountList struct {
	Accounts []registry.Account `json:"accounts"`
}

// KeyRequest is the body of POST /admin/keys.
type KeyRequest struct {
	Account   string     `json:"account"`
	Name      string     `json:"name,omitempty"`
	Scopes    []string   `json:"scopes,omitempty"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// NewKey is the answer of POST /admin/keys: the key's record and, this once, the key.
type NewKey struct {
	registry.Key
	Secret string `json:"key"`
}

// KeyList is the answer of GET /admin/keys: records only, which hold a key's visible
// prefix and never the key.
type KeyList struct {
	Keys []registry.Key `json:"keys"`
}

// ConnectionRequest is the body of POST /admin/connections.
type ConnectionRequest struct {
	Account string `json:"account"`
	Tool    string `json:"tool"`
}

// Connection is an account's connection to a tool, with its links.
type Connection struct {
	Account       string    `json:"account"`
	Tool          string    `json:"tool"`
	ConnectedAt   time.Time `json:"connected_at"`
	LinkCreatedAt time.Time `json:"link_created_at"`
	Links
}

// ConnectionList is the answer of GET /admin/connections?account=ID.
type ConnectionList struct {
	Connections []Connection `json:"connections"`
}

func (e *Edge) adminRoutes(g *gin.RouterGroup) {
	g.POST("/accounts", e.createAccount)
	g.GET("/accounts", e.listAccounts)
	g.GET("/accounts/:account", e.getAccount)
	g.PATCH("/accounts/:account", e.updateAccount)
	g.DELETE("/accounts/:account", e.deleteAccount)
	g.GET("/audit", e.readAudit)
	g.GET("/usage", e.usage)
	g.POST("/keys", e.createKey)
	g.GET("/keys", e.listKeys)
	g.DELETE("/keys/:id", e.revokeKey)
	g.GET("/tools/:tool", e.adminTool)
	g.POST("/connections", e.connect)
	g.GET("/connections", e.listConnections)
	g.GET("/connections/:account/:tool", e.getConnection)
	g.DELETE("/connections/:account/:tool", e.disconnect)
	g.POST("/links/:account/:tool/rotate", e.rotateLink)
	e.credentialRoutes(g)
	e.oauthRoutes(g)
	e.oauthClientRoutes(g)
	e.approvalRoutes(g)
	e.userRoutes(g)
}

func (e *Edge) connectionView(c *registry.Connection) Connection {
	return Connection{Account: c.Account, Tool: c.Tool, ConnectedAt: c.ConnectedAt, LinkCreatedAt: c.LinkCreatedAt,
		Links: e.links(c, c.Tool)}
}

func (e *Edge) createAccount(c *gin.Context) {
	req, err := decodeAccountRequest(c.Request.Body)
	if err != nil {
		e.fail(c, err)
		return
	}
	var vs []registry.Violation
	vs = checkID(vs, "/id", req.ID)
	vs = checkLimits(vs, req.Limits, e.approvalMax())
	if len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	a, err := e.store.CreateAccount(c.Request.Context(), registry.Account{ID: req.ID, Name: req.Name, Limits: req.Limits})
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusCreated, audit.ActionCreateAccount, a.ID, "", "")
	c.JSON(http.StatusCreated, a)
}

func (e *Edge) listAccounts(c *gin.Context) {
	accounts, err := e.store.Accounts(c.Request.Context())
	if err != nil {
		e.fail(c, err)
		return
	}
	slices.SortFunc(accounts, func(a, b registry.Account) int { return strings.Compare(a.ID, b.ID) })
	for i := range accounts {
		accounts[i] = accounts[i].Public()
	}
	c.JSON(http.StatusOK, AccountList{Accounts: nonNil(accounts)})
}

func (e *Edge) getAccount(c *gin.Context) {
	id, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	a, err := e.store.Account(c.Request.Context(), id)
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a.Public())
}

func (e *Edge) deleteAccount(c *gin.Context) {
	id, ok := e.pathID(c, "account")
	if !ok {
		return
	}
	if _, err := e.store.AccountSettled(c.Request.Context(), id); err != nil {
		e.fail(c, err)
		return
	}
	if v := e.cfg.Credentials; v != nil {
		// First, so that an account whose deletion fails midway keeps nothing stored
		// it cannot be asked to delete again.
		if err := v.ClearAccount(c.Request.Context(), id); err != nil {
			e.fail(c, err)
			return
		}
	}
	if err := e.store.DeleteAccount(c.Request.Context(), id); err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionDeleteAccount, id, "", "")
	c.Status(http.StatusNoContent)
}

func (e *Edge) createKey(c *gin.Context) {
	var req KeyRequest
	if err := decodeStrict(c.Request.Body, &req); err != nil {
		e.fail(c, err)
		return
	}
	var vs []registry.Violation
	vs = checkID(vs, "/account", req.Account)
	for i, s := range req.Scopes {
		if !wire.ValidToolID(s) {
			vs = append(vs, registry.Violation{Pointer: "/scopes/" + strconv.Itoa(i), Message: "must be a tool id"})
		}
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		vs = append(vs, registry.Violation{Pointer: "/expires_at", Message: "must be in the future"})
	}
	if len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	k, secret, err := e.store.CreateKey(c.Request.Context(), registry.NewKeyRequest{
		Account: req.Account, Name: req.Name, Scopes: req.Scopes, ExpiresAt: req.ExpiresAt,
	})
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusCreated, audit.ActionCreateKey, k.Account, k.ID, "")
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, NewKey{Key: *k, Secret: secret})
}

func (e *Edge) listKeys(c *gin.Context) {
	account := "" // every account's keys
	if c.Query("account") != "" {
		var ok bool
		if account, ok = e.queryAccount(c); !ok {
			return
		}
	}
	byHash, err := e.store.Keys(c.Request.Context(), account)
	if err != nil {
		e.fail(c, err)
		return
	}
	keys := make([]registry.Key, 0, len(byHash))
	for _, k := range byHash {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b registry.Key) int {
		if n := a.CreatedAt.Compare(b.CreatedAt); n != 0 {
			return n
		}
		return strings.Compare(a.ID, b.ID)
	})
	c.JSON(http.StatusOK, KeyList{Keys: keys})
}

// revokeKey marks a key revoked; every edge refuses it once its view has the change.
func (e *Edge) revokeKey(c *gin.Context) {
	hash, err := e.keyHash(c, c.Param("id"))
	if err != nil {
		e.fail(c, err)
		return
	}
	k, err := e.store.RevokeKey(c.Request.Context(), hash)
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusOK, audit.ActionRevokeKey, k.Account, k.ID, "")
	c.JSON(http.StatusOK, k)
}

// keyHash finds the hash a key id is filed under: from the view, or, for a key made a
// moment ago that the view has not seen yet, from the store.
func (e *Edge) keyHash(c *gin.Context, id string) (string, error) {
	if h, k := e.view.Snapshot().KeyByID(id); k != nil {
		return h, nil
	}
	keys, err := e.store.Keys(c.Request.Context(), "")
	if err != nil {
		return "", err
	}
	for h, k := range keys {
		if k.ID == id {
			return h, nil
		}
	}
	return "", registry.ErrNotFound
}

// adminTool shows a deployed tool whatever account asks, without links.
func (e *Edge) adminTool(c *gin.Context) {
	snap := e.view.Snapshot()
	t := snap.RawTool(c.Param("tool"))
	if t == nil {
		e.fail(c, registry.ErrToolNotFound)
		return
	}
	c.JSON(http.StatusOK, e.toolInfo(snap, t.Tool, nil))
}

func (e *Edge) connect(c *gin.Context) {
	var req ConnectionRequest
	if err := decodeStrict(c.Request.Body, &req); err != nil {
		e.fail(c, err)
		return
	}
	vs := checkID(nil, "/account", req.Account)
	vs = checkID(vs, "/tool", req.Tool)
	if len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	conn, err := e.store.Connect(c.Request.Context(), req.Account, req.Tool, e.signer)
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusCreated, audit.ActionConnect, conn.Account, "", conn.Tool)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusCreated, e.connectionView(conn))
}

func (e *Edge) listConnections(c *gin.Context) {
	account, ok := e.queryAccount(c)
	if !ok {
		return
	}
	conns, err := e.store.Connections(c.Request.Context(), account)
	if err != nil {
		e.fail(c, err)
		return
	}
	slices.SortFunc(conns, func(a, b registry.Connection) int { return strings.Compare(a.Tool, b.Tool) })
	list := ConnectionList{Connections: make([]Connection, len(conns))}
	for i := range conns {
		list.Connections[i] = e.connectionView(&conns[i])
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, list)
}

func (e *Edge) getConnection(c *gin.Context) {
	account, tool, ok := e.pathConnection(c)
	if !ok {
		return
	}
	conn, err := e.store.Connection(c.Request.Context(), account, tool)
	if err != nil {
		e.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, e.connectionView(conn))
}

func (e *Edge) disconnect(c *gin.Context) {
	account, tool, ok := e.pathConnection(c)
	if !ok {
		return
	}
	if err := e.store.Disconnect(c.Request.Context(), account, tool, e.signer); err != nil {
		e.fail(c, err)
		return
	}
	if v := e.cfg.Credentials; v != nil {
		// The connection's values go with it.
		if err := v.Clear(c.Request.Context(), account, tool); err != nil {
			e.fail(c, err)
			return
		}
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionDisconnect, account, "", tool)
	c.Status(http.StatusNoContent)
}

// rotateLink gives a connection a new link; the old one stops working on every edge
// once their views have the change.
func (e *Edge) rotateLink(c *gin.Context) {
	account, tool, ok := e.pathConnection(c)
	if !ok {
		return
	}
	conn, err := e.store.RotateLink(c.Request.Context(), account, tool, e.signer)
	if err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusOK, audit.ActionRotateLink, account, "", tool)
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, e.connectionView(conn))
}

func (e *Edge) pathID(c *gin.Context, name string) (string, bool) {
	id := c.Param(name)
	if vs := checkID(nil, "/"+name, id); len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return "", false
	}
	return id, true
}

// queryAccount reads the account a list is asked for (?account=ID), which must exist.
func (e *Edge) queryAccount(c *gin.Context) (string, bool) {
	account := c.Query("account")
	if vs := checkID(nil, "/account", account); len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return "", false
	}
	if _, err := e.store.Account(c.Request.Context(), account); err != nil {
		e.fail(c, err)
		return "", false
	}
	return account, true
}

func (e *Edge) pathConnection(c *gin.Context) (account, tool string, ok bool) {
	account, tool = c.Param("account"), c.Param("tool")
	vs := checkID(nil, "/account", account)
	vs = checkID(vs, "/tool", tool)
	if len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return "", "", false
	}
	return account, tool, true
}

// checkLimits checks an account's limits: none may be negative (0 is the default).
func checkLimits(vs []registry.Violation, l registry.Limits, maxExpiry time.Duration) []registry.Violation {
	for _, f := range []struct {
		pointer  string
		negative bool
	}{{"/limits/rate", l.Rate < 0}, {"/limits/burst", l.Burst < 0}, {"/limits/sessions", l.Sessions < 0},
		{"/limits/payload_bytes", l.PayloadBytes < 0}} {
		if f.negative {
			vs = append(vs, registry.Violation{Pointer: f.pointer, Message: "must not be negative"})
		}
	}
	vs = append(vs, registry.QuotasViolations("/limits/quotas", l.Quotas)...)
	return append(vs, registry.ApprovalRulesViolations("/limits/approvals", l.Approvals, maxExpiry)...)
}

// checkID checks an account or tool id: both are NATS subject and KV key tokens.
func checkID(vs []registry.Violation, pointer, id string) []registry.Violation {
	switch {
	case id == "":
		return append(vs, registry.Violation{Pointer: pointer, Message: "required"})
	case !wire.ValidToolID(id):
		return append(vs, registry.Violation{Pointer: pointer,
			Message: "must be lower-case letters, digits and '-', starting with a letter or digit, at most 63"})
	}
	return vs
}

func invalidInput(vs []registry.Violation) error {
	details := make([]any, len(vs))
	for i, v := range vs {
		details[i] = v
	}
	return newHTTPError(gateway.KindInvalidRequest, "the request is not valid", details...)
}

// decodeStrict reads exactly one JSON object with no fields beyond v's: a misspelt
// field is an error, not a silently ignored one.
func decodeStrict(r io.Reader, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return newHTTPError(gateway.KindInvalidJSON, "the body must be one JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var (
		mbe *http.MaxBytesError
		he  *gateway.Error
		ute *json.UnmarshalTypeError
		se  *json.SyntaxError
	)
	switch {
	case errors.As(err, &mbe), errors.As(err, &he):
		return err
	case errors.As(err, &se), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return newHTTPError(gateway.KindInvalidJSON, "the body must be one JSON object")
	case errors.As(err, &ute):
		if ute.Field == "" {
			return newHTTPError(gateway.KindInvalidJSON, "the body must be one JSON object")
		}
		return invalidInput([]registry.Violation{{Pointer: "/" + strings.ReplaceAll(ute.Field, ".", "/"),
			Message: "must be " + jsonTypeName(ute.Type.Kind().String())}})
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return invalidInput([]registry.Violation{{Pointer: "/" + strings.Trim(name, `"`), Message: "field is not allowed"}})
	}
	return invalidInput([]registry.Violation{{Message: err.Error()}})
}

func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "slice", "array":
		return "an array"
	case "map", "struct", "ptr":
		return "an object"
	case "bool":
		return "a boolean"
	}
	return "a number"
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
