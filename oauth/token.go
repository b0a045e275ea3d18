package oauth

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolgate/toolgate/registry"
)

// Token is what an access token says: who it is for (the account, and the user when
// one signed in), the one resource it may be used at (RFC 8707), what it allows
// there, the client it was issued to and the grant it came from. The claim names are
// those of RFC 9068's JWT access tokens.
type Token struct {
	Issuer   string    `json:"-"` // iss
	Account  string    `json:"-"` // sub
	User     string    `json:"tg_user,omitempty"`
	Resource string    `json:"-"` // the audience: one resource only
	Scope    string    `json:"scope,omitempty"`
	Client   string    `json:"client_id,omitempty"`
	Grant    string    `json:"tg_grant,omitempty"`
	ID       string    `json:"-"` // jti
	Expiry   time.Time `json:"-"`
	IssuedAt time.Time `json:"-"`
}

// Scopes is the token's scope, split.
func (t Token) Scopes() []string { return strings.Fields(t.Scope) }

// Allows reports whether the token's scope holds scope.
func (t Token) Allows(scope string) bool { return slices.Contains(t.Scopes(), scope) }

// Errors of Verify: the token is not one this deployment would accept at the
// resource (ErrInvalidToken wraps every reason), or its grant was revoked.
var (
	ErrInvalidToken = errors.New("oauth: invalid token")
	ErrRevoked      = fmt.Errorf("%w: revoked", ErrInvalidToken)
)

// Issuer signs and checks the deployment's access tokens.
type Issuer struct {
	// URL is the issuer identifier: the deployment's base URL.
	URL  string
	keys *Keys
	// records and view, when set (CheckRevocations, or the authorization server's
	// records), refuse the tokens of a revoked grant before they expire (revoke.go).
	records *records
	view    *registry.View
	here    revokedHere // grants this edge revoked
}

// NewIssuer issues tokens as url, signed with keys.
func NewIssuer(url string, keys *Keys) *Issuer { return &Issuer{URL: url, keys: keys} }

// Keys are the issuer's signing keys.
func (is *Issuer) Keys() *Keys { return is.keys }

// Mint signs t, issued at now and good for ttl, as an access token.
func (is *Issuer) Mint(ctx context.Context, t Token, now time.Time, ttl time.Duration) (string, error) {
	key, err := is.keys.Signing(ctx, now)
	if err != nil {
		return "", err
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: Algorithm, Key: key},
		(&jose.SignerOptions{}).WithType("at+jwt"))
	if err != nil {
		return "", fmt.Errorf("oauth: signer: %w", err)
	}
	if t.ID == "" {
		t.ID = registry.NewID("at")
	}
	std := jwt.Claims{
		Issuer: is.URL, Subject: t.Account, Audience: jwt.Audience{t.Resource}, ID: t.ID,
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), Expiry: jwt.NewNumericDate(now.Add(ttl)),
	}
	raw, err := jwt.Signed(sig).Claims(std).Claims(t).Serialize()
	if err != nil {
		return "", fmt.Errorf("oauth: sign token: %w", err)
	}
	return raw, nil
}

// Verify checks raw as an access token for resource at now: signed by one of the
// deployment's keys, issued by is, for resource, not expired, its grant not revoked.
// Every failure wraps ErrInvalidToken.
func (is *Issuer) Verify(ctx context.Context, raw, resource string, now time.Time) (Token, error) {
	tok, err := jwt.ParseSigned(raw, []jose.SignatureAlgorithm{Algorithm})
	if err != nil || len(tok.Headers) != 1 {
		return Token{}, fmt.Errorf("%w: not a signed JWT", ErrInvalidToken)
	}
	key, ok := is.keys.verifying(ctx, tok.Headers[0].KeyID, now)
	if !ok {
		return Token{}, fmt.Errorf("%w: unknown signing key", ErrInvalidToken)
	}
	var std jwt.Claims
	var t Token
	if err := tok.Claims(key, &std, &t); err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if std.Expiry == nil || std.IssuedAt == nil {
		return Token{}, fmt.Errorf("%w: no expiry", ErrInvalidToken)
	}
	if err := std.ValidateWithLeeway(jwt.Expected{Issuer: is.URL, AnyAudience: jwt.Audience{resource}, Time: now}, 0); err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if t.Grant != "" && is.revoked(ctx, t.Grant, std.IssuedAt.Time(), now) {
		return Token{}, ErrRevoked
	}
	t.Issuer, t.Account, t.ID = std.Issuer, std.Subject, std.ID
	t.Resource, t.Expiry, t.IssuedAt = resource, std.Expiry.Time(), std.IssuedAt.Time()
	return t, nil
}

// Identifier is the issuer a resource's metadata names.
func (is *Issuer) Identifier() string { return is.URL }
