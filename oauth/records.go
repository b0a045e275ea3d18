package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/toolgate/toolgate/registry"
)

// The authorization server's records live in two buckets: what lasts minutes (an
// authorization request and its code) and what lasts until it is revoked or left
// unused for RefreshLifetime (grants, their refresh tokens, registered clients: the
// bucket's TTL counts from a record's last write, and each use writes it again). A
// code and a refresh token are filed under their sha256 only.
const (
	RequestBucket = "tg-oauth-requests"
	GrantBucket   = "tg-oauth-grants"
)

// RequestLifetime bounds an authorization request, its sign-in and consent, and its
// code; RefreshLifetime is how long a grant or a registered client lives unused
// (each token issued for it renews it), unless ServerConfig.UnusedLifetime says
// otherwise.
const (
	RequestLifetime = 10 * time.Minute
	RefreshLifetime = 30 * 24 * time.Hour
)

// request is one authorization request, from /authorize to the code's exchange.
type request struct {
	ID           string                   `json:"id"`
	ClientID     string                   `json:"client_id"`
	RedirectURI  string                   `json:"redirect_uri"`
	State        string                   `json:"state,omitempty"`
	Nonce        string                   `json:"nonce,omitempty"`
	Scopes       []string                 `json:"scopes"`
	ResponseType oidc.ResponseType        `json:"response_type"`
	ResponseMode oidc.ResponseMode        `json:"response_mode,omitempty"`
	Challenge    string                   `json:"code_challenge"`
	Method       oidc.CodeChallengeMethod `json:"code_challenge_method"`
	Resource     string                   `json:"resource"`
	// Set by consent: whose grant it is, and which.
	Account  string    `json:"account,omitempty"`
	Grant    string    `json:"grant,omitempty"`
	Approved bool      `json:"approved,omitempty"`
	AuthTime time.Time `json:"auth_time"`
}

func (r *request) GetID() string         { return r.ID }
func (r *request) GetACR() string        { return "" }
func (r *request) GetAMR() []string      { return []string{"pwd"} }
func (r *request) GetAudience() []string { return []string{r.Resource} }
func (r *request) GetAuthTime() time.Time {
	return r.AuthTime
}
func (r *request) GetClientID() string { return r.ClientID }
func (r *request) GetCodeChallenge() *oidc.CodeChallenge {
	return &oidc.CodeChallenge{Challenge: r.Challenge, Method: r.Method}
}
func (r *request) GetNonce() string                   { return r.Nonce }
func (r *request) GetRedirectURI() string             { return r.RedirectURI }
func (r *request) GetResponseType() oidc.ResponseType { return r.ResponseType }
func (r *request) GetResponseMode() oidc.ResponseMode { return r.ResponseMode }
func (r *request) GetScopes() []string                { return r.Scopes }
func (r *request) GetState() string                   { return r.State }
func (r *request) GetSubject() string                 { return r.Account }
func (r *request) Done() bool                         { return r.Approved }

// Grant is what an account allowed a client: one resource (a link or a tool's
// endpoint), with scopes. Its refresh token is kept as a hash; each refresh replaces
// it (rotation), so a refresh token works once.
type Grant struct {
	ID          string    `json:"id"`
	Account     string    `json:"account"`
	User        string    `json:"user,omitempty"` // the user of the account who signed in; empty for its API key
	Client      string    `json:"client_id"`
	ClientName  string    `json:"client_name,omitempty"`
	Resource    string    `json:"resource"`
	Tool        string    `json:"tool"`
	Scopes      []string  `json:"scopes"`
	CreatedAt   time.Time `json:"created_at"`
	RefreshHash string    `json:"refresh_hash,omitempty"`
	RefreshedAt time.Time `json:"refreshed_at,omitzero"`
}

func grantKey(account, id string) string { return "grant." + account + "." + id }

// GetAMR and the rest make a grant the request a refresh is made for.
func (g *Grant) GetAMR() []string            { return []string{"pwd"} }
func (g *Grant) GetAudience() []string       { return []string{g.Resource} }
func (g *Grant) GetAuthTime() time.Time      { return g.CreatedAt }
func (g *Grant) GetClientID() string         { return g.Client }
func (g *Grant) GetScopes() []string         { return append(slices.Clone(g.Scopes), oidc.ScopeOfflineAccess) }
func (g *Grant) GetSubject() string          { return g.Account }
func (g *Grant) SetCurrentScopes(s []string) { g.Scopes = toolScopesOf(s) }

// toolScopesOf keeps the scopes that name a tool, the ones a token carries.
func toolScopesOf(scopes []string) []string {
	return slices.DeleteFunc(slices.Clone(scopes), func(s string) bool {
		return !strings.HasSuffix(s, ":list") && !strings.HasSuffix(s, ":call")
	})
}

// records are the buckets.
type records struct {
	requests, grants, clients jetstream.KeyValue
	js                        jetstream.JetStream
	requestStream             jetstream.Stream // requests' keys are removed from it whole
}

func openRecords(ctx context.Context, store *registry.Store, unused time.Duration) (*records, error) {
	req, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket: RequestBucket, Description: "toolgate OAuth authorization requests and codes", TTL: RequestLifetime, History: 1,
	}, false)
	if err != nil {
		return nil, fmt.Errorf("oauth: request bucket: %w", err)
	}
	gr, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket: GrantBucket, Description: "toolgate OAuth grants, refresh tokens (hashed) and registered clients", TTL: unused, History: 1,
	}, false)
	if err != nil {
		return nil, fmt.Errorf("oauth: grant bucket: %w", err)
	}
	cl, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket: ClientBucket, Description: "toolgate OAuth clients the operator registered", History: 1,
	}, false)
	if err != nil {
		return nil, fmt.Errorf("oauth: client bucket: %w", err)
	}
	rs := &records{requests: req, grants: gr, clients: cl, js: store.JetStream()}
	if rs.requestStream, err = rs.js.Stream(ctx, "KV_"+RequestBucket); err != nil {
		return nil, fmt.Errorf("oauth: request bucket: %w", err)
	}
	return rs, nil
}

// errNotFound: no such record (or it expired).
var errNotFound = errors.New("oauth: not found")

// pattern reports whether a key holds a subject wildcard: ids come from requests
// (a consent page's query, a callback's, a path), and a read of the last message of
// "req.>" would answer some other request, a purge of it remove them all.
func pattern(key string) bool { return strings.ContainsAny(key, "*> ") }

// read decodes the record key of bucket from the stream's leader: it may have been
// written a moment ago through another edge.
func (rs *records) read(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	if pattern(key) {
		return errNotFound
	}
	b, _, err := registry.ReadLatest(ctx, rs.js, kv.Bucket(), key)
	if errors.Is(err, registry.ErrNotFound) {
		return errNotFound
	}
	if err != nil {
		return fmt.Errorf("oauth: read %s: %w", key, err)
	}
	return json.Unmarshal(b, v)
}

func (rs *records) write(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("oauth: write %s: %w", key, err)
	}
	return nil
}

// create writes key unless it exists (jetstream.ErrKeyExists).
func (rs *records) create(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, key, b); err != nil {
		return fmt.Errorf("oauth: create %s: %w", key, err)
	}
	return nil
}

// remove forgets key. A request's key leaves no purge marker, so that the requests
// counted against Limits.MaxPending are the ones in progress.
func (rs *records) remove(ctx context.Context, kv jetstream.KeyValue, key string) error {
	if pattern(key) {
		return errNotFound
	}
	if kv == rs.requests {
		if err := rs.requestStream.Purge(ctx, jetstream.WithPurgeSubject("$KV."+RequestBucket+"."+key)); err != nil {
			return fmt.Errorf("oauth: remove %s: %w", key, err)
		}
		return nil
	}
	if err := kv.Purge(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("oauth: remove %s: %w", key, err)
	}
	return nil
}
