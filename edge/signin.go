package edge

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// Every link and every /tools/{tool}/mcp endpoint is an OAuth protected resource
// (package oauth) when the edge has an issuer: a caller without a credential is
// answered 401 with a WWW-Authenticate naming the resource's own metadata document,
// an access token is taken only at the resource it was issued for, and a token whose
// scope lacks what the request needs is answered 403 naming the scope.

var (
	errSignInRequired = newHTTPError(gateway.KindSignInRequired, "")
	errInvalidToken   = newHTTPError(gateway.KindInvalidToken, "")
)

// tokenChecker checks the access tokens of protected resources and names their
// issuer: the deployment's own (oauth.Issuer) or its identity provider
// (oauth.External).
type tokenChecker interface {
	Verify(ctx context.Context, raw, resource string, now time.Time) (oauth.Token, error)
	Identifier() string
}

// tokens is the edge's token checker: the identity provider when it has one, else
// its own issuer; nil when links and endpoints are no protected resources.
func (e *Edge) tokens() tokenChecker {
	switch {
	case e.cfg.IdP != nil:
		return e.cfg.IdP
	case e.cfg.SignIn != nil:
		return e.cfg.SignIn
	}
	return nil
}

// scopeError is a token's missing scope: the 403 that names it.
type scopeError struct{ scope string }

func (e *scopeError) Error() string { return "oauth: insufficient scope: " + e.scope }

// resourceURL is the canonical URL of the resource c's route serves: the link, or
// the tool's MCP endpoint (the Streamable one, or the legacy SSE stream with its
// messages).
func (e *Edge) resourceURL(c *gin.Context) string {
	if link := c.Param("link"); link != "" {
		return e.base + "/mcp/" + link
	}
	tool := c.Param("tool")
	if strings.HasSuffix(c.FullPath(), "/mcp") {
		return e.base + "/tools/" + tool + "/mcp"
	}
	return e.base + "/tools/" + tool + "/sse"
}

// signIn authenticates the caller of a protected resource for account (empty: any)
// and tool: an API key of the account, or an access token issued for this resource.
// A token's principal reaches only tool, as a link's does.
func (e *Edge) signIn(c *gin.Context, snap *registry.Snapshot, account, tool string) (registry.Principal, error) {
	secret := apiKey(c.Request)
	if secret == "" {
		return registry.Principal{}, errSignInRequired
	}
	now := time.Now()
	if p, err := e.view.AuthenticateKey(c.Request.Context(), secret, now); err == nil {
		if account != "" && p.Account != account {
			return registry.Principal{}, errInvalidToken
		}
		p.Tool = tool
		return p, nil
	}
	tok, err := e.tokens().Verify(c.Request.Context(), secret, e.resourceURL(c), now)
	if err != nil || (account != "" && tok.Account != account) || snap.Account(tok.Account) == nil {
		return registry.Principal{}, errInvalidToken
	}
	if !tok.Allows(oauth.ListScope(tool)) {
		return registry.Principal{}, &scopeError{oauth.ListScope(tool)}
	}
	if !tok.Allows(oauth.CallScope(tool)) && c.Request.Method == http.MethodPost && oauth.NeedsCall(peekBody(c.Request)) {
		return registry.Principal{}, &scopeError{oauth.CallScope(tool)}
	}
	user, ok := e.tokenUser(snap, tok)
	if !ok {
		return registry.Principal{}, errInvalidToken
	}
	return registry.Principal{Account: tok.Account, Tool: tool, Client: tok.Client, User: user, Grant: tok.Grant}, nil
}

// tokenUser is the user of the token's account that tok names, or false when that
// user may not sign in. A token of the deployment's own issuer names a user of the
// account by name, who must still be one (deleted: refused from the moment the view
// hears it). Behind an identity provider the user claim is the provider's subject:
// an account that lists users with subjects takes only theirs, and the call then
// names the user; an account that lists none takes every subject the provider names
// for it, as before users existed.
func (e *Edge) tokenUser(snap *registry.Snapshot, tok oauth.Token) (string, bool) {
	if e.cfg.IdP == nil {
		return tok.User, tok.User == "" || snap.User(tok.Account, tok.User) != nil
	}
	if !snap.HasSubjectUsers(tok.Account) {
		return tok.User, true
	}
	if u := snap.UserBySubject(tok.Account, tok.User); u != nil {
		return u.Name, true
	}
	return "", false
}

// peekBody reads r's body (already bounded by limitBody) and puts it back, with the
// error reading it met, for the handler to read as if untouched.
func peekBody(r *http.Request) []byte {
	b, err := io.ReadAll(r.Body)
	rest := io.Reader(bytes.NewReader(b))
	if err != nil {
		rest = io.MultiReader(rest, errorReader{err})
	}
	r.Body = struct {
		io.Reader
		io.Closer
	}{rest, r.Body}
	return b
}

type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) { return 0, r.err }

// failSignIn answers a refused sign-in: its envelope, and the challenge that tells an
// MCP client where the resource's metadata is and which scope it needs.
func (e *Edge) failSignIn(c *gin.Context, tool string, err error) {
	meta, merr := oauth.MetadataURL(e.resourceURL(c))
	if merr == nil {
		var se *scopeError
		switch {
		case errors.As(err, &se):
			c.Header("WWW-Authenticate", oauth.Challenge(meta, "insufficient_scope", se.scope))
			err = newHTTPError(gateway.KindInsufficientScope, "the access token's scope lacks "+se.scope)
		case errors.Is(err, errInvalidToken):
			c.Header("WWW-Authenticate", oauth.Challenge(meta, "invalid_token", strings.Join(oauth.ToolScopes(tool), " ")))
		default:
			c.Header("WWW-Authenticate", oauth.Challenge(meta, "", strings.Join(oauth.ToolScopes(tool), " ")))
		}
	}
	e.fail(c, err)
}

// authToolCaller authenticates the caller of a tool's MCP endpoint: an API key as
// every API route takes, or an access token issued for the endpoint.
func (e *Edge) authToolCaller(c *gin.Context) {
	snap := e.view.Snapshot()
	secret := apiKey(c.Request)
	p, err := e.view.AuthenticateKey(c.Request.Context(), secret, time.Now())
	if err != nil && e.tokens() != nil {
		if p, err = e.signIn(c, snap, "", c.Param("tool")); errors.Is(err, errSignInRequired) {
			err = newHTTPError(gateway.KindUnauthenticated, "an API key or an access token for this endpoint is required")
		}
		if err != nil {
			e.failSignIn(c, c.Param("tool"), err)
			return
		}
	}
	if err != nil {
		e.fail(c, err)
		return
	}
	c.Set(ctxPrincipal, p)
	c.Next()
}

// resourceMetadata serves the protected resource metadata of a link or of a tool's
// MCP endpoint, at the well-known path followed by the resource's path. A link that
// does not exist has none.
func (e *Edge) resourceMetadata(c *gin.Context) {
	path := strings.TrimPrefix(c.Param("path"), e.basePath)
	var resource, tool string
	parts := strings.Split(strings.TrimPrefix(path, "/"), "/")
	switch {
	case len(parts) >= 2 && len(parts) <= 3 && parts[0] == "mcp" && (len(parts) == 2 || parts[2] == "sse" || parts[2] == "messages"):
		p, err := e.view.AuthenticateLink(c.Request.Context(), parts[1])
		if err != nil {
			e.fail(c, errLinkNotFound)
			return
		}
		resource, tool = e.base+"/mcp/"+parts[1], p.Tool
	case len(parts) == 3 && parts[0] == "tools" && wire.ValidToolID(parts[1]) && (parts[2] == "mcp" || parts[2] == "sse"),
		len(parts) == 4 && parts[0] == "tools" && wire.ValidToolID(parts[1]) && parts[2] == "sse" && parts[3] == "messages":
		resource, tool = e.base+"/tools/"+parts[1]+"/"+parts[2], parts[1]
	default:
		e.fail(c, errRouteNotFound)
		return
	}
	c.Header("Access-Control-Allow-Origin", "*")
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, oauth.ResourceMetadata{
		Resource: resource, AuthorizationServers: []string{e.tokens().Identifier()},
		ScopesSupported: oauth.ToolScopes(tool), BearerMethodsSupported: []string{"header"},
		ResourceName: "toolgate: " + tool,
	})
}
