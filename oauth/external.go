package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	oidcclient "github.com/zitadel/oidc/v3/pkg/client"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// A deployment behind its own identity provider checks the access tokens that
// provider issues instead of issuing its own: the provider is found by OpenID
// discovery, its keys are its JWKS (zitadel/oidc's remote key set, fetched again
// when a token names a key it does not hold, so the provider may rotate), and a
// token's claims name the account and the user.

// ExternalConfig says which provider a deployment trusts and how its tokens read.
type ExternalConfig struct {
	// Issuer is the provider's issuer identifier, exactly as its discovery document
	// and its tokens' iss say it.
	Issuer string
	// AccountClaim names the claim whose string value is the account a token is for.
	AccountClaim string
	// UserClaim names the claim whose string value is the user who signed in.
	UserClaim string
	// Audience, when set, is the audience a token may carry instead of the resource's
	// URL: for a provider without resource indicators (RFC 8707), which cannot put
	// the resource in aud. "": the resource's URL only.
	Audience string
	// KeysMinRefetch is how long after a fetch of the key set a token naming a key
	// the set lacks may make the edge fetch it again; such tokens within it are
	// refused without a fetch, so they cannot make the edge hammer the provider.
	KeysMinRefetch time.Duration
	// KeysMaxAge is how long a fetched key set is trusted before it is fetched anew.
	KeysMaxAge time.Duration
	// AcceptJWTTyp takes tokens whose typ header is "JWT" as access tokens, for
	// providers that label them so instead of RFC 9068's "at+jwt" (externaltyp.go).
	AcceptJWTTyp bool
	// Client is the HTTP client for discovery and the key set (nil: a 10 s one).
	Client *http.Client
}

// External checks the access tokens of an external OpenID provider.
type External struct {
	// URL is the provider's issuer identifier.
	URL      string
	cfg      ExternalConfig
	verifier *op.AccessTokenVerifier
	keys     *limitedKeySet
}

// signingAlgorithms are the algorithms a provider's token may be signed with: public
// key ones only.
var signingAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// DiscoverExternal finds cfg's provider by its discovery document (whose issuer must
// be cfg.Issuer) and makes a checker of its tokens.
func DiscoverExternal(ctx context.Context, cfg ExternalConfig) (*External, error) {
	if cfg.AccountClaim == "" || cfg.UserClaim == "" {
		return nil, errors.New("oauth: an external provider needs the claims that name the account and the user")
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: 10 * time.Second}
	}
	doc, err := oidcclient.Discover(ctx, cfg.Issuer, cfg.Client)
	if err != nil {
		return nil, fmt.Errorf("oauth: discover %s: %w", cfg.Issuer, err)
	}
	if doc.JwksURI == "" {
		return nil, fmt.Errorf("oauth: %s: its discovery document names no jwks_uri", cfg.Issuer)
	}
	keys := newLimitedKeySet(cfg.Client, doc.JwksURI, cfg.KeysMinRefetch, cfg.KeysMaxAge)
	return &External{URL: cfg.Issuer, cfg: cfg, keys: keys,
		verifier: op.NewAccessTokenVerifier(cfg.Issuer, keys, op.WithSupportedAccessTokenSigningAlgorithms(signingAlgorithms...))}, nil
}

// Identifier is the issuer a resource's metadata names.
func (x *External) Identifier() string { return x.URL }

// Verify checks raw as an access token for resource at now: signed by one of the
// provider's keys, labelled an access token, issued by it, for resource (or the configured audience), not
// expired, naming an account. Every failure wraps ErrInvalidToken.
func (x *External) Verify(ctx context.Context, raw, resource string, now time.Time) (Token, error) {
	claims, err := op.VerifyAccessToken[*oidc.AccessTokenClaims](ctx, raw, x.verifier)
	if err != nil {
		return Token{}, fmt.Errorf("%w: %w", ErrInvalidToken, err)
	}
	if err := x.checkType(raw, claims); err != nil {
		return Token{}, err
	}
	exp := claims.GetExpiration()
	if !now.Before(exp) {
		return Token{}, fmt.Errorf("%w: expired", ErrInvalidToken)
	}
	aud := []string(claims.Audience)
	if !slices.Contains(aud, resource) && (x.cfg.Audience == "" || !slices.Contains(aud, x.cfg.Audience)) {
		return Token{}, fmt.Errorf("%w: issued for another audience", ErrInvalidToken)
	}
	account, _ := claims.Claims[x.cfg.AccountClaim].(string)
	if account == "" {
		return Token{}, fmt.Errorf("%w: no %s claim", ErrInvalidToken, x.cfg.AccountClaim)
	}
	user, _ := claims.Claims[x.cfg.UserClaim].(string)
	return Token{
		Issuer: claims.Issuer, Account: account, User: user, Resource: resource,
		Scope: strings.Join(claims.Scopes, " "), Client: claims.ClientID, ID: claims.JWTID,
		Expiry: exp, IssuedAt: claims.GetIssuedAt(),
	}, nil
}
