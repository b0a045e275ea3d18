package edge

import (
	"context"
	"errors"
	"net/http"
	"regexp"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// OAuthCallbackPath is where OAuth providers send the account holder's browser back:
// the redirect URI the deployment registers with each, on its base URL. Any edge
// ends the authorization, whichever began it.
const OAuthCallbackPath = wire.OAuthCallbackPath

// OAuthClientPath is where the gateway serves its OAuth client ID metadata document
// (draft-ietf-oauth-client-id-metadata-document): its URL is the client id the gateway
// gives an authorization server that takes such documents, as MCP's do.
const OAuthClientPath = wire.OAuthClientPath

// ClientMetadata is the gateway's client ID metadata document.
type ClientMetadata struct {
	ClientID                string   `json:"client_id"`
	ClientName              string   `json:"client_name"`
	ClientURI               string   `json:"client_uri"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
}

// oauthClientDocument serves the gateway's client ID metadata document: a public
// client (PKCE, no secret) whose one redirect URI is the callback.
func (e *Edge) oauthClientDocument(c *gin.Context) {
	if e.cfg.Credentials == nil || !e.cfg.Credentials.OAuth() {
		e.fail(c, errNoOAuth)
		return
	}
	c.Header("Cache-Control", "public, max-age=3600")
	c.JSON(http.StatusOK, ClientMetadata{ClientID: e.base + OAuthClientPath, ClientName: "toolgate", ClientURI: e.base,
		RedirectURIs: []string{e.base + OAuthCallbackPath}, GrantTypes: []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"}, TokenEndpointAuthMethod: "none"})
}

// OAuthBrowserCookie holds, in the browser that began an authorization from the
// dashboard, the value its callback must bring back.
const OAuthBrowserCookie = "tg_oauth_browser"

// ConnectURL is where an account holder authorizes tool at its OAuth provider, on
// the edge whose base URL is base: the dashboard's Connect page, which begins the
// authorization for the signed-in account.
func ConnectURL(base, tool string) string {
	return base + DashboardPath + "tools/" + tool + "/connect"
}

// Authorization is the answer of POST /admin/connections/{account}/{tool}/authorize.
type Authorization struct {
	// ConnectURL is the provider's authorization URL for this one authorization:
	// opened in the account holder's browser, it connects the account.
	ConnectURL string `json:"connect_url"`
}

// OAuthClient is the body of PUT /admin/tools/{tool}/oauth-client.
type OAuthClient struct {
	ClientSecret string `json:"client_secret"`
}

func (e *Edge) oauthRoutes(g *gin.RouterGroup) {
	g.POST("/connections/:account/:tool/authorize", e.authorizeConnection)
	g.PUT("/tools/:tool/oauth-client", e.setOAuthClient)
	g.DELETE("/tools/:tool/oauth-client", e.clearOAuthClient)
}

// connectURL is where account holders connect tool; "" without a dashboard.
func (e *Edge) connectURL(tool string) string {
	if e.cfg.Dashboard == nil {
		return ""
	}
	return ConnectURL(e.base, tool)
}

// errNoOAuth: this edge runs no OAuth connections.
var errNoOAuth = newHTTPError(gateway.KindNotFound, "OAuth connections are off on this edge: start it with --credentials-key-file")

// oauthTool is the tool a route names, which must declare an OAuth provider.
func (e *Edge) oauthTool(c *gin.Context, tool string) (*registry.Tool, bool) {
	if e.cfg.Credentials == nil || !e.cfg.Credentials.OAuth() {
		e.fail(c, errNoOAuth)
		return nil, false
	}
	entry := e.view.Snapshot().RawTool(tool)
	if entry == nil {
		e.fail(c, registry.ErrToolNotFound)
		return nil, false
	}
	if entry.Tool.Connection == nil || entry.Tool.Connection.OAuth == nil {
		e.fail(c, credentials.ErrNoOAuth)
		return nil, false
	}
	return entry.Tool, true
}

// authorizeConnection begins an account's authorization of a tool for use without
// the dashboard: the answer's URL, opened in a browser, ends at the callback.
func (e *Edge) authorizeConnection(c *gin.Context) {
	account, tool, ok := e.pathConnection(c)
	if !ok {
		return
	}
	if _, err := e.store.Connection(c.Request.Context(), account, tool); err != nil {
		e.fail(c, err)
		return
	}
	t, ok := e.oauthTool(c, tool)
	if !ok {
		return
	}
	u, err := e.cfg.Credentials.BeginOAuth(c.Request.Context(), account, t, "")
	if err != nil {
		e.fail(c, err)
		return
	}
	c.Header("Cache-Control", "no-store")
	c.JSON(http.StatusOK, Authorization{ConnectURL: u})
}

func (e *Edge) setOAuthClient(c *gin.Context) {
	t, ok := e.oauthTool(c, c.Param("tool"))
	if !ok {
		return
	}
	var body OAuthClient
	if err := decodeStrict(c.Request.Body, &body); err != nil {
		e.fail(c, err)
		return
	}
	defer func() { body.ClientSecret = "" }()
	if body.ClientSecret == "" {
		e.fail(c, invalidInput([]registry.Violation{{Pointer: "/client_secret", Message: "required (DELETE the client to have none)"}}))
		return
	}
	if err := e.cfg.Credentials.SetClientSecret(c.Request.Context(), t.ID, body.ClientSecret); err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionSetCredentials, "", "", t.ID)
	c.Status(http.StatusNoContent)
}

func (e *Edge) clearOAuthClient(c *gin.Context) {
	t, ok := e.oauthTool(c, c.Param("tool"))
	if !ok {
		return
	}
	if err := e.cfg.Credentials.SetClientSecret(c.Request.Context(), t.ID, ""); err != nil {
		e.fail(c, err)
		return
	}
	e.adminChange(c, http.StatusNoContent, audit.ActionClearCredentials, "", "", t.ID)
	c.Status(http.StatusNoContent)
}

// providerError is the shape of an error code a provider may send back (RFC 6749
// section 4.1.2.1); anything else is not repeated.
var providerError = regexp.MustCompile(`^[a-z_]{1,64}$`)

// oauthCallback ends an authorization on whichever edge the provider's redirect
// reached: the code exchanged, the grant stored; then the dashboard's page of the
// tool when the dashboard began it.
func (e *Edge) oauthCallback(c *gin.Context) {
	if e.cfg.Credentials == nil || !e.cfg.Credentials.OAuth() {
		e.fail(c, errNoOAuth)
		return
	}
	c.Header("Cache-Control", "no-store")
	if code := c.Query("error"); code != "" {
		msg := "the provider did not authorize the tool"
		if providerError.MatchString(code) {
			msg += ": " + code
		}
		e.fail(c, newHTTPError(gateway.KindInvalidRequest, msg))
		return
	}
	snap := e.view.Snapshot()
	browser := ""
	if ck, err := c.Request.Cookie(OAuthBrowserCookie); err == nil {
		browser = ck.Value
	}
	account, tool, err := e.cfg.Credentials.FinishOAuth(c.Request.Context(), c.Query("state"), c.Query("code"), c.Query("iss"), browser, func(id string) *wire.Tool {
		if entry := snap.RawTool(id); entry != nil {
			return entry.Tool
		}
		return nil
	})
	if errors.Is(err, credentials.ErrIssuer) {
		e.fail(c, newHTTPError(gateway.KindInvalidRequest, "the authorization response came from another issuer than the tool's provider: connect again"))
		return
	}
	if errors.Is(err, credentials.ErrOtherBrowser) {
		e.fail(c, newHTTPError(gateway.KindInvalidRequest, "this authorization was begun in another browser: connect again from this one"))
		return
	}
	if errors.Is(err, credentials.ErrFlowUnknown) {
		e.fail(c, newHTTPError(gateway.KindInvalidRequest, "this authorization is unknown, used already or expired: connect again"))
		return
	}
	if err != nil {
		e.fail(c, err)
		return
	}
	go e.listWithGrant(account, tool)
	if browser != "" && e.cfg.Dashboard != nil {
		// Begun on the dashboard: back to the tool's page there.
		http.SetCookie(c.Writer, &http.Cookie{Name: OAuthBrowserCookie, Path: e.basePath + OAuthCallbackPath, MaxAge: -1})
		c.Redirect(http.StatusSeeOther, e.basePath+DashboardPath+"tools/"+tool+"?connected=1")
		return
	}
	c.String(http.StatusOK, "The tool %s is connected. You may close this page.\n", tool)
}

// listWithGrant asks a tool whose record names no methods yet, or whose methods
// differ per account, for its tools, with the grant account has just connected: a
// bridged remote server that requires OAuth lists its tools only to an account's
// token, and each account's own. The request carries the account's sealed token, as
// each of its requests does, and the bridge makes what the server lists the
// account's methods.
func (e *Edge) listWithGrant(account, tool string) {
	entry := e.view.Snapshot().RawTool(tool)
	if entry == nil || !entry.Tool.Capabilities.SessionTools || (len(entry.Tool.Methods) > 0 && entry.Tool.AccountMethods == nil) {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.gw.Timeout(nil, 0))
	defer cancel()
	if _, err := e.gw.Forward(ctx, &gateway.Call{Principal: registry.Principal{Account: account}, Tool: tool, Method: "tools/list"}); err != nil {
		e.log.Warn("edge: the tool did not list its tools with the account's new grant", "tool", tool, "err", err)
	}
}

// relist asks a tool whose methods differ per account for account's tools, in the
// background and once at a time per connection, when the connection is ready but the
// record holds no list of the account's: the bridge forgot it (its --account-lists)
// or restarted. The account sees the tool's methods once the bridge put them.
func (e *Edge) relist(snap *registry.Snapshot, account, tool string, st ConnectionState) {
	raw := snap.RawTool(tool)
	if raw == nil || raw.Tool.AccountMethods == nil || st.State != ConnectionReady || raw.Tool.AccountMethods.Of(account) != nil {
		return
	}
	key := account + "." + tool
	if _, busy := e.relisting.LoadOrStore(key, true); busy {
		return
	}
	go func() {
		defer e.relisting.Delete(key)
		e.listWithGrant(account, tool)
	}()
}
