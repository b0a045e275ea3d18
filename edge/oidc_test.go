package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// The deployment behind its own identity provider: zitadel's OpenID provider
// (internal/testidp) over real HTTP issues the access tokens, whose claim
// toolgate_account names the account; its first user is acme's, its second globex's.

const (
	idpClient = "mcp-client"
	idpSecret = "mcp-client-secret-4b1f"
)

// idpSetup is an edge behind a provider, with acme's and globex's links to kit,
// both requiring sign-in.
type idpSetup struct {
	e                     *env
	idp                   *testidp.Provider
	app                   *clientApp
	link, globexLink, api string // acme's link, globex's link, kit's MCP endpoint
	acmeKey               string // an API key of acme's
}

func newIdPSetup(t *testing.T, idpOpts testidp.Options, cfg oauth.ExternalConfig, opts ...option) *idpSetup {
	t.Helper()
	s := &idpSetup{app: newClientApp(t)}
	idpOpts.ClientID, idpOpts.ClientSecret, idpOpts.RedirectURI = idpClient, idpSecret, s.app.url+"/callback"
	idpOpts.JWTAccessTokens = true
	if idpOpts.Claims == nil {
		idpOpts.Claims = map[string]map[string]any{
			testidp.Subject: {"toolgate_account": "acme"}, testidp.SecondSubject: {"toolgate_account": "globex"}}
	}
	s.idp = testidp.Start(t, idpOpts)
	cfg.Issuer, cfg.AccountClaim, cfg.UserClaim = s.idp.Issuer, "toolgate_account", "sub"
	cfg.AcceptJWTTyp = true // zitadel's provider labels its access tokens JWT
	if cfg.KeysMaxAge == 0 {
		cfg.KeysMaxAge = time.Hour
	}
	x, err := oauth.DiscoverExternal(testenv.Context(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.e = newEnv(t, append([]option{withMCP(), withEdge(func(c *edge.Config) { c.IdP = x })}, opts...)...)
	e := s.e
	s.acmeKey = e.account("acme", registry.Limits{})
	e.account("globex", registry.Limits{})
	e.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	s.link = e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	s.globexLink = e.url + "/mcp/" + e.signer.Token("globex", "kit", e.connect("globex", "kit").LinkNonce)
	s.api = e.url + "/tools/kit/mcp"
	for _, a := range []string{"acme", "globex"} {
		e.do(http.MethodPatch, "/admin/accounts/"+a, `{"require_sign_in":true}`, "Authorization", "Bearer "+e.adminKey).expectOK(t)
		testenv.WaitFor(t, a+" requires sign-in", func() bool { return e.view.Snapshot().Account(a).RequireSignIn })
	}
	return s
}

// token signs username in at the provider for resource (the form's post and the
// redirects over HTTP, as a browser would) and exchanges the code, with PKCE, as
// golang.org/x/oauth2 does: the access token.
func (s *idpSetup) token(t *testing.T, username, resource string, scopes ...string) string {
	t.Helper()
	return s.grant(t, username, resource, scopes...).AccessToken
}

// grant is token's whole answer, with the ID token where openid was asked for.
func (s *idpSetup) grant(t *testing.T, username, resource string, scopes ...string) *oauth2.Token {
	t.Helper()
	cfg := oauth2.Config{ClientID: idpClient, ClientSecret: idpSecret, RedirectURL: s.app.url + "/callback", Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: s.idp.Issuer + "/auth", TokenURL: s.idp.Issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}}
	verifier := oauth2.GenerateVerifier()
	u := cfg.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if status, body, err := s.idp.SignInAs(u, username); err != nil || status != http.StatusOK {
		t.Fatalf("sign in at the provider: %d %s %v", status, body, err)
	}
	var code string
	select {
	case got := <-s.app.responses:
		code = got.Get("code")
	case <-time.After(testenv.Patience):
		t.Fatal("the provider sent no code")
	}
	tok, err := cfg.Exchange(testenv.Context(t), code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	return tok
}

const callEcho = `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`

// expectRefused posts body to url with token and wants status and code, with a
// challenge whose error is errCode, which it returns.
func expectRefused(t *testing.T, name, url, token, body string, status int, code, errCode string) map[string]string {
	t.Helper()
	resp, b := mcpPost(t, url, map[string]string{"Authorization": "Bearer " + token}, body)
	var env struct{ Error struct{ Code string } }
	_ = json.Unmarshal(b, &env)
	if resp.StatusCode != status || env.Error.Code != code {
		t.Fatalf("%s: %d %s, want %d %s", name, resp.StatusCode, b, status, code)
	}
	ch := challenge(t, resp)
	if ch["error"] != errCode {
		t.Fatalf("%s: challenge %v, want error=%s", name, ch, errCode)
	}
	return ch
}

// expectTaken: the go-sdk's MCP client lists and calls at url with token.
func expectTaken(t *testing.T, name, url, token string) {
	t.Helper()
	cs, err := goSDKSession(t, url, token)
	if err != nil {
		t.Fatalf("%s: connect: %v", name, err)
	}
	if _, err := cs.ListTools(testenv.Context(t), nil); err != nil {
		t.Fatalf("%s: list: %v", name, err)
	}
	if res, err := cs.CallTool(testenv.Context(t), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"x": 1}}); err != nil || res.IsError {
		t.Fatalf("%s: call: %v %+v", name, err, res)
	}
}

// TestTheTypeScriptClientSignsInAtTheIdP: from nothing but a link URL, the
// TypeScript SDK's OAuth flow finds the provider in the link's own metadata
// document, sends the user to its login page, which headless Chromium fills in, and
// lists and calls with the provider's token, whose audience is the link (the SDK
// sends the link as its resource indicator; this provider honours RFC 8707); once
// the token expired, it refreshes at the provider and calls again.
func TestTheTypeScriptClientSignsInAtTheIdP(t *testing.T) {
	const ttl = 3 * time.Second
	s := newIdPSetup(t, testidp.Options{ResourceAudience: true, RefreshTokens: true, AccessTokenLifetime: ttl},
		oauth.ExternalConfig{KeysMinRefetch: time.Second})
	resp, _ := mcpPost(t, s.link, nil, initialize)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("bare link: %d, want 401", resp.StatusCode)
	}
	var meta oauth.ResourceMetadata
	getJSON(t, challenge(t, resp)["resource_metadata"], &meta)
	if meta.Resource != s.link || len(meta.AuthorizationServers) != 1 || meta.AuthorizationServers[0] != s.idp.Issuer {
		t.Fatalf("metadata %+v: want resource %s and the provider %s alone", meta, s.link, s.idp.Issuer)
	}
	var other oauth.ResourceMetadata
	if getJSON(t, mustMetadataURL(t, s.globexLink), &other); other.Resource != s.globexLink || other.AuthorizationServers[0] != s.idp.Issuer {
		t.Fatalf("globex's link's document %+v: want its own", other)
	}
	// The built-in authorization server is off behind a provider.
	if r, err := http.Get(s.e.url + "/.well-known/oauth-authorization-server"); err != nil || r.StatusCode != http.StatusNotFound {
		t.Fatalf("the built-in server's metadata: %v %v, want 404", r, err)
	}

	browser := testenv.Chromium(t)
	authorize := func(u string) string {
		ctx, cancel := context.WithTimeout(browser, testenv.Patience)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Steps(
			chromedp.Navigate(u),
			chromedp.WaitVisible(chromedp.CSS("#username")),
			chromedp.SendKeys(chromedp.CSS("#username"), s.idp.Username()),
			chromedp.SendKeys(chromedp.CSS("#password"), testidp.Password),
			chromedp.Submit(chromedp.CSS("#password")),
		)); err != nil {
			t.Errorf("sign in at the provider: %v", err)
			return ""
		}
		select {
		case got := <-s.app.responses:
			return got.Get("code")
		case <-ctx.Done():
			t.Error("the browser brought no code back")
			return ""
		}
	}
	c := tsclient.OAuthRegistered(t, s.link, idpClient, idpSecret, s.app.url+"/callback", authorize)
	ctx := testenv.Context(t)
	tools, err := c.Do(ctx, map[string]any{"op": "tools"})
	if err != nil || !strings.Contains(string(tools), "echo") {
		t.Fatalf("tools: %s %v", tools, err)
	}
	if got, err := c.Do(ctx, map[string]any{"op": "call", "name": "echo", "args": map[string]any{"x": 1}}); err != nil || strings.Contains(string(got), `"isError":true`) {
		t.Fatalf("call: %s %v", got, err)
	}
	time.Sleep(ttl + time.Second) // the access token expires: the SDK refreshes it at the provider
	if got, err := c.Do(ctx, map[string]any{"op": "call", "name": "echo", "args": map[string]any{}}); err != nil || strings.Contains(string(got), `"isError":true`) {
		t.Fatalf("call after the token expired: %s %v\n%s", got, err, c.Stderr())
	}
	if s.idp.Refreshes() == 0 {
		t.Fatal("the SDK did not refresh at the provider")
	}
	if got := s.idp.Resources("auth"); len(got) != 1 || got[0] != s.link {
		t.Fatalf("the SDK sent the provider the resources %v: want the link", got)
	}
	if !strings.Contains(s.e.logs.String(), `"account":"acme","oauth_client":"`+idpClient+`","user":"`+testidp.Subject+`"`) {
		t.Fatalf("the access log names no OAuth client and user:\n%s", s.e.logs.String())
	}
}

func mustMetadataURL(t *testing.T, resource string) string {
	t.Helper()
	u, err := oauth.MetadataURL(resource)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestIdPTokens: the provider's tokens are taken where their audience and account
// say, and only there: another account's token at acme's link, one for another
// resource, one of another issuer, one naming no account, an expired one → 401; one without the call scope
// → 403 naming it; a token for kit's MCP endpoint reaches it as its account; the
// account's API key still opens its link.
func TestIdPTokens(t *testing.T) {
	const ttl = 12 * time.Second // long enough for a loaded machine to use a token before it expires
	s := newIdPSetup(t, testidp.Options{ResourceAudience: true, AccessTokenLifetime: ttl}, oauth.ExternalConfig{KeysMinRefetch: time.Second})
	full := oauth.ToolScopes("kit")

	expectTaken(t, "acme's token for its link", s.link, s.token(t, s.idp.Username(), s.link, full...))
	expectTaken(t, "globex's token for its link", s.globexLink, s.token(t, testidp.SecondUsername, s.globexLink, full...))
	expectTaken(t, "acme's token for kit's endpoint", s.api, s.token(t, s.idp.Username(), s.api, full...))
	expectTaken(t, "acme's API key at its link", s.link, s.acmeKey)
	// The legacy SSE transport of the link takes the link's token too.
	req, _ := http.NewRequestWithContext(testenv.Context(t), http.MethodGet, s.link+"/sse", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+s.token(t, s.idp.Username(), s.link, full...))
	sseCtx, cancel := context.WithCancel(req.Context())
	resp, err := http.DefaultClient.Do(req.WithContext(sseCtx))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("legacy SSE with the link's token: %v %v", resp, err)
	}
	cancel()
	resp.Body.Close()

	expectRefused(t, "globex's user with a token for acme's link", s.link, s.token(t, testidp.SecondUsername, s.link, full...),
		initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	expectRefused(t, "a token for globex's link at acme's", s.link, s.token(t, s.idp.Username(), s.globexLink, full...),
		initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	expectRefused(t, "a token for kit's endpoint at the link", s.link, s.token(t, s.idp.Username(), s.api, full...),
		initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	expectRefused(t, "a token without the call scope", s.link, s.token(t, s.idp.Username(), s.link, oauth.ListScope("kit")),
		callEcho, 403, gateway.CodeInsufficientScope, "insufficient_scope")

	// Another provider, with the same claims and the same client: not this deployment's.
	stranger := &idpSetup{app: s.app, idp: testidp.Start(t, testidp.Options{ClientID: idpClient, ClientSecret: idpSecret,
		RedirectURI: s.app.url + "/callback", JWTAccessTokens: true, ResourceAudience: true,
		Claims: map[string]map[string]any{testidp.Subject: {"toolgate_account": "acme"}}})}
	expectRefused(t, "another issuer's token", s.link, stranger.token(t, stranger.idp.Username(), s.link, full...),
		initialize, 401, gateway.CodeInvalidToken, "invalid_token")

	// A provider whose tokens name the account in another claim than the one configured.
	unnamed := newIdPSetup(t, testidp.Options{ResourceAudience: true, Claims: map[string]map[string]any{testidp.Subject: {"tenant": "acme"}}},
		oauth.ExternalConfig{KeysMinRefetch: time.Second})
	expectRefused(t, "a token naming no account", unnamed.link, unnamed.token(t, unnamed.idp.Username(), unnamed.link, full...),
		initialize, 401, gateway.CodeInvalidToken, "invalid_token")

	expiring := s.token(t, s.idp.Username(), s.link, full...)
	expectTaken(t, "a token before it expires", s.link, expiring)
	time.Sleep(ttl + time.Second)
	expectRefused(t, "an expired token", s.link, expiring, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
}

// TestIdPWithoutResourceIndicators: a provider that ignores RFC 8707 puts its client
// in aud. Such a token is refused as for another audience, unless the deployment
// names that audience (--oidc-audience); then the account claim still keeps
// tenants apart.
func TestIdPWithoutResourceIndicators(t *testing.T) {
	strict := newIdPSetup(t, testidp.Options{}, oauth.ExternalConfig{KeysMinRefetch: time.Second})
	expectRefused(t, "a token for the client at a resource that wants its own URL", strict.link,
		strict.token(t, strict.idp.Username(), strict.link, oauth.ToolScopes("kit")...), initialize, 401, gateway.CodeInvalidToken, "invalid_token")

	s := newIdPSetup(t, testidp.Options{}, oauth.ExternalConfig{Audience: idpClient, KeysMinRefetch: time.Second})
	tok := s.token(t, s.idp.Username(), s.link, oauth.ToolScopes("kit")...)
	expectTaken(t, "a token for the configured audience", s.link, tok)
	expectRefused(t, "acme's token at globex's link", s.globexLink, tok, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
}

// TestIdPIDTokenIsNoAccessToken: where the configured audience is the client id (a
// provider without RFC 8707), the provider's ID token carries that audience and the
// account claim too; it is refused at the link for being an ID token (typ JWT with
// at_hash), while the access token of the same grant is taken; and an edge that does
// not accept the JWT label (no --oidc-accept-jwt-typ) refuses that access token.
func TestIdPIDTokenIsNoAccessToken(t *testing.T) {
	s := newIdPSetup(t, testidp.Options{Claims: map[string]map[string]any{testidp.Subject: {"toolgate_account": "acme"}}},
		oauth.ExternalConfig{Audience: idpClient, KeysMinRefetch: time.Second})
	g := s.grant(t, s.idp.Username(), s.link, append(oauth.ToolScopes("kit"), "openid")...)
	id, _ := g.Extra("id_token").(string)
	if id == "" {
		t.Fatal("the provider sent no ID token")
	}
	expectRefused(t, "the ID token", s.link, id, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	expectTaken(t, "the access token of the same grant", s.link, g.AccessToken)

	strict, err := oauth.DiscoverExternal(testenv.Context(t), oauth.ExternalConfig{Issuer: s.idp.Issuer, AccountClaim: "toolgate_account",
		UserClaim: "sub", Audience: idpClient, KeysMinRefetch: time.Second, KeysMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := strict.Verify(testenv.Context(t), g.AccessToken, s.link, time.Now()); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("a JWT-labelled access token without --oidc-accept-jwt-typ: %v, want refused", err)
	}
}

// TestIdPKeyRotation: the provider rotates its signing key; a token signed with the
// new key is taken once the edge fetched the key set again, which a token naming an
// unknown key makes it do (at most once per KeysMinRefetch: within it, such a token
// is refused without a fetch); and after KeysMaxAge the set is fetched anew, so a
// key the provider dropped no longer verifies.
func TestIdPKeyRotation(t *testing.T) {
	full := oauth.ToolScopes("kit")
	t.Run("refetch on an unknown key", func(t *testing.T) {
		s := newIdPSetup(t, testidp.Options{ResourceAudience: true}, oauth.ExternalConfig{KeysMinRefetch: 0})
		expectTaken(t, "the first key's token", s.link, s.token(t, s.idp.Username(), s.link, full...))
		fetches := s.idp.KeyFetches()
		if _, err := s.idp.RotateKey(); err != nil {
			t.Fatal(err)
		}
		expectTaken(t, "the new key's token", s.link, s.token(t, s.idp.Username(), s.link, full...))
		if got := s.idp.KeyFetches(); got != fetches+1 {
			t.Fatalf("key set fetches %d → %d: want one more, for the new key", fetches, got)
		}
	})
	t.Run("no refetch within the minimum", func(t *testing.T) {
		s := newIdPSetup(t, testidp.Options{ResourceAudience: true}, oauth.ExternalConfig{KeysMinRefetch: time.Hour})
		expectTaken(t, "the first key's token", s.link, s.token(t, s.idp.Username(), s.link, full...))
		fetches := s.idp.KeyFetches()
		if _, err := s.idp.RotateKey(); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, "a new key's token within the minimum", s.link, s.token(t, s.idp.Username(), s.link, full...),
			initialize, 401, gateway.CodeInvalidToken, "invalid_token")
		if got := s.idp.KeyFetches(); got != fetches {
			t.Fatalf("key set fetches %d → %d: want none within the minimum", fetches, got)
		}
	})
	t.Run("a dropped key after the maximum age", func(t *testing.T) {
		const maxAge = 2 * time.Second
		s := newIdPSetup(t, testidp.Options{ResourceAudience: true}, oauth.ExternalConfig{KeysMinRefetch: time.Hour, KeysMaxAge: maxAge})
		old := s.token(t, s.idp.Username(), s.link, full...)
		expectTaken(t, "the first key's token", s.link, old)
		for range 2 { // the key set keeps one previous key: two rotations drop the first
			if _, err := s.idp.RotateKey(); err != nil {
				t.Fatal(err)
			}
		}
		fetches := s.idp.KeyFetches()
		time.Sleep(maxAge + 500*time.Millisecond)
		expectRefused(t, "the dropped key's token", s.link, old, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
		if got := s.idp.KeyFetches(); got <= fetches {
			t.Fatalf("key set fetches %d → %d: want the set fetched anew past its age, the minimum notwithstanding", fetches, got)
		}
		expectTaken(t, "the current key's token", s.link, s.token(t, s.idp.Username(), s.link, full...))
	})
}

// TestIdPDashboardNamesTheProvider: behind a provider the built-in authorization
// server is off, and the dashboard says where MCP clients sign in instead: its
// consent page is 404 naming the provider, the keys page names it in place of the
// list of signed-in clients, and the tool page sends clients to it rather than to
// this dashboard's API-key sign-in.
func TestIdPDashboardNamesTheProvider(t *testing.T) {
	s := newIdPSetup(t, testidp.Options{ResourceAudience: true}, oauth.ExternalConfig{KeysMinRefetch: time.Second}, withDashboard())
	want := "MCP clients sign in at this deployment&#39;s identity provider, " + s.idp.Issuer
	if status, page := dashboardGet(t, s.e, s.acmeKey, "oauth/consent?id=any"); status != http.StatusNotFound || !strings.Contains(page, want) {
		t.Fatalf("consent page: %d, want 404 naming the provider:\n%s", status, page)
	}
	if status, page := dashboardGet(t, s.e, s.acmeKey, "keys"); status != http.StatusOK || !strings.Contains(page, `id="grants-at-idp"`) ||
		!strings.Contains(page, s.idp.Issuer) || strings.Contains(page, "No MCP client has signed in") {
		t.Fatalf("keys page: %d, want the provider in place of the grants:\n%s", status, page)
	}
	if status, page := dashboardGet(t, s.e, s.acmeKey, "tools/kit/sse"); status != http.StatusOK || !strings.Contains(page, `id="signin-idp"`) ||
		strings.Contains(page, "where you sign in with an API key and allow the client") {
		t.Fatalf("tool page: %d, want clients sent to the provider:\n%s", status, page)
	}
}
