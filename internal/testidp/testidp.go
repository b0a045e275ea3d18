// Package testidp runs a real OpenID provider for tests: zitadel/oidc's OpenID
// Provider (pkg/op) over its example storage, on 127.0.0.1, with its login page (a
// form a browser fills in), authorization code with PKCE, refresh tokens rotated on
// every refresh, and revocation. What it adds is what tests observe: access tokens
// of a lifetime the test chooses, a count of refresh requests, and the revocation of
// every grant of its user.
package testidp

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// Options are a provider's client and tokens.
type Options struct {
	ClientID     string
	ClientSecret string
	RedirectURI  string
	// AccessTokenLifetime is how long an access token lives (0: the example's 5 minutes).
	AccessTokenLifetime time.Duration
	// JWTAccessTokens makes the provider one a resource server trusts (resource.go):
	// JWT access tokens with any scope asked for, Claims in them, a rotating key.
	JWTAccessTokens bool
	// Claims are added to the access tokens of the user whose subject keys them.
	Claims map[string]map[string]any
	// ResourceAudience makes an access token's audience the resource indicator its
	// authorization request carried (RFC 8707); without it, the client id.
	ResourceAudience bool
	// RefreshTokens gives every code grant a refresh token, as providers that need no
	// offline_access scope for one do (op's example storage needs it).
	RefreshTokens bool
}

// Provider is a running OpenID provider.
type Provider struct {
	Issuer string
	opts   Options
	store  *tokens
	// refreshes counts token requests with grant_type=refresh_token.
	refreshes  atomic.Int64
	keyFetches atomic.Int64
	mu         sync.Mutex
	resources  map[string][]string // by endpoint ("auth", "code", "refresh"): the resource indicators sent
}

// Resources are the resource indicators (RFC 8707) the provider was sent at endpoint:
// "auth" (the authorization endpoint), "code" or "refresh" (the token endpoint's
// grants).
func (p *Provider) Resources(endpoint string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.resources[endpoint]...)
}

// The user the example storage holds; its name is "test-user@" and the issuer's host.
const (
	userID   = "id1"
	Password = "verysecure"
)

// Username is the name the login page takes.
func (p *Provider) Username() string { return "test-user@127.0.0.1" }

// Refreshes is how many refresh requests reached the token endpoint.
func (p *Provider) Refreshes() int64 { return p.refreshes.Load() }

// RevokeAll revokes every refresh token the provider issued its user for the client:
// the next refresh with any of them is refused (invalid_grant).
func (p *Provider) RevokeAll() error {
	return p.store.TerminateSession(context.Background(), userID, p.opts.ClientID)
}

// tokens is the example storage with access tokens of the chosen lifetime, and
// what resource.go adds.
type tokens struct {
	*storage.Storage
	lifetime time.Duration
	opts     Options
	ring     ring
	mu       sync.Mutex
	// resources are the resource indicators of authorization requests (by id) and
	// of refresh tokens ("refresh:" and the token).
	resources map[string]string
}

func (s *tokens) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	req, res := unwrap(req)
	id, refresh, exp, err := s.Storage.CreateAccessAndRefreshTokens(ctx, req, current)
	if err == nil && s.lifetime > 0 {
		exp = time.Now().Add(s.lifetime)
	}
	if err == nil && res != "" {
		s.mu.Lock()
		s.resources["refresh:"+refresh] = res
		s.mu.Unlock()
	}
	return id, refresh, exp, err
}

func (s *tokens) CreateAccessToken(ctx context.Context, req op.TokenRequest) (string, time.Time, error) {
	req, _ = unwrap(req)
	id, exp, err := s.Storage.CreateAccessToken(ctx, req)
	if err == nil && s.lifetime > 0 {
		exp = time.Now().Add(s.lifetime)
	}
	return id, exp, err
}

// Start runs a provider until the test ends.
func Start(t testing.TB, opts Options) *Provider {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{Issuer: "http://" + ln.Addr().String(), opts: opts}
	client := storage.WebClient(opts.ClientID, opts.ClientSecret, opts.RedirectURI)
	p.store = &tokens{Storage: storage.NewStorageWithClients(storage.NewUserStore(p.Issuer),
		map[string]*storage.Client{opts.ClientID: client}), lifetime: opts.AccessTokenLifetime,
		opts: opts, resources: map[string]string{}}
	if opts.JWTAccessTokens {
		if err := p.store.ring.rotate(); err != nil {
			t.Fatal(err)
		}
	}
	router := exampleop.SetupServer(p.Issuer, p.store, nil, false)
	srv := &http.Server{Handler: p.count(router), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *Provider) saw(endpoint string, resources []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.resources == nil {
		p.resources = map[string][]string{}
	}
	p.resources[endpoint] = append(p.resources[endpoint], resources...)
}

// count counts the refresh requests and notes the resource indicators; the form parsed here is the one the provider
// reads after.
func (p *Provider) count(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/auth":
			p.saw("auth", r.URL.Query()["resource"])
			r = withResource(r)
		case r.URL.Path == "/keys":
			p.keyFetches.Add(1)
		case r.Method == http.MethodPost && r.URL.Path == "/oauth/token" && r.ParseForm() == nil:
			switch r.PostForm.Get("grant_type") {
			case "refresh_token":
				p.refreshes.Add(1)
				p.saw("refresh", r.PostForm["resource"])
			case "authorization_code":
				p.saw("code", r.PostForm["resource"])
			}
		}
		next.ServeHTTP(w, r)
	})
}

// SecondUsername is the name of the example storage's other user (subject "id2"),
// whose password is Password too.
const SecondUsername = "test-user2"

// SignIn does what the account holder's browser does with a connect URL: it follows
// it to the provider's login page, fills in and sends the form, and follows the
// redirects back to the redirect URI. It returns the last answer's status and body.
func (p *Provider) SignIn(connectURL string) (int, string, error) {
	return p.SignInAs(connectURL, p.Username())
}

// SignInAs is SignIn as the user named username.
func (p *Provider) SignInAs(connectURL, username string) (int, string, error) {
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: time.Minute}
	res, err := client.Get(connectURL)
	if err != nil {
		return 0, "", err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if id == "" {
		return 0, "", fmt.Errorf("testidp: the connect URL led to %s, not the login page", res.Request.URL)
	}
	res, err = client.PostForm(p.Issuer+"/login/username", url.Values{"username": {username}, "password": {Password}, "id": {id}})
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res.StatusCode, string(b), err
}
