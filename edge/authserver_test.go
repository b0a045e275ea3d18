package edge_test

import (
	"bytes"
	"encoding/json"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// clientApp is an OAuth client's side on 127.0.0.1: its client ID metadata document
// and its redirect URI, which records the authorization response.
type clientApp struct {
	url       string
	responses chan url.Values
}

func newClientApp(t *testing.T) *clientApp {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &clientApp{url: "http://" + ln.Addr().String(), responses: make(chan url.Values, 1)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /client.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"client_id": a.url + "/client.json", "client_name": "Test client", "redirect_uris": []string{a.url + "/callback"},
			"token_endpoint_auth_method": "none", "grant_types": []string{"authorization_code", "refresh_token"},
		})
	})
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		a.responses <- r.URL.Query()
		_, _ = io.WriteString(w, "done")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })
	return a
}

var (
	csrfInput = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	idInput   = regexp.MustCompile(`name="id" value="([^"]+)"`)
	nextInput = regexp.MustCompile(`name="next" value="([^"]+)"`)
)

// browse follows an authorization URL as a person would in the dashboard: the
// sign-in page (with the account's key), then the consent page, allowing.
func browse(t *testing.T, e *env, authURL, key string) {
	t.Helper()
	browseWith(t, e, authURL, url.Values{"key": {key}})
}

// browseWith is browse signing in with creds: a key, or an account, user and secret.
func browseWith(t *testing.T, e *env, authURL string, creds url.Values) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	get := func(u string) (string, string) {
		resp, err := b.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.Request.URL.String(), string(body)
	}
	post := func(u string, form url.Values) (string, string) {
		resp, err := b.PostForm(u, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.Request.URL.String(), string(body)
	}
	at, page := get(authURL)
	if !strings.Contains(at, "/dashboard/signin") {
		t.Fatalf("the authorization request led to %s, not the sign-in page:\n%s", at, page)
	}
	form := url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(page)[1])},
		"next": {html.UnescapeString(nextInput.FindStringSubmatch(page)[1])}}
	for k, v := range creds {
		form[k] = v
	}
	at, page = post(e.url+"/dashboard/signin", form)
	if !strings.Contains(at, "/dashboard/oauth/consent") || !strings.Contains(page, `id="consent-allow"`) {
		t.Fatalf("sign-in led to %s, not the consent page:\n%s", at, page)
	}
	if !strings.Contains(page, "Test client") && !strings.Contains(page, "tgc_") {
		t.Fatalf("the consent page names no client:\n%s", page)
	}
	post(e.url+"/dashboard/oauth/consent", url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(page)[1])},
		"id": {idInput.FindStringSubmatch(page)[1]}, "decision": {"allow"}})
}

// TestTheGatewayIssuesTokensForItsLinks: from nothing but a link, a client discovers
// the link's metadata and the issuer's (S256, client ID metadata documents), signs
// in through the dashboard with PKCE (as a client with a metadata document, then as
// one registered dynamically), gets a code with iss, exchanges it, lists and calls
// with the token, refreshes it once it expired (the old refresh token then works no
// more), and loses access when the grant is revoked.
func TestTheGatewayIssuesTokensForItsLinks(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withTokenTTL(2*time.Second))
	key := e.account("acme", registry.Limits{})
	e.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	e.do(http.MethodPatch, "/admin/accounts/acme", `{"require_sign_in":true}`, "Authorization", "Bearer "+e.adminKey).expectOK(t)
	testenv.WaitFor(t, "acme requires sign-in", func() bool { return e.view.Snapshot().Account("acme").RequireSignIn })

	resp, _ := mcpPost(t, link, nil, initialize)
	var prm oauth.ResourceMetadata
	getJSON(t, challenge(t, resp)["resource_metadata"], &prm)
	var asm struct {
		Issuer       string   `json:"issuer"`
		Authorize    string   `json:"authorization_endpoint"`
		Token        string   `json:"token_endpoint"`
		Register     string   `json:"registration_endpoint"`
		Methods      []string `json:"code_challenge_methods_supported"`
		CIMD         bool     `json:"client_id_metadata_document_supported"`
		IssParameter bool     `json:"authorization_response_iss_parameter_supported"`
	}
	getJSON(t, prm.AuthorizationServers[0]+"/.well-known/oauth-authorization-server", &asm)
	if asm.Issuer != prm.AuthorizationServers[0] || strings.Join(asm.Methods, ",") != "S256" || !asm.CIMD || !asm.IssParameter {
		t.Fatalf("authorization server metadata %+v: want this issuer, S256 only, client ID metadata documents and iss", asm)
	}
	app := newClientApp(t)
	regBody, _ := json.Marshal(map[string]any{"client_name": "Registered client", "redirect_uris": []string{app.url + "/callback"}, "token_endpoint_auth_method": "none"})
	regResp, err := http.Post(asm.Register, "application/json", bytes.NewReader(regBody))
	if err != nil {
		t.Fatal(err)
	}
	var reg oauth.Registration
	if err := json.NewDecoder(regResp.Body).Decode(&reg); err != nil || regResp.StatusCode != http.StatusCreated || reg.ClientID == "" {
		t.Fatalf("registration: %d %+v %v", regResp.StatusCode, reg, err)
	}
	for name, clientID := range map[string]string{"client ID metadata document": app.url + "/client.json", "dynamic registration": reg.ClientID} {
		t.Run(name, func(t *testing.T) {
			cfg := oauth2.Config{ClientID: clientID, RedirectURL: app.url + "/callback", Scopes: prm.ScopesSupported,
				Endpoint: oauth2.Endpoint{AuthURL: asm.Authorize, TokenURL: asm.Token, AuthStyle: oauth2.AuthStyleInParams}}
			if asm.Issuer != e.url {
				t.Fatalf("the issuer %s is not the deployment's URL %s", asm.Issuer, e.url)
			}
			tok := signInAs(t, e, app, cfg, key, link) // iss checked against e.url
			ctx := testenv.Context(t)
			if tok.RefreshToken == "" {
				t.Fatal("no refresh token")
			}
			cs, err := goSDKSession(t, link, tok.AccessToken)
			if err != nil {
				t.Fatal(err)
			}
			if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil || res.IsError {
				t.Fatalf("call with the issued token: %v %+v", err, res)
			}
			time.Sleep(time.Until(tok.Expiry) + time.Second)
			if resp, _ := mcpPost(t, link, map[string]string{"Authorization": "Bearer " + tok.AccessToken}, initialize); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("an expired issued token: %d, want 401", resp.StatusCode)
			}
			fresh, err := cfg.TokenSource(ctx, tok).Token()
			if err != nil || fresh.AccessToken == tok.AccessToken || fresh.RefreshToken == tok.RefreshToken {
				t.Fatalf("refresh: %v", err)
			}
			if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
				t.Fatal("a refresh token worked twice")
			}
			if resp, body := mcpPost(t, link, map[string]string{"Authorization": "Bearer " + fresh.AccessToken}, initialize); resp.StatusCode != http.StatusOK {
				t.Fatalf("the refreshed token: %d %s", resp.StatusCode, body)
			}
			grants, err := e.authServer.Grants(ctx, "acme")
			if err != nil || len(grants) == 0 || grants[0].Client != clientID {
				t.Fatalf("grants %+v %v", grants, err)
			}
			revokeOnKeysPage(t, e, key, grants[0].ID)
			if resp, _ := mcpPost(t, link, map[string]string{"Authorization": "Bearer " + fresh.AccessToken}, initialize); resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("a token of a revoked grant: %d, want 401", resp.StatusCode)
			}
		})
	}
}

// TestAuthorizationRequestsNeedS256AndAResource: an authorization request without
// PKCE, with the plain method, or without a resource is refused back to the client
// (with iss), before anyone is asked to sign in.
func TestAuthorizationRequestsNeedS256AndAResource(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	e.account("acme", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	app := newClientApp(t)
	verifier := oauth2.GenerateVerifier()
	for name, params := range map[string]url.Values{
		"no PKCE":       {"resource": {link}},
		"plain PKCE":    {"resource": {link}, "code_challenge": {verifier}, "code_challenge_method": {"plain"}},
		"no resource":   {"code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}},
		"no tool scope": {"resource": {link}, "code_challenge": {oauth2.S256ChallengeFromVerifier(verifier)}, "code_challenge_method": {"S256"}, "scope": {"openid"}},
	} {
		t.Run(name, func(t *testing.T) {
			q := url.Values{"client_id": {app.url + "/client.json"}, "redirect_uri": {app.url + "/callback"}, "response_type": {"code"},
				"state": {"s"}, "scope": {"kit:list kit:call"}}
			for k, v := range params {
				q[k] = v
			}
			resp, err := http.Get(e.url + "/authorize?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			select {
			case got := <-app.responses:
				if got.Get("error") == "" || got.Get("code") != "" || got.Get("iss") != e.url || got.Get("state") != "s" {
					t.Fatalf("authorization response %v: want an error with iss and state", got)
				}
			case <-time.After(testenv.Patience):
				t.Fatalf("no error reached the client (status %d at %s)", resp.StatusCode, resp.Request.URL)
			}
		})
	}
}

// TestARequestWithoutScopeGetsTheResourcesScopes: a client that names no scope (as
// the conformance suite's does) is granted the resource's tool scopes at consent, for
// a link and for a tool's MCP endpoint alike.
func TestARequestWithoutScopeGetsTheResourcesScopes(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	key := e.account("acme", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	app := newClientApp(t)
	cfg := oauth2.Config{ClientID: app.url + "/client.json", RedirectURL: app.url + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	for _, resource := range []string{link, e.url + "/tools/kit/mcp"} {
		verifier := oauth2.GenerateVerifier()
		browse(t, e, cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)), key)
		got := <-app.responses
		tok, err := cfg.Exchange(testenv.Context(t), got.Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatalf("exchange after %v: %v", got, err)
		}
		checked, err := e.issuer.Verify(testenv.Context(t), tok.AccessToken, resource, time.Now())
		if err != nil || checked.Scope != "kit:list kit:call" {
			t.Fatalf("token for %s: %+v %v: want the tool's scopes", resource, checked, err)
		}
	}
	// A token answer is not to be cached, a refused one neither.
	resp, err := http.PostForm(e.url+"/oauth/token", url.Values{"grant_type": {"authorization_code"}, "code": {"made-up"}, "client_id": {cfg.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Cache-Control") != "no-store" || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("token answer %d with Cache-Control %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
}

// TestConsentOnlyForTheAccountsOwnResources: signed in as one account, a client's
// request for another account's link is refused at consent, and no code is made.
func TestConsentOnlyForTheAccountsOwnResources(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	key := e.account("acme", registry.Limits{})
	e.account("other", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	e.connect("acme", "kit")
	otherLink := e.url + "/mcp/" + e.signer.Token("other", "kit", e.connect("other", "kit").LinkNonce)
	app := newClientApp(t)
	cfg := oauth2.Config{ClientID: app.url + "/client.json", RedirectURL: app.url + "/callback",
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token"}}
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	read := func(resp *http.Response, err error) (int, string) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	_, page := read(b.Get(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", otherLink))))
	status, page := read(b.PostForm(e.url+"/dashboard/signin", url.Values{"key": {key},
		"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(page)[1])}, "next": {html.UnescapeString(nextInput.FindStringSubmatch(page)[1])}}))
	if status != http.StatusForbidden || strings.Contains(page, `id="consent-allow"`) {
		t.Fatalf("consent for another account's link: %d\n%s", status, page)
	}
	select {
	case got := <-app.responses:
		t.Fatalf("the client got an answer: %v", got)
	default:
	}
}

// revokeOnKeysPage signs in to the dashboard with key and revokes the grant id from
// the keys page, as a person would.
func revokeOnKeysPage(t *testing.T, e *env, key, id string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	b := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	page := func(resp *http.Response, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return string(body)
	}
	form := page(b.Get(e.url + "/dashboard/signin"))
	page(b.PostForm(e.url+"/dashboard/signin", url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(form)[1])}, "key": {key}}))
	keys := page(b.Get(e.url + "/dashboard/keys"))
	if !strings.Contains(keys, `id="grant-`+id+`"`) {
		t.Fatalf("the keys page does not list grant %s:\n%s", id, keys)
	}
	after := page(b.PostForm(e.url+"/dashboard/grants/"+id+"/revoke", url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(keys)[1])}}))
	if !strings.Contains(after, "The access was revoked") || strings.Contains(after, `id="grant-`+id+`"`) {
		t.Fatalf("after revoking, the keys page reads:\n%s", after)
	}
}
