package edge_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/registry"
)

// oauthTool acts with each account's access token at the provider whose issuer is
// issuer, sealed to key.
func oauthTool(key nkeys.KeyPair, issuer string) registry.Tool {
	pub, _ := key.PublicKey()
	return registry.Tool{ID: "calendar", Methods: []registry.Method{{Name: "whoami"}},
		Connection: &wire.Connection{SealKey: pub, OAuth: &wire.OAuthProvider{
			Issuer: issuer, ClientID: "toolgate", Scopes: []string{"openid", "offline_access"}}}}
}

// serveAsAccount serves tool: each call asks the provider's userinfo endpoint who
// the call's access token is, and answers the subject and a hash of the token.
func serveAsAccount(e *env, tool registry.Tool, key nkeys.KeyPair, idp *testidp.Provider) {
	e.serve(tool, func(_ string, m *nats.Msg) {
		values, err := wire.OpenCredentials(key, m.Header.Get(wire.HeaderCredentials), m.Header.Get(wire.HeaderAccount), tool.ID)
		if err != nil {
			respondError(m, "no_credentials", err.Error())
			return
		}
		req, _ := http.NewRequest(http.MethodGet, idp.Issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+values[wire.OAuthTokenField])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			respondError(m, "userinfo", err.Error())
			return
		}
		defer res.Body.Close()
		var info struct {
			Sub string `json:"sub"`
		}
		if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&info) != nil {
			respondError(m, "userinfo", "the provider refused the token: "+res.Status)
			return
		}
		h := sha256.Sum256([]byte(values[wire.OAuthTokenField]))
		names := slices.Sorted(maps.Keys(values))
		b, _ := json.Marshal(map[string]string{"sub": info.Sub, "token": hex.EncodeToString(h[:8]), "values": strings.Join(names, ",")})
		respond(m, 0, "application/json", b)
	})
}

type whoami struct{ Sub, Token, Values string }

// TestOAuthConnection: a tool declares an OAuth provider (a real OpenID provider,
// zitadel's); an account's connection needs it authorized; the admin API's connect
// URL, completed at the provider's login page, lands on the other edge's callback;
// both edges' calls then carry the account's access token (the provider answers
// for it), and never its refresh token. When the token comes due, concurrent calls on
// both edges refresh it once at the provider, which rotates refresh tokens; once the
// provider revokes the grant, the connection needs authorizing again and calls get
// connection_required with where to connect.
func TestOAuthConnection(t *testing.T) {
	spans() // the edges' spans are kept, to be searched for the client's secret
	keys := testKeyring(t)
	a := newEnv(t, withCredentials(keys), withDashboard())
	b := newEnv(t, withCredentials(keys), withDashboard(), onServer(a.srv.ClientURL()))
	const lifetime, early = 60 * time.Second, 50 * time.Second
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "client-secret-9d1e", RedirectURI: a.url + edge.OAuthCallbackPath,
		AccessTokenLifetime: lifetime})
	for _, e := range []*env{a, b} {
		cfg := credentials.DefaultOAuthConfig(a.url + edge.OAuthCallbackPath)
		cfg.RefreshBefore = early
		if err := e.vault.EnableOAuth(testenv.Context(t), cfg, false); err != nil {
			t.Fatal(err)
		}
	}
	toolKey, _ := nkeys.CreateCurveKeys()
	tool := oauthTool(toolKey, idp.Issuer)
	const resource = "https://calendar.example.com/mcp"
	tool.Connection.OAuth.Resource = resource
	serveAsAccount(a, tool, toolKey, idp)
	testenv.WaitFor(t, "the second edge sees the tool", func() bool { return b.view.Snapshot().Instances(tool.ID) > 0 })
	key := a.accountKey("acme", registry.Limits{}, nil)
	a.connect("acme", "calendar")
	testenv.WaitFor(t, "the second edge sees the key and connection", func() bool {
		_, err := b.view.Snapshot().AuthenticateKey(key, time.Now())
		return err == nil && b.view.Snapshot().Connection("acme", "calendar") != nil
	})

	doc := decode[edge.ClientMetadata](t, b.do(http.MethodGet, edge.OAuthClientPath, ""))
	if doc.ClientID != b.url+edge.OAuthClientPath || !slices.Equal(doc.RedirectURIs, []string{b.url + edge.OAuthCallbackPath}) || doc.TokenEndpointAuthMethod != "none" {
		t.Fatalf("the client ID metadata document: %+v", doc)
	}
	st := decode[edge.ToolInfo](t, a.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", key)).Connection
	if st == nil || st.State != edge.ConnectionNeedsCredentials || !slices.Equal(st.Missing, []string{"oauth"}) || st.ConnectURL != edge.ConnectURL(a.url, "calendar") {
		t.Fatalf("before connecting: %+v; want needs_credentials, oauth missing, the connect URL", st)
	}
	refused := b.call(key, "calendar", "whoami", "{}").expect(t, http.StatusConflict, "connection_required")
	if !strings.Contains(refused.Message, edge.ConnectURL(b.url, "calendar")) {
		t.Fatalf("connection_required: %q; want the connect URL", refused.Message)
	}

	// The client's secret is the deployment's, kept as credentials are.
	if r := a.admin(http.MethodPut, "/tools/calendar/oauth-client", `{"client_secret":"client-secret-9d1e"}`); r.status != http.StatusNoContent {
		t.Fatalf("PUT oauth-client: %d %s", r.status, r.body)
	}
	auth := decode[edge.Authorization](t, b.admin(http.MethodPost, "/connections/acme/calendar/authorize", ""))
	u, _ := url.Parse(auth.ConnectURL)
	if q := u.Query(); q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("state") == "" || !strings.HasPrefix(auth.ConnectURL, idp.Issuer) {
		t.Fatalf("connect URL %s: want the provider's, with PKCE S256 and a state", auth.ConnectURL)
	}
	if status, body, err := idp.SignIn(auth.ConnectURL); err != nil || status != http.StatusOK {
		t.Fatalf("callback: %d %s %v", status, body, err)
	}
	// A state serves once.
	replay := a.do(http.MethodGet, edge.OAuthCallbackPath+"?state="+u.Query().Get("state")+"&code=x", "")
	replay.expect(t, http.StatusBadRequest, "invalid_request")
	// An authorization response from another issuer is refused (RFC 9207).
	other, _ := url.Parse(decode[edge.Authorization](t, a.admin(http.MethodPost, "/connections/acme/calendar/authorize", "")).ConnectURL)
	mixUp := a.do(http.MethodGet, edge.OAuthCallbackPath+"?"+url.Values{"state": {other.Query().Get("state")}, "code": {"x"}, "iss": {"https://evil.example.com"}}.Encode(), "")
	if e := mixUp.expect(t, http.StatusBadRequest, "invalid_request"); !strings.Contains(e.Message, "issuer") {
		t.Fatalf("a response from another issuer: %q", e.Message)
	}

	first := decode[whoami](t, a.call(key, "calendar", "whoami", "{}"))
	second := decode[whoami](t, b.call(key, "calendar", "whoami", "{}"))
	if first.Sub == "" || first != second || first.Values != wire.OAuthTokenField {
		t.Fatalf("calls on both edges: %+v and %+v; want the provider's subject, the same token, and no value but the access token", first, second)
	}
	if st := decode[edge.ToolInfo](t, b.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", key)).Connection; st.State != edge.ConnectionReady {
		t.Fatalf("after connecting: %+v", st)
	}
	assertNoPlaintext(t, a, "client-secret-9d1e")

	// The token comes due: concurrent calls on both edges refresh it once.
	time.Sleep(lifetime - early + time.Second)
	var wg sync.WaitGroup
	answers := make(chan whoami, 20)
	for i := range 20 {
		e := []*env{a, b}[i%2]
		wg.Go(func() {
			r := e.call(key, "calendar", "whoami", "{}")
			if r.status != http.StatusOK {
				t.Errorf("call %d: %d %s", i, r.status, r.body)
				return
			}
			answers <- decode[whoami](t, r)
		})
	}
	wg.Wait()
	close(answers)
	for w := range answers {
		if w.Token == first.Token || w.Sub != first.Sub {
			t.Fatalf("after the refresh: %+v; want a new token of the same subject", w)
		}
	}
	if n := idp.Refreshes(); n != 1 {
		t.Fatalf("the provider had %d refresh requests; want 1", n)
	}
	for _, endpoint := range []string{"auth", "code", "refresh"} {
		if got := idp.Resources(endpoint); !slices.Contains(got, resource) {
			t.Errorf("the %s request's resource indicators: %v; want %s", endpoint, got, resource)
		}
	}

	// Revoked at the provider: the next refresh is refused.
	if err := idp.RevokeAll(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(lifetime - early + time.Second)
	refused = b.call(key, "calendar", "whoami", "{}").expect(t, http.StatusConflict, "connection_required")
	if !strings.Contains(refused.Message, "oauth") || !strings.Contains(refused.Message, edge.ConnectURL(b.url, "calendar")) {
		t.Fatalf("after revocation: %q; want oauth missing and the connect URL", refused.Message)
	}
	// Edge b marked the connection; edge a reads it once its view of the record follows.
	testenv.WaitFor(t, "edge a to show the connection needs reauthorization", func() bool {
		st = decode[edge.ToolInfo](t, a.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", key)).Connection
		return st.State == edge.ConnectionNeedsReauth
	})
	if st.ConnectURL == "" {
		t.Fatalf("after revocation: %+v; want the connect URL", st)
	}
	if page := dashboardPage(t, a, key, "tools/calendar"); !strings.Contains(page, `id="authorization">needs reauthorization<`) {
		t.Fatalf("the tool's dashboard page after revocation:\n%s", page)
	}
}

// dashboardPage signs in to e's dashboard with key, as a browser's form does, and
// returns the page at rel.
func dashboardPage(t *testing.T, e *env, key, rel string) string {
	t.Helper()
	_, page := dashboardGet(t, e, key, rel)
	return page
}

// dashboardGet is dashboardPage with the page's status.
func dashboardGet(t *testing.T, e *env, key, rel string) (int, string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: testenv.Patience}
	get := func(u string) (int, string) {
		res, err := client.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	_, form := get(e.url + edge.DashboardPath + "signin")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(form)
	if m == nil {
		t.Fatalf("the sign-in page has no form token:\n%s", form)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+edge.DashboardPath+"signin", strings.NewReader(url.Values{"csrf": {m[1]}, "key": {key}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", e.url)
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return get(e.url + edge.DashboardPath + rel)
}

// TestOAuthConfigBounds: an edge refuses OAuth connections with a bound of zero.
func TestOAuthConfigBounds(t *testing.T) {
	e := newEnv(t, withCredentials(testKeyring(t)))
	for name, edit := range map[string]func(*credentials.OAuthConfig){
		"flow lifetime": func(c *credentials.OAuthConfig) { c.FlowLifetime = 0 },
		"refresh lease": func(c *credentials.OAuthConfig) { c.RefreshLease = 0 },
		"refresh early": func(c *credentials.OAuthConfig) { c.RefreshBefore = -time.Second },
		"redirect URL":  func(c *credentials.OAuthConfig) { c.RedirectURL = "" },
	} {
		cfg := credentials.DefaultOAuthConfig(e.url + edge.OAuthCallbackPath)
		edit(&cfg)
		if err := e.vault.EnableOAuth(testenv.Context(t), cfg, false); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	cfg := credentials.DefaultOAuthConfig(e.url + edge.OAuthCallbackPath)
	cfg.RefreshBefore = 0
	if err := e.vault.EnableOAuth(testenv.Context(t), cfg, false); err != nil {
		t.Errorf("refreshing at expiry: %v", err)
	}
}
