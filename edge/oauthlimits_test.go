package edge_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// fromAddress is an HTTP client whose requests come from ip, a loopback address
// other than 127.0.0.1: another source, as the server tells them apart.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// oauthAnswer is an OAuth error answer, or a registration's.
type oauthAnswer struct {
	status     int
	retryAfter string
	Error      string `json:"error"`
	ClientID   string `json:"client_id"`
}

func registerClient(t *testing.T, c *http.Client, e *env, body string) oauthAnswer {
	t.Helper()
	resp, err := c.Post(e.url+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := oauthAnswer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After")}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("registration answer %d: %v", resp.StatusCode, err)
	}
	return a
}

// oauthBucket opens an OAuth bucket from the test's side.
func oauthBucket(t *testing.T, e *env, bucket string) jetstream.KeyValue {
	t.Helper()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(testenv.Context(t), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// keysIn lists the keys of an OAuth bucket under filter, from the test's side.
func keysIn(t *testing.T, e *env, bucket, filter string) []string {
	t.Helper()
	lister, err := oauthBucket(t, e, bucket).ListKeysFiltered(testenv.Context(t), filter)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	return keys
}

// TestRegistrationsAreLimited: one address registers at most its rate a minute
// (then 429 with Retry-After), the deployment holds at most its number of
// registered clients (then 403 access_denied, from any address), a registration
// with bad metadata is refused before either limit counts it, and a refused one
// leaves no client behind.
func TestRegistrationsAreLimited(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn(), withOAuthLimits(oauth.Limits{MaxClients: 3, RegistrationsPerMinute: 2, MaxPending: 10}))
	good := `{"client_name":"c","redirect_uris":["http://127.0.0.1:9/callback"],"token_endpoint_auth_method":"none"}`
	first := fromAddress("127.0.0.1")
	if a := registerClient(t, first, e, `{"redirect_uris":["not a uri"]}`); a.status != http.StatusBadRequest || a.Error != "invalid_redirect_uri" {
		t.Fatalf("bad metadata: %+v", a)
	}
	for i := range 2 {
		if a := registerClient(t, first, e, good); a.status != http.StatusCreated || a.ClientID == "" {
			t.Fatalf("registration %d of 2 from one address: %+v", i+1, a)
		}
	}
	a := registerClient(t, first, e, good)
	if wait, _ := strconv.Atoi(a.retryAfter); a.status != http.StatusTooManyRequests || a.Error != "temporarily_unavailable" || wait < 1 || wait > 60 {
		t.Fatalf("a third registration in a minute from one address: %+v, want 429 temporarily_unavailable with Retry-After", a)
	}
	if a := registerClient(t, fromAddress("127.0.0.2"), e, good); a.status != http.StatusCreated {
		t.Fatalf("the third client, from another address: %+v", a)
	}
	if a := registerClient(t, fromAddress("127.0.0.3"), e, good); a.status != http.StatusForbidden || a.Error != "access_denied" {
		t.Fatalf("a fourth client with a limit of 3: %+v, want 403 access_denied", a)
	}
	if keys := keysIn(t, e, oauth.GrantBucket, "client.>"); len(keys) != 3 {
		t.Fatalf("the deployment holds %d clients (%v), want the 3 admitted", len(keys), keys)
	}
}

// TestPendingAuthorizationRequestsAreLimited: with room for two requests in
// progress, a third is answered temporarily_unavailable at the client's redirect URI
// (with state and iss) and stored nowhere; once one of the two ends with its code's
// exchange, a new one is taken again.
func TestPendingAuthorizationRequestsAreLimited(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn(), withOAuthLimits(oauth.Limits{MaxClients: 10, RegistrationsPerMinute: 10, MaxPending: 2}))
	link, cfg := kitLink(t, e)
	c := fromAddress("127.0.0.1")
	begin := func(verifier string) *url.URL { return beginAuthorization(t, c, cfg, link, verifier) }
	verifiers := []string{oauth2.GenerateVerifier(), oauth2.GenerateVerifier()}
	var ids []string
	for i, v := range verifiers {
		loc := begin(v)
		if !toSignIn(loc) || loc.Query().Get("id") == "" {
			t.Fatalf("request %d of 2: led to %s, not the sign-in page", i+1, loc)
		}
		ids = append(ids, loc.Query().Get("id"))
	}
	loc := begin(oauth2.GenerateVerifier())
	if q := loc.Query(); toSignIn(loc) || q.Get("error") != "temporarily_unavailable" || q.Get("state") != "s" || q.Get("iss") != e.url || q.Get("code") != "" {
		t.Fatalf("a third request in progress with a limit of 2: led to %s", loc)
	}
	if keys := keysIn(t, e, oauth.RequestBucket, "req.>"); len(keys) != 2 {
		t.Fatalf("the server holds %d requests, want the 2 admitted", len(keys))
	}

	// The first ends: approved for acme, its code exchanged; it counts no more.
	tok := approveAndExchange(t, e, c, cfg, ids[0], verifiers[0])
	if _, err := e.issuer.Verify(testenv.Context(t), tok.AccessToken, link, time.Now()); err != nil {
		t.Fatalf("the token of the first request: %v", err)
	}
	if loc := begin(oauth2.GenerateVerifier()); !toSignIn(loc) {
		t.Fatalf("a request once one of the two ended: led to %s, not the sign-in page", loc)
	}
}

// beginAuthorization makes an authorization request for link from c, and returns
// where the server sends the browser.
func beginAuthorization(t *testing.T, c *http.Client, cfg oauth2.Config, link, verifier string) *url.URL {
	t.Helper()
	resp, err := c.Get(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", link)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("authorization request: %d without a Location", resp.StatusCode)
	}
	return loc
}

// toSignIn reports whether an authorization request led to the sign-in page.
func toSignIn(loc *url.URL) bool { return strings.Contains(loc.Path, "/dashboard/") }

// approveAndExchange approves the request id for acme's kit, follows the callback
// from c and exchanges the code: the token the client then holds.
func approveAndExchange(t *testing.T, e *env, c *http.Client, cfg oauth2.Config, id, verifier string) *oauth2.Token {
	t.Helper()
	callback, err := e.authServer.Approve(testenv.Context(t), id, "acme", "", "kit")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(callback)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	answer, err := resp.Location()
	if err != nil || answer.Query().Get("code") == "" {
		t.Fatalf("the callback answered %d at %v", resp.StatusCode, answer)
	}
	tok, err := cfg.Exchange(testenv.Context(t), answer.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// kitLink gives account acme the tool kit and returns its link, and the client of
// a metadata document that asks for kit's scopes at e.
func kitLink(t *testing.T, e *env) (string, oauth2.Config) {
	t.Helper()
	e.account("acme", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	app := newClientApp(t)
	return link, oauth2.Config{ClientID: app.url + "/client.json", RedirectURL: app.url + "/callback", Scopes: []string{"kit:list", "kit:call"},
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
}
