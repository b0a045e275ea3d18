package oauth

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/toolgate/toolgate/registry"
)

// client is an OAuth client as the provider sees it: one that names itself by the
// URL of its metadata document (a client ID metadata document), one that registered
// (RFC 7591) and is kept in the grants' bucket, or one the operator registered, kept
// in the clients' bucket (preregistered.go).
type client struct {
	ID           string          `json:"client_id"`
	Name         string          `json:"client_name,omitempty"`
	Redirects    []string        `json:"redirect_uris"`
	Method       oidc.AuthMethod `json:"token_endpoint_auth_method"`
	SecretHash   string          `json:"secret_hash,omitempty"`
	RegisteredAt time.Time       `json:"registered_at,omitzero"`
	UsedAt       time.Time       `json:"used_at,omitzero"` // a registered one's last token
	loginURL     func(string) string
}

func (c *client) GetID() string                    { return c.ID }
func (c *client) RedirectURIs() []string           { return c.Redirects }
func (c *client) PostLogoutRedirectURIs() []string { return nil }
func (c *client) ApplicationType() op.ApplicationType {
	// Native: loopback redirects on any port, as desktop clients make them; web
	// clients' https redirects pass as native ones do.
	return op.ApplicationTypeNative
}
func (c *client) AuthMethod() oidc.AuthMethod { return c.Method }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType {
	return []oidc.GrantType{oidc.GrantTypeCode, oidc.GrantTypeRefreshToken}
}
func (c *client) LoginURL(id string) string           { return c.loginURL(id) }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *client) IDTokenLifetime() time.Duration      { return time.Hour }
func (c *client) DevMode() bool                       { return false }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool     { return len(toolScopesOf([]string{scope})) == 1 }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return false }
func (c *client) ClockSkew() time.Duration             { return 0 }

// documentClient reports whether a client id is the URL of a client ID metadata
// document: https, or, where the server allows it (tests, a client on the same
// machine as a development stack), http on a loopback address. Anything else is not
// fetched: the server would otherwise GET whatever a stranger names on its own host.
func documentClient(id string, loopback bool) bool {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || u.Path == "" || u.Fragment != "" || u.User != nil {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return loopback && u.Scheme == "http" && ip != nil && ip.IsLoopback()
}

// maxDocument bounds a client's metadata document.
const maxDocument = 64 << 10

// fetchDocument reads the client ID metadata document at id, which must name itself.
func fetchDocument(ctx context.Context, hc *http.Client, id string) (*client, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: client metadata document %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("oauth: client metadata document %s: status %d", id, resp.StatusCode)
	}
	var doc struct {
		ClientID   string          `json:"client_id"`
		ClientName string          `json:"client_name"`
		Redirects  []string        `json:"redirect_uris"`
		Method     oidc.AuthMethod `json:"token_endpoint_auth_method"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxDocument)).Decode(&doc); err != nil {
		return nil, fmt.Errorf("oauth: client metadata document %s: %w", id, err)
	}
	if doc.ClientID != id || len(doc.Redirects) == 0 {
		return nil, fmt.Errorf("oauth: client metadata document %s names %q, or no redirect_uris", id, doc.ClientID)
	}
	if doc.Method != "" && doc.Method != oidc.AuthMethodNone {
		return nil, fmt.Errorf("oauth: client metadata document %s: only public clients (token_endpoint_auth_method none) are taken", id)
	}
	return &client{ID: id, Name: doc.ClientName, Redirects: doc.Redirects, Method: oidc.AuthMethodNone}, nil
}

func clientKey(id string) string { return "client." + id }

// Registration is a dynamic client registration request and answer (RFC 7591).
type Registration struct {
	ClientID        string          `json:"client_id,omitempty"`
	ClientSecret    string          `json:"client_secret,omitempty"`
	ClientIDIssued  int64           `json:"client_id_issued_at,omitempty"`
	SecretExpiresAt *int64          `json:"client_secret_expires_at,omitempty"`
	ClientName      string          `json:"client_name,omitempty"`
	RedirectURIs    []string        `json:"redirect_uris"`
	Method          oidc.AuthMethod `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes      []string        `json:"grant_types,omitempty"`
	ResponseTypes   []string        `json:"response_types,omitempty"`
	Scope           string          `json:"scope,omitempty"`
}

// errBadRegistration is a registration request the server refuses
// (invalid_client_metadata or invalid_redirect_uri).
type errBadRegistration struct{ code, desc string }

func (e *errBadRegistration) Error() string { return e.code + ": " + e.desc }

// register stores a new client from reg, registered from source, and answers with
// its id (and secret, for a confidential one: only its hash is kept). A request the
// limits refuse, or a bad one, changes nothing.
func (s *Server) register(ctx context.Context, reg Registration, source string) (Registration, error) {
	if len(reg.RedirectURIs) == 0 || len(reg.RedirectURIs) > 10 {
		return reg, &errBadRegistration{"invalid_redirect_uri", "give between 1 and 10 redirect_uris"}
	}
	for _, r := range reg.RedirectURIs {
		if u, err := url.Parse(r); err != nil || u.Scheme == "" || u.Fragment != "" {
			return reg, &errBadRegistration{"invalid_redirect_uri", "not an absolute URI without a fragment: " + r}
		}
	}
	if len(reg.ClientName) > 200 {
		return reg, &errBadRegistration{"invalid_client_metadata", "client_name is over 200 characters"}
	}
	if reg.Method == "" {
		reg.Method = oidc.AuthMethodBasic
	}
	if !slices.Contains([]oidc.AuthMethod{oidc.AuthMethodNone, oidc.AuthMethodBasic, oidc.AuthMethodPost}, reg.Method) {
		return reg, &errBadRegistration{"invalid_client_metadata", "token_endpoint_auth_method must be none, client_secret_basic or client_secret_post"}
	}
	if err := s.admitRegistration(ctx, source); err != nil {
		return Registration{}, err
	}
	c := &client{ID: registry.NewID(registeredPrefix), Name: reg.ClientName, Redirects: reg.RedirectURIs, Method: reg.Method, RegisteredAt: time.Now().UTC()}
	reg.ClientID, reg.ClientIDIssued = c.ID, c.RegisteredAt.Unix()
	reg.GrantTypes, reg.ResponseTypes = []string{"authorization_code", "refresh_token"}, []string{"code"}
	if reg.Method != oidc.AuthMethodNone {
		reg.ClientSecret = registry.NewID("tgs_")
		c.SecretHash = registry.Hash(reg.ClientSecret)
		never := int64(0)
		reg.SecretExpiresAt = &never
	}
	if err := s.records.write(ctx, s.records.grants, clientKey(c.ID), c); err != nil {
		return Registration{}, err
	}
	return reg, nil
}

// renewClient writes a dynamically registered client's record again, with the time
// of its use, so that GrantBucket's TTL counts from now: a client lives while tokens
// are issued for it, and expires only after ServerConfig.UnusedLifetime unused.
// Other clients (a metadata document's, a pre-registered one's) have no record there.
func (s *Server) renewClient(ctx context.Context, id string) error {
	if !strings.HasPrefix(id, registeredPrefix) {
		return nil
	}
	c := &client{}
	if err := s.records.read(ctx, s.records.grants, clientKey(id), c); err != nil {
		return fmt.Errorf("oauth: renew client %s: %w", id, err)
	}
	c.UsedAt = time.Now().UTC()
	return s.records.write(ctx, s.records.grants, clientKey(id), c)
}

// registeredPrefix begins the id of each dynamically registered client.
const registeredPrefix = "tgc_"

// client finds the client id names: its metadata document, or its registration.
func (s *Server) client(ctx context.Context, id string) (*client, error) {
	var c *client
	if documentClient(id, s.loopbackDocuments) {
		var err error
		if c, err = fetchDocument(ctx, s.http, id); err != nil {
			return nil, err
		}
	} else {
		c = &client{}
		err := s.records.read(ctx, s.records.clients, clientKey(id), c) // pre-registered
		if errors.Is(err, errNotFound) {
			err = s.records.read(ctx, s.records.grants, clientKey(id), c) // registered dynamically
		}
		if err != nil {
			return nil, fmt.Errorf("oauth: unknown client %q: %w", id, err)
		}
	}
	c.loginURL = s.loginURL
	return c, nil
}

// authorizeSecret checks a confidential client's secret in constant time.
func (s *Server) authorizeSecret(ctx context.Context, id, secret string) error {
	c, err := s.client(ctx, id)
	if err != nil {
		return err
	}
	if c.SecretHash == "" || subtle.ConstantTimeCompare([]byte(registry.Hash(secret)), []byte(c.SecretHash)) != 1 {
		return errors.New("oauth: wrong client secret")
	}
	return nil
}
