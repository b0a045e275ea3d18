package oauth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/oauth"
)

func newIssuer(t *testing.T, url string) *oauth.Issuer {
	t.Helper()
	srv := testenv.Server(t)
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
	open := func() *oauth.Issuer {
		store := testenv.Store(t, testenv.Conn(t, srv.ClientURL()), 1)
		keys, err := oauth.OpenKeys(ctx, store, time.Hour, nil)
		if err != nil {
			t.Fatal(err)
		}
		return oauth.NewIssuer("https://gw.example", keys)
	}
	a, b := open(), open()
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
