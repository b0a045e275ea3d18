package oauth_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/oauth"
)

// TestExternalTakesOnlyPublicKeySignatures: a token with the provider's claims but
// signed with a shared secret (HS256), or not signed (none), is refused for its
// algorithm, before any key is looked for.
func TestExternalTakesOnlyPublicKeySignatures(t *testing.T) {
	idp := testidp.Start(t, testidp.Options{ClientID: "c", ClientSecret: "s", RedirectURI: "http://127.0.0.1/cb", JWTAccessTokens: true})
	x, err := oauth.DiscoverExternal(testenv.Context(t), oauth.ExternalConfig{Issuer: idp.Issuer, AccountClaim: "toolgate_account",
		UserClaim: "sub", KeysMinRefetch: time.Second, KeysMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	const resource = "https://gw.example.com/mcp/tgl_x"
	now := time.Now()
	claims := map[string]any{"iss": idp.Issuer, "sub": testidp.Subject, "aud": resource, "exp": now.Add(time.Hour).Unix(),
		"iat": now.Unix(), "toolgate_account": "acme", "scope": "kit:list kit:call"}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("a secret of thirty-two bytes....")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	// alg none: its header, the same claims, and an empty signature.
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none"}`)) + "." + strings.Split(hs, ".")[1] + "."
	for name, raw := range map[string]string{"HS256": hs, "none": none} {
		_, err := x.Verify(testenv.Context(t), raw, resource, now)
		if !errors.Is(err, oauth.ErrInvalidToken) || !errors.Is(err, oidc.ErrSignatureUnsupportedAlg) {
			t.Errorf("%s: %v, want an invalid token for its algorithm", name, err)
		}
	}
}

// TestExternalChecksTheTokenType: signed with the provider's own key and otherwise
// alike, a token labelled an access token (at+jwt, application/at+jwt) or not
// labelled is taken; one labelled anything else is refused (RFC 9068 §4), JWT too
// unless the deployment accepts it (AcceptJWTTyp); a JWT or unlabelled one that
// carries an ID token's nonce or at_hash is refused.
func TestExternalChecksTheTokenType(t *testing.T) {
	idp := testidp.Start(t, testidp.Options{ClientID: "c", ClientSecret: "s", RedirectURI: "http://127.0.0.1/cb", JWTAccessTokens: true})
	const resource = "https://gw.example.com/mcp/tgl_x"
	now := time.Now()
	claims := func(extra map[string]any) map[string]any {
		c := map[string]any{"iss": idp.Issuer, "sub": testidp.Subject, "aud": resource, "exp": now.Add(time.Hour).Unix(),
			"iat": now.Unix(), "toolgate_account": "acme", "client_id": "c", "jti": "j1"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	for _, accept := range []bool{false, true} {
		x, err := oauth.DiscoverExternal(testenv.Context(t), oauth.ExternalConfig{Issuer: idp.Issuer, AccountClaim: "toolgate_account",
			UserClaim: "sub", KeysMinRefetch: time.Second, KeysMaxAge: time.Hour, AcceptJWTTyp: accept})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			typ   string
			extra map[string]any
			taken bool
		}{
			{"at+jwt", nil, true}, {"application/at+jwt", nil, true}, {"AT+JWT", nil, true}, {"", nil, true},
			{"JWT", nil, accept},
			{"JWT", map[string]any{"at_hash": "abc"}, false}, {"JWT", map[string]any{"nonce": "n"}, false},
			{"", map[string]any{"at_hash": "abc"}, false},
			{"id_token+jwt", nil, false}, {"dpop+jwt", nil, false}, {"logout+jwt", nil, false},
		} {
			raw, err := idp.Sign(claims(c.extra), c.typ)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := x.Verify(testenv.Context(t), raw, resource, now)
			if c.taken && (err != nil || tok.Account != "acme") {
				t.Errorf("accept JWT %v: typ %q %v: %v, want taken", accept, c.typ, c.extra, err)
			}
			if !c.taken && !errors.Is(err, oauth.ErrInvalidToken) {
				t.Errorf("accept JWT %v: typ %q %v: %v, want an invalid token", accept, c.typ, c.extra, err)
			}
		}
	}
}
