package oauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

func newIssuer(t *testing.T, url string) *oauth.Issuer {
	t.Helper()
	return issuerOn(t, testenv.Server(t), url)
}

// issuerOn is an edge's issuer as url on srv, its keys rotating every hour.
func issuerOn(t *testing.T, srv *server.Server, url string) *oauth.Issuer {
	t.Helper()
	store := testenv.Store(t, testenv.Conn(t, srv.ClientURL()), 1)
	keys, err := oauth.OpenKeys(testenv.Context(t), store, time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	return oauth.NewIssuer(url, keys)
}

// TestTokensAreCheckedForIssuerAudienceAndExpiry: a token verifies at its resource
// only, from its issuer only, until it expires.
func TestTokensAreCheckedForIssuerAudienceAndExpiry(t *testing.T) {
	is := newIssuer(t, "https://gw.example")
	ctx, now := testenv.Context(t), time.Now()
	raw, err := is.Mint(ctx, oauth.Token{Account: "acme", Resource: "https://gw.example/mcp/tgl_a", Scope: "kit:list kit:call", Client: "c"}, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := is.Verify(ctx, raw, "https://gw.example/mcp/tgl_a", now)
	if err != nil {
		t.Fatal(err)
	}
	if got.Account != "acme" || !got.Allows("kit:call") || got.Client != "c" {
		t.Fatalf("verified %+v", got)
	}
	for name, check := range map[string]func() error{
		"another resource": func() error { _, err := is.Verify(ctx, raw, "https://gw.example/mcp/tgl_b", now); return err },
		"after it expired": func() error {
			_, err := is.Verify(ctx, raw, "https://gw.example/mcp/tgl_a", now.Add(time.Minute+time.Second))
			return err
		},
		"another issuer": func() error {
			other := oauth.NewIssuer("https://other.example", is.Keys())
			_, err := other.Verify(ctx, raw, "https://gw.example/mcp/tgl_a", now)
			return err
		},
	} {
		if err := check(); !errors.Is(err, oauth.ErrInvalidToken) {
			t.Errorf("%s: %v, want ErrInvalidToken", name, err)
		}
	}
}

// TestKeysRotateAndEveryEdgeChecks: a token one edge's issuer signed verifies at
// another's (the keys are the registry's); once the rotation period passes a new key
// signs, the JWKS holds it and the one before, and a token of the one before still
// verifies; one period more and that key is gone, its tokens with it.
func TestKeysRotateAndEveryEdgeChecks(t *testing.T) {
	srv := testenv.Server(t)
	ctx := testenv.Context(t)
	a, b := issuerOn(t, srv, "https://gw.example"), issuerOn(t, srv, "https://gw.example")
	const resource = "https://gw.example/mcp/tgl_a"
	now := time.Now()
	mint := func(is *oauth.Issuer, at time.Time) string {
		raw, err := is.Mint(ctx, oauth.Token{Account: "acme", Resource: resource, Scope: "kit:list"}, at, 24*time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	first := mint(a, now)
	if _, err := b.Verify(ctx, first, resource, now); err != nil {
		t.Fatalf("another edge's token: %v", err)
	}
	later := now.Add(time.Hour)
	second := mint(b, later) // a new period: b makes the next key
	if set := a.Keys().JWKS(ctx, later.Add(2*time.Second)); len(set.Keys) != 2 {
		t.Fatalf("the JWKS after a rotation holds %d keys, want the new one and the one before", len(set.Keys))
	}
	for name, raw := range map[string]string{"the previous key's": first, "the new key's": second} {
		if _, err := a.Verify(ctx, raw, resource, later.Add(2*time.Second)); err != nil {
			t.Fatalf("%s token after the rotation: %v", name, err)
		}
	}
	evenLater := later.Add(time.Hour)
	mint(a, evenLater)
	if _, err := b.Verify(ctx, first, resource, evenLater.Add(31*time.Second)); !errors.Is(err, oauth.ErrInvalidToken) {
		t.Fatalf("a token of a key two rotations old: %v, want refused", err)
	}
	if _, err := b.Verify(ctx, second, resource, evenLater.Add(31*time.Second)); err != nil {
		t.Fatalf("a token of the previous key: %v", err)
	}
}

// TestTheNewestKeySignsForAnEarlierPeriod: a time in an earlier period than the
// newest key's is signed at once by the newest key, and no older key is made: a
// token dated back (an expired one, made for a check), or an edge whose clock is
// behind the one that made the next period's key.
func TestTheNewestKeySignsForAnEarlierPeriod(t *testing.T) {
	srv := testenv.Server(t)
	ctx := testenv.Context(t)
	a, b := issuerOn(t, srv, "https://gw.example"), issuerOn(t, srv, "https://gw.example")
	now := time.Now()
	current, err := a.Keys().Signing(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	back, err := a.Keys().Signing(ctx, now.Add(-2*time.Hour))
	if err != nil || back.KeyID != current.KeyID {
		t.Fatalf("two periods back: key %s, %v; want the current key %s", back.KeyID, err, current.KeyID)
	}
	if set := a.Keys().JWKS(ctx, now); len(set.Keys) != 1 {
		t.Fatalf("the JWKS holds %d keys after signing for an earlier period, want the current one only", len(set.Keys))
	}

	// b's clock is an hour ahead: it makes the next period's key and signs with it.
	const resource = "https://gw.example/mcp/tgl_a"
	ahead, err := b.Mint(ctx, oauth.Token{Account: "acme", Resource: resource, Scope: "kit:list"}, now.Add(time.Hour), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// a reads the new key to check b's token, and then signs at its own clock's time.
	if _, err := a.Verify(ctx, ahead, resource, now.Add(time.Hour+2*time.Second)); err != nil {
		t.Fatalf("the token of the key made ahead: %v", err)
	}
	next, err := b.Keys().Signing(ctx, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	behind, err := a.Keys().Signing(ctx, now)
	if err != nil || behind.KeyID != next.KeyID {
		t.Fatalf("behind the key made ahead: key %s, %v; want %s", behind.KeyID, err, next.KeyID)
	}
}
