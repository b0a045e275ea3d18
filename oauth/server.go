package oauth

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/toolgate/toolgate/registry"
)

// Server is the deployment's own authorization server: zitadel/oidc's OpenID
// Provider over the records in the registry (storage.go), with what MCP clients need
// beside it: RFC 8414 metadata advertising client ID metadata documents, dynamic
// client registration (RFC 7591), and iss on every authorization response (RFC 9207).
// Sign-in and consent are the dashboard's pages (Request, Approve, Deny).
type Server struct {
	issuer   *Issuer
	records  *records
	provider *op.Provider
	http     *http.Client
	tokenTTL time.Duration
	loginURL func(id string) string
	// loopbackDocuments: client ID metadata documents may be http URLs on a
	// loopback address.
	loopbackDocuments bool
	store             *registry.Store // where a grant's revocation is announced
	limits            Limits
	registrations     window // per source address, on this edge
}

// ServerConfig sets up a Server.
type ServerConfig struct {
	// TokenTTL is how long an access token is good for.
	TokenTTL time.Duration
	// LoginURL is the dashboard page that signs the user in and asks consent for an
	// authorization request.
	LoginURL func(requestID string) string
	// HTTPClient fetches client ID metadata documents (nil: a client of its own).
	HTTPClient *http.Client
	// LoopbackDocuments lets a client name itself by an http URL on a loopback
	// address (a test's, or a development stack's own machine); off, only https ones.
	LoopbackDocuments bool
	// Limits bound the clients and authorization requests strangers can make (a
	// zero limit: DefaultLimits' own).
	Limits Limits
	// UnusedLifetime is how long a grant, its refresh token and a dynamically
	// registered client are kept with no token issued for them: the TTL of
	// GrantBucket (zero: RefreshLifetime). Tests shorten it; a deployment whose
	// bucket has another TTL is refused, as the registry refuses any bucket's.
	UnusedLifetime time.Duration
}

// NewServer makes the authorization server of is, its records in store.
func NewServer(ctx context.Context, store *registry.Store, is *Issuer, cfg ServerConfig) (*Server, error) {
	if cfg.TokenTTL <= 0 || cfg.LoginURL == nil {
		return nil, errors.New("oauth: a token lifetime and a login page are required")
	}
	cfg.Limits = cfg.Limits.orDefaults()
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("oauth: %w", err)
	}
	if cfg.UnusedLifetime == 0 {
		cfg.UnusedLifetime = RefreshLifetime
	}
	rs, err := openRecords(ctx, store, cfg.UnusedLifetime)
	if err != nil {
		return nil, err
	}
	s := &Server{issuer: is, records: rs, http: cfg.HTTPClient, tokenTTL: cfg.TokenTTL, loginURL: cfg.LoginURL,
		loopbackDocuments: cfg.LoopbackDocuments, store: store, limits: cfg.Limits}
	if s.http == nil {
		s.http = &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	// The provider encrypts nothing a later request decrypts (codes are kept hashed in
	// the registry), so each edge may hold a key of its own.
	opCfg := &op.Config{CodeMethodS256: true, AuthMethodPost: true, GrantTypeRefreshToken: true}
	if _, err := rand.Read(opCfg.CryptoKey[:]); err != nil {
		return nil, fmt.Errorf("oauth: crypto key: %w", err)
	}
	var opts []op.Option
	if strings.HasPrefix(is.URL, "http://") {
		opts = append(opts, op.WithAllowInsecure()) // a deployment on plain HTTP (development, tests)
	}
	if s.provider, err = op.NewProvider(opCfg, storage{s}, op.StaticIssuer(is.URL), opts...); err != nil {
		return nil, fmt.Errorf("oauth: provider: %w", err)
	}
	if is.records == nil { // no view to ask: every token's grant is read from the leader
		is.records = rs
	}
	return s, nil
}

// Paths the server answers, for the edge to route to Handler.
var Paths = []string{
	"/.well-known/oauth-authorization-server", "/.well-known/openid-configuration",
	"/authorize", "/authorize/callback", "/oauth/token", "/oauth/register", "/revoke", "/keys", "/userinfo",
}

// Handler serves Paths.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("GET /.well-known/openid-configuration", s.metadata)
	mux.HandleFunc("POST /oauth/register", s.registration)
	mux.Handle("/authorize", withIss(s.issuer.URL, http.HandlerFunc(s.authorize)))
	mux.Handle("/authorize/callback", withIss(s.issuer.URL, s.provider))
	// A token answer is never cached (RFC 6749 §5.1), which op leaves to its host.
	mux.Handle("/oauth/token", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		s.provider.ServeHTTP(w, r)
	}))
	for _, p := range []string{"/revoke", "/keys", "/userinfo"} {
		mux.Handle(p, s.provider)
	}
	return mux
}

// authorize hands an authorization request to the provider with what op does not
// read of it. A request without a scope is given offline_access, which op asks for
// and which names no tool: consent then grants the resource's tool scopes.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	p := authorizeParams{resource: r.FormValue("resource"), noScope: r.FormValue("scope") == "", source: sourceOf(r)}
	if p.noScope {
		r.Form.Set("scope", oidc.ScopeOfflineAccess) // parsed by FormValue, and read so by op
	}
	s.provider.ServeHTTP(w, r.WithContext(withResource(r.Context(), p)))
}

// Metadata is the server's metadata (RFC 8414, and OpenID discovery): the provider's,
// with client ID metadata documents, registration and iss in responses.
type Metadata struct {
	*oidc.DiscoveryConfiguration
	IssParameterSupported bool `json:"authorization_response_iss_parameter_supported"`
}

func (s *Server) metadata(w http.ResponseWriter, r *http.Request) {
	ctx := op.ContextWithIssuer(r.Context(), s.issuer.URL)
	d := op.CreateDiscoveryConfig(ctx, s.provider, storage{s})
	d.ClientIDMetadataDocumentSupported = true
	d.RegistrationEndpoint = s.issuer.URL + "/oauth/register"
	d.ScopesSupported = []string{oidc.ScopeOfflineAccess}
	d.ResponseTypesSupported = []string{string(oidc.ResponseTypeCode)}
	d.GrantTypesSupported = []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
	d.TokenEndpointAuthMethodsSupported = []oidc.AuthMethod{oidc.AuthMethodNone, oidc.AuthMethodBasic, oidc.AuthMethodPost}
	d.IntrospectionEndpoint, d.EndSessionEndpoint, d.DeviceAuthorizationEndpoint, d.CheckSessionIframe = "", "", "", ""
	w.Header().Set("Access-Control-Allow-Origin", "*")
	writeJSON(w, http.StatusOK, Metadata{DiscoveryConfiguration: d, IssParameterSupported: true})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// registration answers a dynamic client registration request (RFC 7591).
func (s *Server) registration(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Access-Control-Allow-Origin", "*")
	var reg Registration
	dec := json.NewDecoder(io.LimitReader(r.Body, maxDocument))
	if err := dec.Decode(&reg); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata", "error_description": "the body is not a JSON object"})
		return
	}
	out, err := s.register(r.Context(), reg, sourceOf(r))
	var bad *errBadRegistration
	var tooMany *errTooMany
	switch {
	case errors.As(err, &tooMany):
		tooMany.write(w)
	case errors.As(err, &bad):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": bad.code, "error_description": bad.desc})
	case err != nil:
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "server_error"})
	default:
		writeJSON(w, http.StatusCreated, out)
	}
}

// withIss adds the issuer to every redirect an authorization response makes
// (RFC 9207), so a client can tell which server answered.
func withIss(issuer string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&issWriter{ResponseWriter: w, issuer: issuer}, r)
	})
}

type issWriter struct {
	http.ResponseWriter
	issuer string
}

func (w *issWriter) WriteHeader(status int) {
	if loc := w.Header().Get("Location"); status >= 300 && status < 400 && loc != "" {
		w.Header().Set("Location", addIss(loc, w.issuer))
	}
	w.ResponseWriter.WriteHeader(status)
}

func addIss(loc, issuer string) string {
	u, err := url.Parse(loc)
	if err != nil || u.Query().Has("iss") {
		return loc
	}
	q := u.Query()
	if !q.Has("code") && !q.Has("error") {
		return loc // not an authorization response: the way to the sign-in page
	}
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

// Consent is what the consent page shows of an authorization request.
type Consent struct {
	ID         string
	Client     string // the client id: a URL for a client with a metadata document
	ClientName string
	Resource   string
	Scopes     []string
	// RedirectURI is where the browser ends, with the code or the refusal.
	RedirectURI string
}

// Request finds an authorization request that awaits consent.
func (s *Server) Request(ctx context.Context, id string) (Consent, error) {
	r := &request{}
	if err := s.records.read(ctx, s.records.requests, requestKey(id), r); err != nil || r.Approved {
		return Consent{}, errNotFound
	}
	c := Consent{ID: r.ID, Client: r.ClientID, Resource: r.Resource, Scopes: toolScopesOf(r.Scopes), RedirectURI: r.RedirectURI}
	if cl, err := s.client(ctx, r.ClientID); err == nil {
		c.ClientName = cl.Name
	}
	return c, nil
}

// Approve grants an authorization request for account, signed in as user (empty for
// its API key): tool's scopes among those asked, at the request's resource. It
// returns where the browser goes next: the provider's callback, which answers the
// client with a code.
func (s *Server) Approve(ctx context.Context, id, account, user, tool string) (string, error) {
	r := &request{}
	if err := s.records.read(ctx, s.records.requests, requestKey(id), r); err != nil || r.Approved {
		return "", errNotFound
	}
	scopes := slices.DeleteFunc(toolScopesOf(r.Scopes), func(sc string) bool { return !slices.Contains(ToolScopes(tool), sc) })
	if len(toolScopesOf(r.Scopes)) == 0 { // the request named no scope: the resource's
		scopes = ToolScopes(tool)
	}
	if len(scopes) == 0 {
		return "", fmt.Errorf("oauth: the request asks for no scope of %s", tool)
	}
	c, _ := s.Request(ctx, id)
	g := &Grant{ID: registry.NewID("gr"), Account: account, User: user, Client: r.ClientID, ClientName: c.ClientName,
		Resource: r.Resource, Tool: tool, Scopes: scopes, CreatedAt: time.Now().UTC()}
	if err := s.records.write(ctx, s.records.grants, grantKey(account, g.ID), g); err != nil {
		return "", err
	}
	r.Account, r.Grant, r.Approved, r.AuthTime = account, g.ID, true, g.CreatedAt
	r.Scopes = append(scopes, oidc.ScopeOfflineAccess)
	if err := s.records.write(ctx, s.records.requests, requestKey(id), r); err != nil {
		return "", err
	}
	return op.AuthCallbackURL(s.provider)(op.ContextWithIssuer(ctx, s.issuer.URL), id), nil
}

// Deny ends an authorization request the user refused, and returns the client's
// redirect with access_denied.
func (s *Server) Deny(ctx context.Context, id string) (string, error) {
	r := &request{}
	if err := s.records.read(ctx, s.records.requests, requestKey(id), r); err != nil {
		return "", errNotFound
	}
	_ = s.records.remove(ctx, s.records.requests, requestKey(id))
	u, err := url.Parse(r.RedirectURI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("error", "access_denied")
	if r.State != "" {
		q.Set("state", r.State)
	}
	q.Set("iss", s.issuer.URL)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Grants lists what account granted, newest first. A grant that cannot be read, or a
// listing its context cut short, is an error rather than a grant left out.
func (s *Server) Grants(ctx context.Context, account string) ([]Grant, error) {
	lister, err := s.records.grants.ListKeysFiltered(ctx, "grant."+account+".*")
	if err != nil {
		return nil, fmt.Errorf("oauth: list grants: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var out []Grant
	for key := range lister.Keys() {
		var g Grant
		switch err := s.records.read(ctx, s.records.grants, key, &g); {
		case errors.Is(err, errNotFound):
			continue // revoked meanwhile
		case err != nil:
			return nil, err
		}
		out = append(out, g)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("oauth: list grants: %w", err) // the keys may have stopped early
	}
	slices.SortFunc(out, func(a, b Grant) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, nil
}

// RevokeUserGrants revokes every grant of account that user signed in for, as
// RevokeGrant does each: a user deleted keeps no access. The grants are listed
// through the grant bucket's loss of its leader, as the revocations are made.
func (s *Server) RevokeUserGrants(ctx context.Context, account, user string) error {
	var grants []Grant
	err := s.store.LastingEvery(ctx, listAttempt, func(ctx context.Context) (err error) {
		grants, err = s.Grants(ctx, account)
		return err
	})
	if err != nil {
		return err
	}
	for _, g := range grants {
		if g.User != user {
			continue
		}
		if _, err := s.RevokeGrant(ctx, account, g.ID); err != nil && !errors.Is(err, errNotFound) {
			return fmt.Errorf("oauth: revoke grant %s of user %s: %w", g.ID, user, err)
		}
	}
	return nil
}

// listAttempt bounds one attempt of listing an account's grants while the grant
// bucket has no leader.
const listAttempt = 2 * time.Second

// RevokeGrant removes a grant of account, and returns it: its refresh token stops
// working, and its access tokens are refused from then on, by every edge once it is
// announced.
func (s *Server) RevokeGrant(ctx context.Context, account, id string) (*Grant, error) {
	g := &Grant{}
	err := s.revoke(ctx, func(ctx context.Context) (*Grant, error) {
		return g, s.records.read(ctx, s.records.grants, grantKey(account, id), g)
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}
