package edge_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

// TestPendingAuthorizationRequestsArePerSource: with room for ten requests in
// progress but two from one address, the address that holds two is answered
// temporarily_unavailable at its redirect URI and its two stay as they were, while
// another address begins a request, signs in and gets its token; once one of the
// first address's requests ends, it is taken again.
func TestPendingAuthorizationRequestsArePerSource(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn(),
		withOAuthLimits(oauth.Limits{MaxClients: 10, RegistrationsPerMinute: 10, MaxPending: 10, MaxPendingPerSource: 2}))
	link, cfg := kitLink(t, e)
	stranger, other := fromAddress("127.0.0.1"), fromAddress("127.0.0.2")

	verifiers := []string{oauth2.GenerateVerifier(), oauth2.GenerateVerifier()}
	var ids []string
	for i, v := range verifiers {
		loc := beginAuthorization(t, stranger, cfg, link, v)
		if !toSignIn(loc) || loc.Query().Get("id") == "" {
			t.Fatalf("request %d of 2 from one address: led to %s, not the sign-in page", i+1, loc)
		}
		ids = append(ids, loc.Query().Get("id"))
	}
	loc := beginAuthorization(t, stranger, cfg, link, oauth2.GenerateVerifier())
	if q := loc.Query(); toSignIn(loc) || q.Get("error") != "temporarily_unavailable" || q.Get("state") != "s" || q.Get("iss") != e.url ||
		!strings.Contains(q.Get("error_description"), "your address") {
		t.Fatalf("a third request from an address with a bound of 2: led to %s", loc)
	}
	held := keysIn(t, e, oauth.RequestBucket, "req.>")
	if len(held) != 2 || !slices.Contains(held, "req."+ids[0]) || !slices.Contains(held, "req."+ids[1]) {
		t.Fatalf("the server holds %v, want the address's two requests %v", held, ids)
	}

	// Another address is not held back by the first's bound: it signs in.
	v := oauth2.GenerateVerifier()
	loc = beginAuthorization(t, other, cfg, link, v)
	if !toSignIn(loc) {
		t.Fatalf("a request from another address: led to %s, not the sign-in page", loc)
	}
	tok := approveAndExchange(t, e, other, cfg, loc.Query().Get("id"), v)
	if _, err := e.issuer.Verify(testenv.Context(t), tok.AccessToken, link, time.Now()); err != nil {
		t.Fatalf("the other address's token: %v", err)
	}
	for _, id := range ids {
		if _, err := e.authServer.Request(testenv.Context(t), id); err != nil {
			t.Fatalf("the first address's request %s after the other's sign-in: %v", id, err)
		}
	}

	// One of the first address's requests ends: the address is under its bound again.
	approveAndExchange(t, e, stranger, cfg, ids[0], verifiers[0])
	if loc := beginAuthorization(t, stranger, cfg, link, oauth2.GenerateVerifier()); !toSignIn(loc) {
		t.Fatalf("a request once one of the address's two ended: led to %s, not the sign-in page", loc)
	}
}

// TestRequestIDsAreNotPatterns: an authorization request's id comes back from the
// browser (the consent page's query, the callback's), and one that is a subject
// pattern finds no request and ends none, while a real one is found.
func TestRequestIDsAreNotPatterns(t *testing.T) {
	e := newEnv(t, withMCP(), withDashboard(), withSignIn())
	link, cfg := kitLink(t, e)
	loc := beginAuthorization(t, fromAddress("127.0.0.1"), cfg, link, oauth2.GenerateVerifier())
	id := loc.Query().Get("id")
	ctx := testenv.Context(t)
	for _, p := range []string{">", "*", "*.*", id[:strings.Index(id, ".")] + ".*"} {
		if c, err := e.authServer.Request(ctx, p); err == nil {
			t.Errorf("the request %q found %+v", p, c)
		}
		if _, err := e.authServer.Deny(ctx, p); err == nil {
			t.Errorf("the request %q was denied", p)
		}
	}
	if c, err := e.authServer.Request(ctx, id); err != nil || c.Resource != link {
		t.Fatalf("the real request %s: %+v, %v", id, c, err)
	}
}
