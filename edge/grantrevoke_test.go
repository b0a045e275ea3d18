package edge_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestRevokedGrantRefusedByEveryEdge: a token issued through edge a is accepted by
// a and by edge b; its grant revoked on a's keys page, b refuses it within 2 s of
// the revocation's answer, from what b's view heard announced; and an edge started
// after the revocation, which heard nothing, refuses it too (it asks the grant
// bucket's leader).
func TestRevokedGrantRefusedByEveryEdge(t *testing.T) {
	a := newEnv(t, withMCP(), withDashboard(), withSignIn())
	b := newEnv(t, withMCP(), withSignIn(), onServer(a.srv.ClientURL()), asEdgeOf(a.url))
	key := a.account("acme", registry.Limits{Sessions: 100000}) // each probe opens a session
	a.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	a.connect("acme", "kit")
	testenv.WaitFor(t, "b's view has acme", func() bool { return b.view.Snapshot().Account("acme") != nil })
	// Past oauth's margin around the moment b's view began hearing, so that b answers
	// for the token from its view, not from the leader.
	time.Sleep(3 * time.Second)

	resource := a.url + "/tools/kit/mcp"
	app := newClientApp(t)
	cfg := oauth2.Config{ClientID: app.url + "/client.json", RedirectURL: app.url + "/callback", Scopes: []string{"kit:list", "kit:call"},
		Endpoint: oauth2.Endpoint{AuthURL: a.url + "/authorize", TokenURL: a.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	browse(t, a, cfg.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", resource)), key)
	var got url.Values
	select {
	case got = <-app.responses:
	case <-time.After(testenv.Patience):
		t.Fatal("no authorization response reached the client")
	}
	tok, err := cfg.Exchange(testenv.Context(t), got.Get("code"), oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", resource))
	if err != nil {
		t.Fatal(err)
	}
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
}
