package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/toolgate/toolgate/registry"
)

// ClientBucket keeps the clients an operator registered through the admin API. They
// last until deleted, unlike the dynamically registered ones in GrantBucket, which
// anyone may make and which expire.
const ClientBucket = "tg-oauth-clients"

// Client is a pre-registered client as the admin API shows it: never its secret,
// whose hash alone is kept.
type Client struct {
	ID           string    `json:"client_id"`
	Name         string    `json:"client_name,omitempty"`
	RedirectURIs []string  `json:"redirect_uris"`
	Confidential bool      `json:"confidential"`
	CreatedAt    time.Time `json:"created_at,omitzero"`
}

// NewClient is the answer of a client's registration by the operator: the client
// and, this once, its secret (a confidential one's).
type NewClient struct {
	Client
	Secret string `json:"client_secret,omitempty"`
}

// Violation is one thing wrong with a client the operator registers: where (a JSON
// pointer into the request) and what.
type Violation struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// InvalidClientError lists what is wrong with a client the operator registers.
type InvalidClientError struct{ Violations []Violation }

func (e *InvalidClientError) Error() string {
	msgs := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		msgs[i] = v.Pointer + ": " + v.Message
	}
	return "oauth: invalid client: " + strings.Join(msgs, "; ")
}

// Errors of the pre-registered clients.
var (
	ErrClientExists   = errors.New("oauth: a client with this id is registered already")
	ErrClientNotFound = errors.New("oauth: no such pre-registered client")
)

// clientIDPattern is what an operator may name a client: not a URL (those name
// metadata documents) and not the prefix of a dynamically registered one.
var clientIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// checkClient lists what is wrong with c.
func checkClient(c Client) []Violation {
	var vs []Violation
	switch {
	case !clientIDPattern.MatchString(c.ID):
		vs = append(vs, Violation{"/client_id", "must be letters, digits, '.', '_' and '-', starting with a letter or digit, at most 100"})
	case strings.HasPrefix(c.ID, registeredPrefix):
		vs = append(vs, Violation{"/client_id", "must not begin with tgc_, the prefix of dynamically registered clients"})
	}
	if len(c.Name) > 200 {
		vs = append(vs, Violation{"/client_name", "at most 200 characters"})
	}
	if len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > 10 {
		vs = append(vs, Violation{"/redirect_uris", "give between 1 and 10"})
	}
	for i, r := range c.RedirectURIs {
		if u, err := url.Parse(r); err != nil || u.Scheme == "" || u.Fragment != "" || (u.Scheme == "http" || u.Scheme == "https") && u.Host == "" {
			vs = append(vs, Violation{fmt.Sprintf("/redirect_uris/%d", i), "must be an absolute URI without a fragment"})
		}
	}
	return vs
}

// AddClient registers a client the operator names. A confidential one gets a
// secret, returned this once; only its hash is kept.
func (s *Server) AddClient(ctx context.Context, c Client) (NewClient, error) {
	if vs := checkClient(c); len(vs) > 0 {
		return NewClient{}, &InvalidClientError{vs}
	}
	c.CreatedAt = time.Now().UTC()
	stored := &client{ID: c.ID, Name: c.Name, Redirects: c.RedirectURIs, Method: oidc.AuthMethodNone, RegisteredAt: c.CreatedAt}
	out := NewClient{Client: c}
	if c.Confidential {
		out.Secret = registry.NewID("tgs_") + registry.NewID("")
		stored.Method, stored.SecretHash = oidc.AuthMethodBasic, registry.Hash(out.Secret)
	}
	if err := s.records.create(ctx, s.records.clients, clientKey(c.ID), stored); err != nil {
		if errors.Is(err, jetstream.ErrKeyExists) {
			return NewClient{}, ErrClientExists
		}
		return NewClient{}, err
	}
	return out, nil
}

// Clients lists the pre-registered clients, by id.
func (s *Server) Clients(ctx context.Context) ([]Client, error) {
	lister, err := s.records.clients.ListKeysFiltered(ctx, clientKey(">"))
	if err != nil {
		return nil, fmt.Errorf("oauth: list clients: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	out := []Client{}
	for key := range lister.Keys() {
		var c client
		if err := s.records.read(ctx, s.records.clients, key, &c); err == nil {
			out = append(out, c.shown())
		}
	}
	slices.SortFunc(out, func(a, b Client) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// RemoveClient deletes a pre-registered client: it can begin no authorization and
// refresh no token from then on. The grants it was given stay listed, for the
// accounts to revoke.
func (s *Server) RemoveClient(ctx context.Context, id string) error {
	var c client
	if !clientIDPattern.MatchString(id) {
		return ErrClientNotFound
	}
	if err := s.records.read(ctx, s.records.clients, clientKey(id), &c); err != nil {
		if errors.Is(err, errNotFound) {
			return ErrClientNotFound
		}
		return err
	}
	return s.records.remove(ctx, s.records.clients, clientKey(id))
}

// shown is what the admin API shows of a stored client.
func (c *client) shown() Client {
	return Client{ID: c.ID, Name: c.Name, RedirectURIs: c.Redirects, Confidential: c.SecretHash != "", CreatedAt: c.RegisteredAt}
}
