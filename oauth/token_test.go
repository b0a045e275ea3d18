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
	keys, err := oauth.OpenKeys(testenv.Context(t), store, time.Hour)
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
