package credentials

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/zitadel/oidc/v3/pkg/client"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// OAuthBucket holds what an OAuth connection needs between requests, on whichever
// edge they land: each authorization begun and not yet come back (its state's hash,
// the account and tool, the PKCE verifier enveloped as values are), and the lease of
// a grant being refreshed.
const OAuthBucket = "tg-oauth"

// The names a grant's values take in its record: no declared field can take them
// (field names start with a letter or _ and hold no colon).
const (
	grantAccess  = "oauth:access_token"
	grantRefresh = "oauth:refresh_token"
	grantType    = "oauth:token_type"
)

// MissingOAuth names, among a connection's missing values, the authorization at the
// tool's OAuth provider.
const MissingOAuth = wire.MissingOAuth

// Grant is what may be shown of an OAuth connection's grant; its tokens are values of
// the record, enveloped.
type Grant struct {
	GrantedAt   time.Time `json:"granted_at"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
	Expiry      time.Time `json:"expiry,omitzero"` // the access token's; zero: the provider did not say
	// Refused is why the provider refused the last refresh: the account must
	// authorize the tool again.
	Refused string `json:"refused,omitempty"`
}

// OAuthConfig is how an edge runs OAuth connections.
type OAuthConfig struct {
	// RedirectURL is the gateway's callback, the redirect URI the deployment
	// registered with each provider: the same on every edge.
	RedirectURL string
	// FlowLifetime bounds the time from beginning an authorization to its callback.
	FlowLifetime time.Duration
	// RefreshBefore: an access token is refreshed this long before it expires.
	RefreshBefore time.Duration
	// RefreshLease is how long the edge refreshing a grant holds it before another
	// may take over (a refresh that outlives it is cut short).
	RefreshLease time.Duration
	// HTTPClient talks to the providers.
	HTTPClient *http.Client
}

// DefaultOAuthConfig: flows of 10 minutes, tokens refreshed a minute early, leases of
// 20 seconds, providers given 10 seconds an answer.
func DefaultOAuthConfig(redirectURL string) OAuthConfig {
	return OAuthConfig{RedirectURL: redirectURL, FlowLifetime: 10 * time.Minute, RefreshBefore: time.Minute,
		RefreshLease: 20 * time.Second, HTTPClient: &http.Client{Timeout: 10 * time.Second}}
}

// oauth is a vault's OAuth side, when it has one (EnableOAuth).
type oauth struct {
	cfg   OAuthConfig
	kv    jetstream.KeyValue
	mu    sync.Mutex
	found map[string]oauth2.Endpoint // by issuer: what its metadata named
}

// EnableOAuth opens the OAuth bucket, so that the vault runs the OAuth connections of
// tools whose record declares a provider.
func (v *Vault) EnableOAuth(ctx context.Context, cfg OAuthConfig, update bool) error {
	if cfg.RedirectURL == "" || cfg.FlowLifetime <= 0 || cfg.RefreshBefore < 0 || cfg.RefreshLease <= 0 || cfg.HTTPClient == nil {
		return errors.New("credentials: oauth: a redirect URL, a flow lifetime, a lease and an HTTP client are required")
	}
	kv, err := v.store.OpenBucket(ctx, jetstream.KeyValueConfig{Bucket: OAuthBucket,
		Description: "toolgate OAuth authorizations under way and refresh leases", TTL: cfg.FlowLifetime + cfg.RefreshLease}, update)
	if err != nil {
		return err
	}
	v.oauth = &oauth{cfg: cfg, kv: kv, found: map[string]oauth2.Endpoint{}}
	return nil
}

// ErrNoOAuth: this edge runs no OAuth connections, or the tool declares no provider.
var ErrNoOAuth = fmt.Errorf("%w: the tool declares no OAuth provider, or this edge runs no OAuth connections", registry.ErrInvalid)

// endpoint is p's authorization and token endpoints: as the record names them, or as
// the issuer's metadata does (found once per process).
func (o *oauth) endpoint(ctx context.Context, p *wire.OAuthProvider) (oauth2.Endpoint, error) {
	if p.AuthorizationURL != "" && p.TokenURL != "" {
		return oauth2.Endpoint{AuthURL: p.AuthorizationURL, TokenURL: p.TokenURL}, nil
	}
	o.mu.Lock()
	ep, ok := o.found[p.Issuer]
	o.mu.Unlock()
	if ok {
		return ep, nil
	}
	meta, err := client.Discover(ctx, p.Issuer, o.cfg.HTTPClient)
	if err != nil {
		// RFC 8414's place, for a provider that is not an OpenID one.
		meta, err = client.Discover(ctx, p.Issuer, o.cfg.HTTPClient, oauthMetadataURL(p.Issuer))
	}
	if err != nil {
		return oauth2.Endpoint{}, fmt.Errorf("credentials: oauth: metadata of %s: %w", p.Issuer, err)
	}
	ep = oauth2.Endpoint{AuthURL: meta.AuthorizationEndpoint, TokenURL: meta.TokenEndpoint}
	o.mu.Lock()
	o.found[p.Issuer] = ep
	o.mu.Unlock()
	return ep, nil
}

// config is the oauth2 client of t's provider: the gateway's client there (clientOf).
func (v *Vault) config(ctx context.Context, t *wire.Tool) (*oauth2.Config, error) {
	if v.oauth == nil || t.Connection == nil || t.Connection.OAuth == nil {
		return nil, ErrNoOAuth
	}
	p := t.Connection.OAuth
	ep, err := v.oauth.endpoint(ctx, p)
	if err != nil {
		return nil, err
	}
	c, err := v.clientOf(ctx, t)
	if err != nil {
		return nil, err
	}
	ep.AuthStyle = c.authStyle(p.TokenAuthMethods)
	return &oauth2.Config{ClientID: c.id, ClientSecret: c.secret, Endpoint: ep,
		RedirectURL: v.oauth.cfg.RedirectURL, Scopes: p.Scopes}, nil
}

// resource is the resource indicator option of t's provider's requests, if any.
func resource(t *wire.Tool) []oauth2.AuthCodeOption {
	if r := t.Connection.OAuth.Resource; r != "" {
		return []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("resource", r)}
	}
	return nil
}

// withClient is ctx carrying the HTTP client oauth2 talks to providers with.
func (o *oauth) withClient(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, o.cfg.HTTPClient)
}

func oauthMetadataURL(issuer string) string {
	// RFC 8414 section 3: the well-known segment goes between host and path.
	for i := len("https://"); i < len(issuer); i++ {
		if issuer[i] == '/' {
			return issuer[:i] + "/.well-known/oauth-authorization-server" + issuer[i:]
		}
	}
	return issuer + "/.well-known/oauth-authorization-server"
}

// flow is an authorization begun and not yet come back, kept under its state's hash.
type flow struct {
	Account  string    `json:"account"`
	Tool     string    `json:"tool"`
	Verifier Envelope  `json:"verifier"` // the PKCE verifier, enveloped as values are
	Expires  time.Time `json:"expires"`
	// Browser is the hash of the value the beginning browser was given to hold (a
	// cookie): the callback must bring it, so that a flow begun by one person cannot
	// be finished in another's browser. Empty for a flow begun without a browser.
	Browser string `json:"browser,omitempty"`
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func flowKey(state string) string { return "flow." + hashOf(state) }

// BeginOAuth begins account's authorization of t at t's provider: authorization
// code with PKCE (S256), its state and verifier kept in the OAuth bucket so that the
// callback may land on any edge. It returns the provider's URL to send the account
// holder's browser to. A browser's flow is bound to browser, a value the browser
// holds (BrowserBinding), which FinishOAuth then requires.
func (v *Vault) BeginOAuth(ctx context.Context, account string, t *wire.Tool, browser string) (string, error) {
	cfg, err := v.config(ctx, t)
	if err != nil {
		return "", err
	}
	state, verifier := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	env, err := v.keys.seal(map[string]string{"verifier": verifier}, account, t.ID)
	if err != nil {
		return "", err
	}
	f := flow{Account: account, Tool: t.ID, Verifier: env, Expires: time.Now().Add(v.oauth.cfg.FlowLifetime)}
	if browser != "" {
		f.Browser = hashOf(browser)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("credentials: oauth: %w", err)
	}
	if _, err := v.oauth.kv.Create(ctx, flowKey(state), b); err != nil {
		return "", fmt.Errorf("credentials: oauth: keep the authorization: %w", err)
	}
	return cfg.AuthCodeURL(state, append(resource(t), oauth2.S256ChallengeOption(verifier))...), nil
}

// ErrFlowUnknown: a callback whose state names no authorization under way (never
// begun, used already, or expired).
var ErrFlowUnknown = fmt.Errorf("%w: the authorization is unknown, used already or expired: begin it again", registry.ErrInvalid)

// FinishOAuth ends the authorization state names with the provider's code: the flow
// is taken out of the bucket (it serves once), the code exchanged with its verifier,
// and the grant stored in the account's record. tool gives the tool's current
// record. iss is the issuer the authorization response named (RFC 9207), if it
// named one; browser is what the browser brought (see BeginOAuth). It returns the
// account and tool it connected.
func (v *Vault) FinishOAuth(ctx context.Context, state, code, iss, browser string, tool func(id string) *wire.Tool) (account, toolID string, err error) {
	if v.oauth == nil {
		return "", "", ErrNoOAuth
	}
	f, err := v.takeFlow(ctx, state)
	if err != nil {
		return "", "", err
	}
	if f.Browser != "" && subtle.ConstantTimeCompare([]byte(f.Browser), []byte(hashOf(browser))) != 1 {
		return "", "", ErrOtherBrowser
	}
	t := tool(f.Tool)
	if t == nil {
		return "", "", fmt.Errorf("%w: tool %s", registry.ErrToolNotFound, f.Tool)
	}
	if err := checkIss(t.Connection.OAuth, iss); err != nil {
		return "", "", err
	}
	values, err := v.keys.open(&f.Verifier, f.Account, f.Tool)
	if err != nil {
		return "", "", err
	}
	cfg, err := v.config(ctx, t)
	if err != nil {
		return "", "", err
	}
	tok, err := cfg.Exchange(v.oauth.withClient(ctx), code, append(resource(t), oauth2.VerifierOption(values["verifier"]))...)
	if err != nil {
		return "", "", fmt.Errorf("credentials: oauth: the provider refused the code: %w", err)
	}
	if err := v.storeGrant(ctx, f.Account, f.Tool, tok, true); err != nil {
		return "", "", err
	}
	return f.Account, f.Tool, nil
}

// ErrIssuer: a callback whose authorization response names another issuer than the
// provider's, or none from a provider that sends it (RFC 9207: a mix-up).
var ErrIssuer = fmt.Errorf("%w: the authorization response's issuer is not the tool's provider", registry.ErrInvalid)

// checkIss checks the issuer an authorization response named against p's.
func checkIss(p *wire.OAuthProvider, iss string) error {
	if p == nil || (iss == "" && !p.IssResponse) {
		return nil
	}
	if iss == "" || p.Issuer == "" || subtle.ConstantTimeCompare([]byte(iss), []byte(p.Issuer)) != 1 {
		return ErrIssuer
	}
	return nil
}

// ErrOtherBrowser: a callback in a browser other than the one that began the flow.
var ErrOtherBrowser = fmt.Errorf("%w: this authorization was begun in another browser: connect again from this one", registry.ErrInvalid)

// BrowserBinding is a fresh value for a browser to hold while its flow runs.
func BrowserBinding() string { return oauth2.GenerateVerifier() }

// takeFlow reads and removes the flow state names; ErrFlowUnknown when there is
// none, or it expired. A flow serves once: of two callbacks with one state, one
// removes it (compare-and-set) and the other is refused.
func (v *Vault) takeFlow(ctx context.Context, state string) (*flow, error) {
	if state == "" {
		return nil, ErrFlowUnknown
	}
	e, err := v.oauth.kv.Get(ctx, flowKey(state))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrFlowUnknown
	}
	if err != nil {
		return nil, fmt.Errorf("credentials: oauth: read the authorization: %w", err)
	}
	if err := v.oauth.kv.Purge(ctx, flowKey(state), jetstream.LastRevision(e.Revision())); err != nil {
		return nil, ErrFlowUnknown
	}
	var f flow
	if err := json.Unmarshal(e.Value(), &f); err != nil || time.Now().After(f.Expires) {
		return nil, ErrFlowUnknown
	}
	return &f, nil
}

// storeGrant puts tok into account's record of tool, compare-and-set, beside the
// values set there: with fresh, as a new grant (any refusal forgotten). A provider
// that rotates refresh tokens sends one with tok; one that does not leaves the
// record's.
func (v *Vault) storeGrant(ctx context.Context, account, tool string, tok *oauth2.Token, fresh bool) error {
	for {
		r, rev, err := v.Read(ctx, account, tool)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return err
		}
		values := map[string]string{}
		if r == nil {
			r = &Record{Account: account, Tool: tool, Fields: map[string]FieldState{}}
		} else if values, err = v.keys.open(&r.Envelope, account, tool); err != nil {
			return err
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		values[grantAccess], values[grantType] = tok.AccessToken, tok.Type()
		if tok.RefreshToken != "" {
			values[grantRefresh] = tok.RefreshToken
		}
		g := Grant{GrantedAt: now, Expiry: tok.Expiry.UTC()}
		if !fresh && r.Grant != nil {
			g.GrantedAt, g.RefreshedAt = r.Grant.GrantedAt, now
		}
		r.Grant, r.UpdatedAt = &g, now
		if err := v.write(ctx, r, values, rev); errors.Is(err, errConflict) {
			continue
		} else if err != nil {
			return err
		}
		return nil
	}
}

// SetClientSecret keeps the secret of the client the deployment registered at tool's
// provider, enveloped as values are (empty: none, a public client).
func (v *Vault) SetClientSecret(ctx context.Context, tool, secret string) error {
	if secret == "" {
		return v.Clear(ctx, clientAccount, tool)
	}
	for {
		r, rev, err := v.Read(ctx, clientAccount, tool)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return err
		}
		if r == nil {
			r = &Record{Account: clientAccount, Tool: tool}
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		r.Fields = map[string]FieldState{"client_secret": {SetAt: now, Fingerprint: v.keys.Fingerprint(clientAccount, tool, "client_secret", secret)}}
		r.UpdatedAt = now
		if err := v.write(ctx, r, map[string]string{"client_secret": secret}, rev); errors.Is(err, errConflict) {
			continue
		} else if err != nil {
			return err
		}
		return nil
	}
}

// ClientSecret is the secret SetClientSecret kept for tool's client ("" for none).
func (v *Vault) ClientSecret(ctx context.Context, tool string) (string, error) {
	r, _, err := v.Read(ctx, clientAccount, tool)
	if errors.Is(err, registry.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	values, err := v.keys.open(&r.Envelope, clientAccount, tool)
	if err != nil {
		return "", err
	}
	return values["client_secret"], nil
}

// clientAccount keeps the deployment's client secrets in the bucket, under a name no
// account can take (account ids start with a letter or digit).
const clientAccount = "_client"

// OAuth reports whether the vault runs OAuth connections (EnableOAuth).
func (v *Vault) OAuth() bool { return v.oauth != nil }
