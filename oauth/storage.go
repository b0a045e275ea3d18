package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"strings"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/toolgate/toolgate/registry"
)

// storage is the provider's op.Storage: the server's records, its clients and the
// deployment's signing keys.
type storage struct{ s *Server }

type resourceKey struct{}

// authorizeParams are what an authorization request says that op's request type has
// no field for: its resource (RFC 8707), whether it named no scope at all, and
// where it came from.
type authorizeParams struct {
	resource string
	noScope  bool
	source   string // the address it came from (sourceOf)
}

// withResource carries them to CreateAuthRequest.
func withResource(ctx context.Context, p authorizeParams) context.Context {
	return context.WithValue(ctx, resourceKey{}, p)
}

func (st storage) CreateAuthRequest(ctx context.Context, ar *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if ar.CodeChallenge == "" || ar.CodeChallengeMethod != oidc.CodeChallengeMethodS256 {
		return nil, oidc.ErrInvalidRequest().WithDescription("PKCE with code_challenge_method S256 is required")
	}
	params, _ := ctx.Value(resourceKey{}).(authorizeParams)
	resource := params.resource
	if resource == "" {
		return nil, oidc.ErrInvalidRequest().WithDescription("resource is required: the URL of the link or tool endpoint (RFC 8707)")
	}
	// A request that names no scope asks for what the resource offers (its tool's
	// scopes, settled at consent); one that names only others asks for nothing here.
	scopes := toolScopesOf(ar.Scopes)
	if len(scopes) == 0 && !params.noScope {
		return nil, oidc.ErrInvalidScope().WithDescription("ask for <tool>:list and <tool>:call, as the resource's metadata names them")
	}
	tag := sourceTag(params.source)
	if err := st.s.admitRequest(ctx, tag); err != nil {
		return nil, err
	}
	r := &request{
		ID: newRequestID(tag), ClientID: ar.ClientID, RedirectURI: ar.RedirectURI, State: ar.State, Nonce: ar.Nonce,
		Scopes: append(scopes, oidc.ScopeOfflineAccess), ResponseType: ar.ResponseType, ResponseMode: ar.ResponseMode,
		Challenge: ar.CodeChallenge, Method: ar.CodeChallengeMethod, Resource: resource,
	}
	return r, st.s.records.write(ctx, st.s.records.requests, requestKey(r.ID), r)
}

func (st storage) AuthRequestByID(ctx context.Context, id string) (op.AuthRequest, error) {
	r := &request{}
	return r, st.s.records.read(ctx, st.s.records.requests, requestKey(id), r)
}

func (st storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	var id string
	if err := st.s.records.read(ctx, st.s.records.requests, "code."+registry.Hash(code), &id); err != nil {
		return nil, err
	}
	return st.AuthRequestByID(ctx, id)
}

func (st storage) SaveAuthCode(ctx context.Context, id, code string) error {
	return st.s.records.write(ctx, st.s.records.requests, "code."+registry.Hash(code), id)
}

func (st storage) DeleteAuthRequest(ctx context.Context, id string) error {
	return st.s.records.remove(ctx, st.s.records.requests, requestKey(id))
}

// tokenID is an access token's jti: it names its grant, so that revoking the token
// (RFC 7009) revokes the grant.
func tokenID(g *Grant) string { return g.Account + "/" + g.ID + "/" + registry.NewID("") }

// grantOf is the grant a token request is made for. A grant whose user is no longer
// one of its account's gives no token, even one written while the user was being
// deleted, after its grants were listed to be revoked.
func (st storage) grantOf(ctx context.Context, tr op.TokenRequest) (*Grant, error) {
	var g *Grant
	switch r := tr.(type) {
	case *Grant:
		g = r
	case *request:
		g = &Grant{}
		if err := st.s.records.read(ctx, st.s.records.grants, grantKey(r.Account, r.Grant), g); err != nil {
			return nil, oidc.ErrInvalidGrant().WithDescription("the grant was revoked")
		}
	}
	if g != nil {
		if v := st.s.issuer.view; g.User != "" && v != nil && v.Snapshot().User(g.Account, g.User) == nil {
			return nil, oidc.ErrInvalidGrant().WithDescription("the user who signed in was deleted")
		}
		return g, nil
	}
	return nil, oidc.ErrUnsupportedGrantType()
}

func (st storage) CreateAccessToken(ctx context.Context, tr op.TokenRequest) (string, time.Time, error) {
	g, err := st.grantOf(ctx, tr)
	if err != nil {
		return "", time.Time{}, err
	}
	if err := st.s.renewClient(ctx, g.Client); err != nil {
		return "", time.Time{}, err
	}
	return tokenID(g), time.Now().Add(st.s.tokenTTL), nil
}

// CreateAccessAndRefreshTokens issues a new refresh token for the grant and
// forgets the one it replaces: a refresh token works once. Writing the grant again
// renews it, and its client is renewed too (renewClient).
func (st storage) CreateAccessAndRefreshTokens(ctx context.Context, tr op.TokenRequest, current string) (string, string, time.Time, error) {
	g, err := st.grantOf(ctx, tr)
	if err != nil {
		return "", "", time.Time{}, err
	}
	if err := st.s.renewClient(ctx, g.Client); err != nil {
		return "", "", time.Time{}, err
	}
	if current != "" {
		if err := st.s.records.remove(ctx, st.s.records.grants, "refresh."+registry.Hash(current)); err != nil {
			return "", "", time.Time{}, err
		}
	}
	refresh := registry.NewID("tgr_") + registry.NewID("")
	g.RefreshHash, g.RefreshedAt = registry.Hash(refresh), time.Now().UTC()
	if err := st.s.records.write(ctx, st.s.records.grants, "refresh."+g.RefreshHash, grantKey(g.Account, g.ID)); err != nil {
		return "", "", time.Time{}, err
	}
	if err := st.s.records.write(ctx, st.s.records.grants, grantKey(g.Account, g.ID), g); err != nil {
		return "", "", time.Time{}, err
	}
	return tokenID(g), refresh, time.Now().Add(st.s.tokenTTL), nil
}

// refreshGrant finds the grant a refresh token is the current one of.
func (st storage) refreshGrant(ctx context.Context, token string) (*Grant, error) {
	g, err := st.lastingGrant(ctx, token)
	if errors.Is(err, errNotFound) {
		return nil, op.ErrInvalidRefreshToken
	}
	return g, err
}

// lastingGrant is currentGrant read through a grant bucket's loss of its leader
// (registry.Store.Lasting): a refresh, or the revocation of a refresh token, made
// during the election waits for the new leader rather than taking the registry's
// silence for an unknown token.
func (st storage) lastingGrant(ctx context.Context, token string) (*Grant, error) {
	var g *Grant
	err := st.s.store.Lasting(ctx, func(ctx context.Context) (err error) {
		g, err = st.currentGrant(ctx, token)
		return err
	})
	return g, err
}

// currentGrant is refreshGrant with the registry's error: errNotFound when the token
// is no grant's current one.
func (st storage) currentGrant(ctx context.Context, token string) (*Grant, error) {
	var key string
	h := registry.Hash(token)
	if err := st.s.records.read(ctx, st.s.records.grants, "refresh."+h, &key); err != nil {
		return nil, err
	}
	g := &Grant{}
	if err := st.s.records.read(ctx, st.s.records.grants, key, g); err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(g.RefreshHash), []byte(h)) != 1 {
		return nil, errNotFound
	}
	return g, nil
}

func (st storage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	return st.refreshGrant(ctx, token)
}

func (st storage) TerminateSession(context.Context, string, string) error { return nil }

// RevokeToken revokes the grant a token came from (RFC 7009): its refresh token
// and every access token it gave. The token is an access token's id
// (account/grant/nonce, see tokenID) or a refresh token; op names the account as
// userID for both.
func (st storage) RevokeToken(ctx context.Context, token, userID, clientID string) *oidc.Error {
	err := st.s.revoke(ctx, func(ctx context.Context) (*Grant, error) {
		g := &Grant{}
		var err error
		if parts := strings.Split(token, "/"); len(parts) == 3 {
			if parts[0] != userID {
				return nil, errNotFound
			}
			err = st.s.records.read(ctx, st.s.records.grants, grantKey(parts[0], parts[1]), g)
		} else {
			g, err = st.currentGrant(ctx, token)
		}
		if err == nil && g.Client != clientID {
			err = errOtherClient
		}
		return g, err
	})
	switch {
	case errors.Is(err, errNotFound):
		return nil // not one of ours, or revoked already: nothing to revoke (RFC 7009 §2.2)
	case errors.Is(err, errOtherClient):
		return oidc.ErrInvalidClient().WithDescription("the token was issued to another client")
	case err != nil:
		return oidc.ErrServerError()
	}
	return nil
}

// errOtherClient: a client asked to revoke another client's token.
var errOtherClient = errors.New("oauth: the token was issued to another client")

// GetRefreshTokenInfo names the grant of a refresh token being revoked: its account,
// and an id of the grant's tokens (tokenID), which RevokeToken revokes the grant by.
// A registry that cannot answer is an error of the server's, not an unknown token: op
// would otherwise try the token as some other kind, and answer the revocation 200
// with nothing revoked.
func (st storage) GetRefreshTokenInfo(ctx context.Context, _ string, token string) (string, string, error) {
	g, err := st.refreshGrant(ctx, token)
	if err != nil {
		return "", "", err
	}
	return g.Account, tokenID(g), nil
}

type signingKey struct{ jwk jose.JSONWebKey }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return Algorithm }
func (k signingKey) Key() any                                    { return k.jwk.Key }
func (k signingKey) ID() string                                  { return k.jwk.KeyID }
func (k signingKey) Algorithm() jose.SignatureAlgorithm          { return Algorithm }
func (k signingKey) Use() string                                 { return "sig" }

func (st storage) SigningKey(ctx context.Context) (op.SigningKey, error) {
	jwk, err := st.s.issuer.keys.Signing(ctx, time.Now())
	return signingKey{jwk}, err
}

func (st storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{Algorithm}, nil
}

func (st storage) KeySet(ctx context.Context) ([]op.Key, error) {
	set := st.s.issuer.keys.JWKS(ctx, time.Now())
	keys := make([]op.Key, len(set.Keys))
	for i, k := range set.Keys {
		keys[i] = signingKey{k}
	}
	return keys, nil
}

// GetClientByClientID finds a client; one whose registration is gone (removed, or
// expired unused) is invalid_client (RFC 6749 §5.2: client authentication failed,
// an unknown client), answered 401 before its refresh token is read, so a refresh
// for it changes nothing. Any other failure stays a server error.
func (st storage) GetClientByClientID(ctx context.Context, id string) (op.Client, error) {
	c, err := st.s.client(ctx, id)
	if errors.Is(err, errNotFound) {
		return nil, oidc.ErrInvalidClient().WithDescription("the client is not registered (its registration may have expired: register again)").WithParent(err)
	}
	return c, err
}

func (st storage) AuthorizeClientIDSecret(ctx context.Context, id, secret string) error {
	return st.s.authorizeSecret(ctx, id, secret)
}

func (st storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

func (st storage) SetUserinfoFromToken(_ context.Context, u *oidc.UserInfo, _, subject, _ string) error {
	u.Subject = subject
	return nil
}

var errNotOffered = errors.New("oauth: not offered")

func (st storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errNotOffered
}

func (st storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

// GetPrivateClaimsFromRequest puts the tool scopes, the grant and its user in the
// access token.
func (st storage) GetPrivateClaimsFromRequest(ctx context.Context, tr op.TokenRequest, _ []string) (map[string]any, error) {
	g, err := st.grantOf(ctx, tr)
	if err != nil {
		return nil, err
	}
	claims := map[string]any{"scope": strings.Join(g.Scopes, " "), "tg_grant": grantKey(g.Account, g.ID)}
	if g.User != "" {
		claims["tg_user"] = g.User
	}
	return claims, nil
}

func (st storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotOffered
}

func (st storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errNotOffered
}

func (st storage) Health(context.Context) error { return nil }
