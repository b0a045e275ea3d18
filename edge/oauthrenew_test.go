package edge_test

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// TestRegisteredClientLivesWhileUsed: with the unused lifetime shortened to 5 s, a
// dynamically registered client for which tokens keep being refreshed outlives that
// lifetime many times over (its record is written again, used_at moving on, at each
// token), while a client registered at the same moment and never used expires; the
// used one still refreshes after the other is gone.
func TestRegisteredClientLivesWhileUsed(t *testing.T) {
	const unused = 5 * time.Second
	e := newEnv(t, withMCP(), withDashboard(), withSignIn(), withOAuthUnusedLifetime(unused))
	e.account("acme", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	c := fromAddress("127.0.0.1")
	body := `{"client_name":"c","redirect_uris":["http://127.0.0.1:9/callback"],"token_endpoint_auth_method":"none"}`
	used, idle := registerClient(t, c, e, body), registerClient(t, c, e, body)
	if used.ClientID == "" || idle.ClientID == "" {
		t.Fatalf("registrations: %+v, %+v", used, idle)
	}
	registered := time.Now()
	cfg := oauth2.Config{ClientID: used.ClientID, RedirectURL: "http://127.0.0.1:9/callback", Scopes: []string{"kit:list", "kit:call"},
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	v := oauth2.GenerateVerifier()
	loc := beginAuthorization(t, c, cfg, link, v)
	if !toSignIn(loc) {
		t.Fatalf("authorization request: led to %s", loc)
	}
	tok := approveAndExchange(t, e, c, cfg, loc.Query().Get("id"), v)
	first := usedAt(t, e, used.ClientID)
	if first.IsZero() {
		t.Fatal("the client's record has no used_at after its first token")
	}

	// Refresh until the idle client is gone, and on past twice the lifetime.
	deadline := time.Now().Add(2*unused + 60*time.Second)
	for idleGone := false; !idleGone || time.Since(registered) < 2*unused; {
		if time.Now().After(deadline) {
			t.Fatalf("the idle client still held %s after its registration", time.Since(registered))
		}
		next, err := cfg.TokenSource(testenv.Context(t), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
		if err != nil {
			t.Fatalf("refresh %s after the registration: %v", time.Since(registered), err)
		}
		tok = next
		idleGone = !slices.Contains(keysIn(t, e, oauth.GrantBucket, "client.>"), "client."+idle.ClientID)
		time.Sleep(250 * time.Millisecond)
	}
	if !slices.Contains(keysIn(t, e, oauth.GrantBucket, "client.>"), "client."+used.ClientID) {
		t.Fatal("the used client expired")
	}
	if last := usedAt(t, e, used.ClientID); !last.After(first) {
		t.Fatalf("used_at %s after the refreshes, %s after the first token", last, first)
	}
	if _, err := cfg.TokenSource(testenv.Context(t), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err != nil {
		t.Fatalf("a refresh %s after the registration, the idle client gone: %v", time.Since(registered), err)
	}
}

// usedAt is when a registered client's last token was issued, as its record says.
func usedAt(t *testing.T, e *env, id string) time.Time {
	t.Helper()
	entry, err := oauthBucket(t, e, oauth.GrantBucket).Get(testenv.Context(t), "client."+id)
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		UsedAt time.Time `json:"used_at"`
	}
	if err := json.Unmarshal(entry.Value(), &rec); err != nil {
		t.Fatal(err)
	}
	return rec.UsedAt
}

// TestRefreshForAnExpiredRegistration: once a dynamically registered client's record
// is gone (as its bucket's TTL removes it when unused), a refresh for it is 401
// invalid_client (RFC 6749 §5.2: an unknown client; the TypeScript SDK then drops
// the client and registers again), not server_error, and the grant's records are
// left as they were.
func TestRefreshForAnExpiredRegistration(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	e.account("acme", registry.Limits{})
	e.deploy(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	c := fromAddress("127.0.0.1")
	reg := registerClient(t, c, e, `{"client_name":"c","redirect_uris":["http://127.0.0.1:9/callback"],"token_endpoint_auth_method":"none"}`)
	cfg := oauth2.Config{ClientID: reg.ClientID, RedirectURL: "http://127.0.0.1:9/callback", Scopes: []string{"kit:list", "kit:call"},
		Endpoint: oauth2.Endpoint{AuthURL: e.url + "/authorize", TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	v := oauth2.GenerateVerifier()
	loc := beginAuthorization(t, c, cfg, link, v)
	if !toSignIn(loc) {
		t.Fatalf("authorization request: led to %s", loc)
	}
	tok := approveAndExchange(t, e, c, cfg, loc.Query().Get("id"), v)

	kv := oauthBucket(t, e, oauth.GrantBucket)
	if err := kv.Purge(testenv.Context(t), "client."+reg.ClientID); err != nil {
		t.Fatal(err)
	}
	before := revisions(t, kv)
	_, err := cfg.TokenSource(testenv.Context(t), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" || re.Response.StatusCode != http.StatusUnauthorized {
		t.Fatalf("refresh for an expired registration: %v, want 401 invalid_client", err)
	}
	if after := revisions(t, kv); !maps.Equal(before, after) {
		t.Fatalf("the refresh changed the grant bucket: %v, then %v", before, after)
	}
}

// revisions are the revisions of every key in kv.
func revisions(t *testing.T, kv jetstream.KeyValue) map[string]uint64 {
	t.Helper()
	lister, err := kv.ListKeys(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	revs := map[string]uint64{}
	for k := range lister.Keys() {
		entry, err := kv.Get(testenv.Context(t), k)
		if err != nil {
			t.Fatal(err)
		}
		revs[k] = entry.Revision()
	}
	return revs
}
