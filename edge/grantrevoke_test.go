package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// TestRevokedGrantRefusedByEveryEdge: a token issued through edge a is accepted by
// a and by edge b; its grant revoked on a's keys page, b refuses it within 2 s of
// the revocation's answer, from what b's view heard announced; and an edge started
// after the revocation, which heard nothing, refuses it too (it asks the grant
// bucket's leader).
func TestRevokedGrantRefusedByEveryEdge(t *testing.T) {
	a := newEnv(t, withMCP(), withDashboard(), withSignIn(), withAudit())
	b := newEnv(t, withMCP(), withSignIn(), onServer(a.srv.ClientURL()), asEdgeOf(a.url))
	key := a.account("acme", registry.Limits{Sessions: 100000}) // each probe opens a session
	a.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	a.connect("acme", "kit")
	testenv.WaitFor(t, "b's view has acme", func() bool { return b.view.Snapshot().Account("acme") != nil })
	// Past oauth's margin around the moment b's view began hearing, so that b answers
	// for the token from its view, not from the leader.
	time.Sleep(3 * time.Second)

	tok, _ := toolToken(t, a, key, "kit")
	bearer := map[string]string{"Authorization": "Bearer " + tok.AccessToken}
	status := func(e *env) int {
		resp, _ := mcpPost(t, e.url+"/tools/kit/mcp", bearer, initialize)
		return resp.StatusCode
	}
	for name, e := range map[string]*env{"a": a, "b": b} {
		if s := status(e); s != http.StatusOK {
			t.Fatalf("edge %s, before the revocation: %d, want 200", name, s)
		}
	}

	grants, err := a.authServer.Grants(testenv.Context(t), "acme")
	if err != nil || len(grants) != 1 {
		t.Fatalf("grants %+v %v", grants, err)
	}
	revokeOnKeysPage(t, a, key, grants[0].ID)
	answered := time.Now()
	if s := status(a); s != http.StatusUnauthorized {
		t.Fatalf("edge a, right after its revocation's answer: %d, want 401", s)
	}
	var lastAccepted time.Time
	testenv.WaitFor(t, "edge b refuses the token", func() bool {
		sent := time.Now()
		switch s := status(b); s {
		case http.StatusOK:
			lastAccepted = sent
			return false
		case http.StatusUnauthorized:
			return true
		default:
			t.Fatalf("edge b: %d, want 200 or 401", s)
			return false
		}
	})
	if lastAccepted.Sub(answered) >= 2*time.Second {
		t.Fatalf("edge b accepted the token %s after the revocation's answer", lastAccepted.Sub(answered))
	}
	if !b.view.Snapshot().Revoked(registry.RevokedGrant, "grant.acme."+grants[0].ID) {
		t.Fatal("edge b's view holds no announced revocation of the grant")
	}

	c := newEnv(t, withMCP(), withSignIn(), onServer(a.srv.ClientURL()), asEdgeOf(a.url))
	if s := status(c); s != http.StatusUnauthorized {
		t.Fatalf("an edge started after the revocation: %d, want 401", s)
	}

	// The revocation, made on the dashboard by the key signed in, is on the trail.
	p, err := a.view.Snapshot().AuthenticateKey(key, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	rec := a.awaitRecords(url.Values{"kind": {audit.KindAdmin}, "account": {"acme"}, "method": {audit.ActionRevokeAccess}}, 1)[0]
	if rec.By != "key:"+p.Key.ID || rec.Client != grants[0].Client || rec.Tool != "kit" || rec.Transport != audit.TransportDashboard {
		t.Fatalf("the revocation's record: %+v, want made by key:%s, of %s's access to kit", rec, p.Key.ID, grants[0].Client)
	}
}

// TestRevokedGrantRefusedEverywhereThroughANodeLoss: as for a key (revoke_test.go),
// an OAuth grant revoked through edge a by its client (RFC 7009, with its refresh
// token) 0.3 s after the node holding the grant bucket's leader, which edge b is
// connected to, was killed: from the revocation's answer, neither edge accepts the
// grant's access token for more than 2 s.
func TestRevokedGrantRefusedEverywhereThroughANodeLoss(t *testing.T) {
	revocationRace(t, revokeGrant, true)
}

// TestRevokedGrantRefusedEverywhereUnderLoad: the same without a fault.
func TestRevokedGrantRefusedEverywhereUnderLoad(t *testing.T) { revocationRace(t, revokeGrant, false) }

var revokeGrant = revocable{
	name:   "grant",
	bucket: oauth.GrantBucket,
	onA:    []option{withDashboard(), withSignIn()},
	onB:    func(a *env) []option { return []option{withSignIn(), asEdgeOf(a.url)} },
	mint:   mintGrant,
	use: func(e *env, token string) (result, error) {
		// No body: past the token's check, a parse error that touches no bus.
		return probe(e, http.MethodPost, "/tools/echo/mcp", "Authorization", "Bearer "+token,
			"Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	},
	load: func(e *env, token string) {
		_, _ = e.send(http.MethodPost, "/tools/echo/mcp", `{"jsonrpc":"2.0","id":1,"method":"ping"}`, "Authorization", "Bearer "+token,
			"Accept", "application/json, text/event-stream", "MCP-Protocol-Version", "2026-07-28")
	},
	refused: func(r result) bool {
		return r.status == http.StatusUnauthorized && strings.Contains(r.header.Get("WWW-Authenticate"), "invalid_token")
	},
	revoke: func(a *env, form string) result {
		r, err := a.send(http.MethodPost, "/revoke", form, "Content-Type", "application/x-www-form-urlencoded")
		if err != nil {
			return result{body: []byte(err.Error())}
		}
		return r
	},
}

// mintGrant signs acme in through edge a's dashboard for a client with a metadata
// document, at echo's MCP endpoint, and returns the access token and the form that
// revokes its grant (RFC 7009: the refresh token and the client's id).
func mintGrant(t *testing.T, a *env) (string, string) {
	r := a.admin(http.MethodPost, "/keys", `{"account":"acme"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /keys: %d %s", r.status, r.body)
	}
	key := decode[edge.NewKey](t, r).Secret
	testenv.WaitFor(t, "edge a takes acme's key", func() bool {
		_, err := a.view.Snapshot().AuthenticateKey(key, time.Now())
		return err == nil
	})
	tok, clientID := toolToken(t, a, key, "echo")
	return tok.AccessToken, url.Values{"token": {tok.RefreshToken}, "token_type_hint": {"refresh_token"}, "client_id": {clientID}}.Encode()
}

// toolToken signs the account of key in through e's dashboard for a client with a
// metadata document, at tool's MCP endpoint, and returns the client's tokens and id.
func toolToken(t *testing.T, e *env, key, tool string) (*oauth2.Token, string) {
	t.Helper()
	return toolTokenWith(t, e, url.Values{"key": {key}}, tool)
}

// toolTokenWith is toolToken signing in with creds.
func toolTokenWith(t *testing.T, e *env, creds url.Values, tool string) (*oauth2.Token, string) {
	t.Helper()
	app := newClientApp(t)
	cfg := oauth2.Config{ClientID: app.url + "/client.json", RedirectURL: app.url + "/callback", Scopes: oauth.ToolScopes(tool),
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	return signInWith(t, e, app, cfg, creds, e.url+"/tools/"+tool+"/mcp"), cfg.ClientID
}

// signInAs is cfg's client signing the account of key in through e's dashboard
// with PKCE, for resource: the authorization response reaches app with the state,
// a code and iss, and the code is exchanged.
func signInAs(t *testing.T, e *env, app *clientApp, cfg oauth2.Config, key, resource string) *oauth2.Token {
	t.Helper()
	return signInWith(t, e, app, cfg, url.Values{"key": {key}}, resource)
}

// signInWith is signInAs with the sign-in form's creds: a key, or an account, user
// and secret.
func signInWith(t *testing.T, e *env, app *clientApp, cfg oauth2.Config, creds url.Values, resource string) *oauth2.Token {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	browseWith(t, e, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)), creds)
	var got url.Values
	select {
	case got = <-app.responses:
	case <-time.After(testenv.Patience):
		t.Fatal("no authorization response reached the client")
	}
	if got.Get("state") != "st4te" || got.Get("iss") != e.url || got.Get("code") == "" {
		t.Fatalf("authorization response %v: want the state, a code and iss %s", got, e.url)
	}
	tok, err := cfg.Exchange(testenv.Context(t), got.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
