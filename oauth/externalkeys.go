package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"
)

// errFetchedMomentsAgo: a token names a key the provider's set did not hold at the
// last fetch, and the next fetch is not due yet.
var errFetchedMomentsAgo = errors.New("oauth: the provider's key set was fetched moments ago; not again yet")

// limitedKeySet is a provider's key set: zitadel/oidc's remote key set, which
// fetches the JWKS again whenever a token names a key it does not hold, with two
// bounds. Fetches are at least minRefetch apart (fetchLimit), so tokens naming made-up
// keys cannot make the edge hammer the provider; and the set is made anew after
// maxAge, so a key the provider removed is not trusted for ever (its first fetch is
// not held to minRefetch, so no one can make it fail).
type limitedKeySet struct {
	client  *http.Client
	jwksURL string
	maxAge  time.Duration
	limit   *fetchLimit

	mu    sync.Mutex
	inner oidc.KeySet
	made  time.Time
}

func newLimitedKeySet(client *http.Client, jwksURL string, minRefetch, maxAge time.Duration) *limitedKeySet {
	next := client.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	limit := &fetchLimit{next: next, min: minRefetch}
	limited := *client
	limited.Transport = limit
	return &limitedKeySet{client: &limited, jwksURL: jwksURL, maxAge: maxAge, limit: limit}
}

// VerifySignature implements oidc.KeySet.
func (k *limitedKeySet) VerifySignature(ctx context.Context, jws *jose.JSONWebSignature) ([]byte, error) {
	k.mu.Lock()
	if now := time.Now(); k.inner == nil || now.Sub(k.made) >= k.maxAge {
		k.inner, k.made = rp.NewRemoteKeySet(k.client, k.jwksURL), now
		k.limit.due()
	}
	set := k.inner
	k.mu.Unlock()
	return set.VerifySignature(ctx, jws)
}

// fetchLimit lets a request through at most once per min, unless one is due.
type fetchLimit struct {
	next http.RoundTripper
	min  time.Duration

	mu      sync.Mutex
	last    time.Time
	dueNext bool
}

func (f *fetchLimit) due() {
	f.mu.Lock()
	f.dueNext = true
	f.mu.Unlock()
}

func (f *fetchLimit) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	now := time.Now()
	if !f.dueNext && !f.last.IsZero() && now.Sub(f.last) < f.min {
		f.mu.Unlock()
		return nil, errFetchedMomentsAgo
	}
	f.dueNext, f.last = false, now
	f.mu.Unlock()
	return f.next.RoundTrip(r)
}
