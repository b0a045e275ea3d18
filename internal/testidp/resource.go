package testidp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// What a deployment's identity provider does for a resource server in front of it
// (Options.JWTAccessTokens): access tokens are JWTs signed with the provider's key,
// any scope a client asks for is granted (as a provider configured with the resource's
// scopes does), the claims Options.Claims names are in each user's tokens, and the
// signing key rotates when the test says (RotateKey), the key set keeping the
// previous key. With Options.ResourceAudience the provider honours RFC 8707: a
// token's audience is the resource indicator of its authorization request.

// Subjects of the example storage's two users.
const (
	Subject       = userID
	SecondSubject = "id2"
)

// jwtClient is a client whose access tokens are JWTs and which may ask for any scope.
type jwtClient struct{ op.Client }

func (jwtClient) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (jwtClient) IsScopeAllowed(string) bool          { return true }

func (s *tokens) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := s.Storage.GetClientByClientID(ctx, id)
	if err != nil || !s.opts.JWTAccessTokens {
		return c, err
	}
	return jwtClient{c}, nil
}

// GetPrivateClaimsFromScopes adds the user's claims, and the granted scopes as
// RFC 9068's scope claim (op's JWT access tokens carry none of their own).
func (s *tokens) GetPrivateClaimsFromScopes(ctx context.Context, userID, clientID string, scopes []string) (map[string]any, error) {
	claims, err := s.Storage.GetPrivateClaimsFromScopes(ctx, userID, clientID, scopes)
	if err != nil || !s.opts.JWTAccessTokens {
		return claims, err
	}
	if claims == nil {
		claims = map[string]any{}
	}
	claims["scope"] = strings.Join(scopes, " ")
	for k, v := range s.opts.Claims[userID] {
		claims[k] = v
	}
	return claims, nil
}

// SetUserinfoFromScopes puts the user's claims in its ID tokens too, as providers
// whose claim mappers apply to both kinds do: an ID token then names the account
// as its access token does.
func (s *tokens) SetUserinfoFromScopes(ctx context.Context, info *oidc.UserInfo, userID, clientID string, scopes []string) error {
	if err := s.Storage.SetUserinfoFromScopes(ctx, info, userID, clientID, scopes); err != nil || !s.opts.JWTAccessTokens {
		return err
	}
	for k, v := range s.opts.Claims[userID] {
		info.AppendClaims(k, v)
	}
	return nil
}

// signingKey is one RSA key of the provider's.
type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *signingKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *signingKey) Key() any                                    { return k.key }
func (k *signingKey) ID() string                                  { return k.id }
func (k *signingKey) Use() string                                 { return "sig" }

type publicKey struct{ *signingKey }

func (k publicKey) Key() any { return &k.key.PublicKey }

// ring is the provider's current signing key and the one before it.
type ring struct {
	mu       sync.Mutex
	n        int
	current  *signingKey
	previous *signingKey
}

func (r *ring) rotate() error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("testidp: key: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	r.previous, r.current = r.current, &signingKey{id: fmt.Sprintf("key-%d", r.n), key: key}
	return nil
}

// RotateKey makes a new signing key current: the tokens issued from now on name it,
// and the key set holds it and the previous one. It returns the new key's id.
func (p *Provider) RotateKey() (string, error) {
	if err := p.store.ring.rotate(); err != nil {
		return "", err
	}
	p.store.ring.mu.Lock()
	defer p.store.ring.mu.Unlock()
	return p.store.ring.current.id, nil
}

// KeyFetches is how many times the provider's key set was fetched.
func (p *Provider) KeyFetches() int64 { return p.keyFetches.Load() }

func (s *tokens) SigningKey(ctx context.Context) (op.SigningKey, error) {
	if !s.opts.JWTAccessTokens {
		return s.Storage.SigningKey(ctx)
	}
	s.ring.mu.Lock()
	defer s.ring.mu.Unlock()
	return s.ring.current, nil
}

func (s *tokens) SignatureAlgorithms(ctx context.Context) ([]jose.SignatureAlgorithm, error) {
	if !s.opts.JWTAccessTokens {
		return s.Storage.SignatureAlgorithms(ctx)
	}
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *tokens) KeySet(ctx context.Context) ([]op.Key, error) {
	if !s.opts.JWTAccessTokens {
		return s.Storage.KeySet(ctx)
	}
	s.ring.mu.Lock()
	defer s.ring.mu.Unlock()
	keys := []op.Key{publicKey{s.ring.current}}
	if s.ring.previous != nil {
		keys = append(keys, publicKey{s.ring.previous})
	}
	return keys, nil
}

// resourceKey carries the resource indicator of an authorization request from the
// HTTP handler to CreateAuthRequest (op's request type has no field for it).
type resourceKey struct{}

// withResource puts the resource indicator of r, an authorization request, in its
// context.
func withResource(r *http.Request) *http.Request {
	if res := r.URL.Query().Get("resource"); res != "" {
		return r.WithContext(context.WithValue(r.Context(), resourceKey{}, res))
	}
	return r
}

// audienced is a token request whose audience is its resource.
type audiencedAuth struct {
	op.AuthRequest
	resource string
}

func (a audiencedAuth) GetAudience() []string { return []string{a.resource} }

type audiencedRefresh struct {
	op.RefreshTokenRequest
	resource string
}

func (a audiencedRefresh) GetAudience() []string { return []string{a.resource} }

func (s *tokens) CreateAuthRequest(ctx context.Context, req *oidc.AuthRequest, user string) (op.AuthRequest, error) {
	if s.opts.RefreshTokens && !slices.Contains(req.Scopes, oidc.ScopeOfflineAccess) {
		req.Scopes = append(req.Scopes, oidc.ScopeOfflineAccess)
	}
	ar, err := s.Storage.CreateAuthRequest(ctx, req, user)
	if res, ok := ctx.Value(resourceKey{}).(string); ok && err == nil && s.opts.ResourceAudience {
		s.mu.Lock()
		s.resources[ar.GetID()] = res
		s.mu.Unlock()
	}
	return ar, err
}

func (s *tokens) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	ar, err := s.Storage.AuthRequestByCode(ctx, code)
	if err != nil {
		return ar, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.resources[ar.GetID()]; ok {
		return audiencedAuth{ar, res}, nil
	}
	return ar, nil
}

func (s *tokens) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	rr, err := s.Storage.TokenRequestByRefreshToken(ctx, token)
	if err != nil {
		return rr, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if res, ok := s.resources["refresh:"+token]; ok {
		return audiencedRefresh{rr, res}, nil
	}
	return rr, nil
}

// unwrap is the storage's own request behind a token request with an audience (the
// storage tells requests apart by their type), and the resource it had.
func unwrap(req op.TokenRequest) (op.TokenRequest, string) {
	switch r := req.(type) {
	case audiencedAuth:
		return r.AuthRequest, r.resource
	case audiencedRefresh:
		return r.RefreshTokenRequest, r.resource
	}
	return req, ""
}

// Sign signs claims with the provider's current key (JWTAccessTokens only), with typ
// as the header's typ ("": none): a token as a provider labelling its tokens so
// would issue it.
func (p *Provider) Sign(claims map[string]any, typ string) (string, error) {
	p.store.ring.mu.Lock()
	k := p.store.ring.current
	p.store.ring.mu.Unlock()
	opts := (&jose.SignerOptions{}).WithHeader(jose.HeaderKey("kid"), k.id)
	if typ != "" {
		opts = opts.WithType(jose.ContentType(typ))
	}
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: k.key}, opts)
	if err != nil {
		return "", fmt.Errorf("testidp: signer: %w", err)
	}
	return jwt.Signed(sig).Claims(claims).Serialize()
}
