package edge_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// TestPreRegisteredClients: the operator registers a confidential client through
// the admin API and gets its secret once; bad registrations change nothing; the
// client (golang.org/x/oauth2, its secret in the Authorization header) signs in with
// PKCE, calls with its token and refreshes it, while a wrong secret is refused and
// costs it nothing; a public pre-registered client signs in without a secret; the
// list never shows a secret; and a deleted client can neither refresh nor begin.
func TestPreRegisteredClients(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	key := e.account("acme", registry.Limits{})
	e.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	app := newClientApp(t)
	callback := app.url + "/callback"

	r := e.admin(http.MethodPost, "/oauth/clients", `{"client_id":"acme-desktop","client_name":"Test client","redirect_uris":["`+callback+`"],"confidential":true}`)
	added := decode[oauth.NewClient](t, r)
	if r.status != http.StatusCreated || !strings.HasPrefix(added.Secret, "tgs_") || !added.Confidential || r.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("POST /admin/oauth/clients: %d %s", r.status, r.body)
	}
	for name, body := range map[string]string{
		"the same id":          `{"client_id":"acme-desktop","redirect_uris":["` + callback + `"]}`,
		"no redirect URI":      `{"client_id":"other"}`,
		"a relative redirect":  `{"client_id":"other","redirect_uris":["/callback"]}`,
		"a URL as id":          `{"client_id":"https://client.example/c.json","redirect_uris":["` + callback + `"]}`,
		"a dynamic client's":   `{"client_id":"tgc_x","redirect_uris":["` + callback + `"]}`,
		"an unknown field":     `{"client_id":"other","redirect_uris":["` + callback + `"],"client_secret":"mine"}`,
		"eleven redirect URIs": `{"client_id":"other","redirect_uris":["` + strings.Repeat(callback+`","`, 10) + callback + `"]}`,
	} {
		want := http.StatusBadRequest
		if name == "the same id" {
			want = http.StatusConflict
		}
		if r := e.admin(http.MethodPost, "/oauth/clients", body); r.status != want {
			t.Errorf("%s: %d %s, want %d", name, r.status, r.body, want)
		}
	}
	if r := e.admin(http.MethodPost, "/oauth/clients", `{"client_id":"acme-cli","client_name":"Test client","redirect_uris":["`+callback+`"]}`); r.status != http.StatusCreated ||
		decode[oauth.NewClient](t, r).Secret != "" {
		t.Fatalf("a public client: %d %s", r.status, r.body)
	}
	r = e.admin(http.MethodGet, "/oauth/clients", "")
	list := decode[edge.OAuthClientList](t, r)
	if len(list.Clients) != 2 || list.Clients[0].ID != "acme-cli" || list.Clients[1].ID != "acme-desktop" || !list.Clients[1].Confidential ||
		strings.Contains(string(r.body), added.Secret) || strings.Contains(string(r.body), "secret") {
		t.Fatalf("GET /admin/oauth/clients: %s", r.body)
	}

	ctx := testenv.Context(t)
	signIn := func(cfg oauth2.Config) *oauth2.Token { t.Helper(); return signInAs(t, e, app, cfg, key, link) }
	endpoint := oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInHeader}
	cfg := oauth2.Config{ClientID: "acme-desktop", ClientSecret: added.Secret, RedirectURL: callback, Scopes: []string{"kit:list", "kit:call"}, Endpoint: endpoint}
	tok := signIn(cfg)
	cs, err := goSDKSession(t, link, tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("a call with the pre-registered client's token: %v %+v", err, res)
	}
	wrong := cfg
	wrong.ClientSecret = "tgs_" + strings.Repeat("x", len(added.Secret)-4)
	if _, err := wrong.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil || !strings.Contains(err.Error(), "invalid_client") {
		t.Fatalf("a refresh with a wrong secret: %v, want invalid_client", err)
	}
	fresh, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil || fresh.AccessToken == tok.AccessToken {
		t.Fatalf("the refresh after a wrong secret's: %v", err)
	}
	public := oauth2.Config{ClientID: "acme-cli", RedirectURL: callback, Scopes: []string{"kit:list"},
		Endpoint: oauth2.Endpoint{AuthURL: endpoint.AuthURL, TokenURL: endpoint.TokenURL, AuthStyle: oauth2.AuthStyleInParams}}
	if _, err := e.issuer.Verify(ctx, signIn(public).AccessToken, link, time.Now()); err != nil {
		t.Fatalf("the public pre-registered client's token: %v", err)
	}

	if r := e.admin(http.MethodDelete, "/oauth/clients/acme-desktop", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if r := e.admin(http.MethodDelete, "/oauth/clients/acme-desktop", ""); r.status != http.StatusNotFound {
		t.Fatalf("DELETE again: %d %s, want 404", r.status, r.body)
	}
	if _, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: fresh.RefreshToken}).Token(); err == nil {
		t.Fatal("a deleted client refreshed its token")
	}
	grants, err := e.authServer.Grants(ctx, "acme")
	if err != nil || !slices.ContainsFunc(grants, func(g oauth.Grant) bool { return g.Client == "acme-desktop" }) {
		t.Fatalf("after the client's deletion acme's grants are %+v (%v): want the deleted client's still listed", grants, err)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(cfg.AuthCodeURL("s", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()), oauth2.SetAuthURLParam("resource", link)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusBadRequest || strings.Contains(loc, "/dashboard/") {
		t.Fatalf("a deleted client's authorization request: %d to %q, want 400", resp.StatusCode, loc)
	}
	if strings.Contains(e.logs.String(), added.Secret) {
		t.Fatal("the edge logged the client's secret")
	}
}
