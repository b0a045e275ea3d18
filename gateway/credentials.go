package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Credentials are an account's values for its connections to tools, as the gateway
// needs them for a call (package credentials).
type Credentials interface {
	// Seal returns account's values for t sealed to t's key (the HeaderCredentials
	// value, "" when t needs none), or the names of the fields t requires that the
	// account has not set.
	Seal(ctx context.Context, account string, t *wire.Tool) (header string, missing []string, err error)
	// RefuseGrant marks account's OAuth grant for t refused (why), as a refused
	// refresh does, when the server behind t refused the access token of a call
	// sealed at sealedAt, unless the account authorized t again (or the grant was
	// refreshed) since: the connection then needs authorizing again.
	RefuseGrant(ctx context.Context, account string, t *wire.Tool, sealedAt time.Time, why string) error
}

// WithCredentials sends each call of a tool whose connection needs values with the
// calling account's, sealed to the tool, and refuses a call whose account has not
// set a field the tool requires (ConnectionRequiredError).
func WithCredentials(c Credentials) Option {
	return func(g *Gateway) { g.creds = c }
}

// WithConnectURL names, in a connection_required failure of a tool whose OAuth
// provider has not authorized the account's connection, where its holder connects it.
func WithConnectURL(url func(tool string) string) Option {
	return func(g *Gateway) { g.connectURL = url }
}

// CodeConnectionRequired: the account's connection to the tool lacks values the tool
// requires.
const CodeConnectionRequired = "connection_required"

// KindConnectionRequired is a call of an account whose connection to the tool misses
// a value the tool requires: the account sets it (PUT
// /admin/connections/{account}/{tool}/credentials), then calls again.
var KindConnectionRequired = &Kind{Code: CodeConnectionRequired, Status: http.StatusConflict, RPC: RPCInvalidRequest, InResult: true,
	Text: "the account's connection to the tool needs credentials it has not set"}

// ConnectionRequiredError names the fields a call's account has not set.
type ConnectionRequiredError struct {
	Tool    string
	Missing []string
	// ConnectURL is where the account holder authorizes the tool at its OAuth
	// provider, when that is what is missing.
	ConnectURL string
}

func (e *ConnectionRequiredError) Error() string {
	if e.ConnectURL != "" {
		return fmt.Sprintf("the account's connection to %s needs %s: connect it at %s, then call again",
			e.Tool, strings.Join(e.Missing, ", "), e.ConnectURL)
	}
	return fmt.Sprintf("the account's connection to %s needs %s: set it (PUT /admin/connections/{account}/%s/credentials), then call again",
		e.Tool, strings.Join(e.Missing, ", "), e.Tool)
}

// connectionDetail is the envelope's detail of a connection_required failure.
type connectionDetail struct {
	Tool       string   `json:"tool"`
	Missing    []string `json:"missing"`
	ConnectURL string   `json:"connect_url,omitempty"`
}

// classifyConnection: a call refused for its connection's missing values.
func classifyConnection(err error) (Failure, bool) {
	var cr *ConnectionRequiredError
	if !errors.As(err, &cr) {
		return Failure{}, false
	}
	f := ofText(KindConnectionRequired, cr.Error())
	d := connectionDetail{Tool: cr.Tool, Missing: cr.Missing, ConnectURL: cr.ConnectURL}
	f.Details, f.Data = []any{d}, d
	return f, true
}

// sealCredentials finds c's account's values for t: refused when one t requires is
// missing, else kept sealed on c for send.
func (g *Gateway) sealCredentials(ctx context.Context, c *Call, t *wire.Tool, refuse bool) error {
	if g.creds == nil || !t.Connection.Needs() {
		return nil
	}
	c.sealedAt = time.Now()
	header, missing, err := g.creds.Seal(ctx, c.Principal.Account, t)
	if err != nil {
		return fmt.Errorf("gateway: credentials of %s: %w", t.ID, err)
	}
	if len(missing) > 0 && refuse {
		cr := &ConnectionRequiredError{Tool: t.ID, Missing: missing}
		if t.Connection.OAuth != nil && g.connectURL != nil && slices.Contains(missing, wire.MissingOAuth) {
			cr.ConnectURL = g.connectURL(t.ID)
		}
		return cr
	}
	c.sealed = header
	return nil
}

// Unlisted is err, the lookup of c's method, unless that found no such method of a
// tool whose methods differ per account (a bridged server that requires OAuth) for
// an account that has no list of them yet and whose connection lacks what the tool
// requires: until it connects, the account cannot know which methods its connection
// opens, and gets the connection_required that says where to connect.
func (g *Gateway) Unlisted(ctx context.Context, c *Call, err error) error {
	if !errors.Is(err, registry.ErrMethodNotFound) || g.creds == nil {
		return err
	}
	snap := g.view.Snapshot()
	entry, terr := snap.Tool(c.Principal, c.Tool)
	raw := snap.RawTool(c.Tool)
	if terr != nil || raw == nil || raw.Tool.AccountMethods == nil || raw.Tool.AccountMethods.Of(c.Principal.Account) != nil {
		return err
	}
	if cerr := g.sealCredentials(ctx, c, entry.Tool, true); cerr != nil {
		return cerr
	}
	return err
}

// withSealed is h with the call's sealed values added, h itself left as it is.
func withSealed(h nats.Header, sealed string) nats.Header {
	if sealed == "" {
		return h
	}
	return withHeader(h, wire.HeaderCredentials, sealed)
}

// refusedGrant is err, unless it is the tool's connection_required for an OAuth
// tool: the server behind the tool refused the account's token (a bridged remote
// server that requires OAuth: 401, or 403 for a scope the grant lacks). The grant is
// then marked refused, so the connection shows needs_reauthorization and the
// account's later calls are refused before they reach the tool; and the account
// connects again, at the connect URL this gateway names, never one the tool sent.
func (g *Gateway) refusedGrant(ctx context.Context, c *Call, t *wire.Tool, err error) error {
	var te *wire.ToolError
	if !errors.As(err, &te) || te.Code != CodeConnectionRequired || t.Connection == nil || t.Connection.OAuth == nil {
		return err
	}
	if g.creds != nil && !c.sealedAt.IsZero() {
		why := "the server behind the tool refused the access token"
		if rerr := g.creds.RefuseGrant(context.WithoutCancel(ctx), c.Principal.Account, t, c.sealedAt, why); rerr != nil {
			g.log.Warn("gateway: the refused grant is not marked", "account", c.Principal.Account, "tool", t.ID, "err", rerr)
		}
	}
	cr := &ConnectionRequiredError{Tool: t.ID, Missing: []string{wire.MissingOAuth}}
	if g.connectURL != nil {
		cr.ConnectURL = g.connectURL(t.ID)
	}
	return cr
}
