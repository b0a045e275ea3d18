package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// due reports whether r's access token is to be refreshed now.
func (o *oauth) due(r *Record) bool {
	if o == nil || r == nil || r.Grant == nil || r.Grant.Refused != "" || r.Grant.Expiry.IsZero() {
		return false
	}
	return time.Until(r.Grant.Expiry) <= o.cfg.RefreshBefore
}

// lease is who refreshes a grant, until when.
type lease struct {
	Until time.Time `json:"until"`
}

func leaseKey(account, tool string) string { return "lease." + recordKey(account, tool) }

// refresh refreshes account's grant for t once across every edge: the edge that
// takes the grant's lease in the OAuth bucket (create, or compare-and-set over one
// that ran out) refreshes it and stores the result, then lets the lease go; the others
// wait for the lease to go and read what it stored. So a provider that rotates refresh
// tokens sees each one used once. It returns when the grant is no longer due, or the
// provider refused it (Grant.Refused).
func (v *Vault) refresh(ctx context.Context, account string, t *wire.Tool) error {
	key := leaseKey(account, t.ID)
	for {
		r, _, err := v.Read(ctx, account, t.ID)
		if err != nil && !errors.Is(err, registry.ErrNotFound) {
			return err
		}
		if !v.oauth.due(r) {
			return nil
		}
		held, until, err := v.takeLease(ctx, key)
		if err != nil {
			return err
		}
		if !held {
			v.awaitLease(ctx, key, until)
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("credentials: oauth: waiting for the refresh of %s/%s: %w", account, t.ID, err)
			}
			continue
		}
		err = v.refreshHeld(ctx, account, t)
		// Let go whatever the call's context became: the next caller need not wait
		// for the lease to run out.
		if derr := v.oauth.kv.Delete(context.WithoutCancel(ctx), key); derr != nil {
			v.log().Warn("credentials: oauth: let a refresh lease go", "account", account, "tool", t.ID, "err", derr)
		}
		return err
	}
}

// takeLease takes the lease key if none holds it, or the one holding it ran out;
// otherwise it says until when the holder has it.
func (v *Vault) takeLease(ctx context.Context, key string) (held bool, until time.Time, err error) {
	mine, _ := json.Marshal(lease{Until: time.Now().Add(v.oauth.cfg.RefreshLease)})
	if _, err := v.oauth.kv.Create(ctx, key, mine); err == nil {
		return true, time.Time{}, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return false, time.Time{}, fmt.Errorf("credentials: oauth: take the refresh lease: %w", err)
	}
	e, err := v.oauth.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, time.Time{}, nil // let go meanwhile: try again
	}
	if err != nil {
		return false, time.Time{}, fmt.Errorf("credentials: oauth: read the refresh lease: %w", err)
	}
	var l lease
	if json.Unmarshal(e.Value(), &l) == nil && time.Now().Before(l.Until) {
		return false, l.Until, nil
	}
	if _, err := v.oauth.kv.Update(ctx, key, mine, e.Revision()); err != nil {
		return false, time.Time{}, nil // another took it over first
	}
	return true, time.Time{}, nil
}

// awaitLease waits until the lease key is let go, or until, or ctx ends.
func (v *Vault) awaitLease(ctx context.Context, key string, until time.Time) {
	if until.IsZero() {
		return
	}
	w, err := v.oauth.kv.Watch(ctx, key)
	if err != nil {
		return
	}
	defer func() { _ = w.Stop() }()
	timer := time.NewTimer(time.Until(until))
	defer timer.Stop()
	for {
		select {
		case e := <-w.Updates():
			if e == nil { // the watch's current state is told: a lease gone already tells nothing
				if _, err := v.oauth.kv.Get(ctx, key); err != nil {
					return
				}
				continue
			}
			if e.Operation() != jetstream.KeyValuePut {
				return
			}
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// refreshHeld refreshes account's grant for t under the lease: unless another edge
// did meanwhile, the refresh token is sent to the provider and what it answers
// stored; a refusal (the provider's 4xx) marks the grant refused, so the connection
// needs authorizing again.
func (v *Vault) refreshHeld(ctx context.Context, account string, t *wire.Tool) error {
	r, rev, err := v.Read(ctx, account, t.ID)
	if errors.Is(err, registry.ErrNotFound) || (err == nil && !v.oauth.due(r)) {
		return nil
	}
	if err != nil {
		return err
	}
	values, err := v.keys.open(&r.Envelope, account, t.ID)
	if err != nil {
		return err
	}
	refreshToken := values[grantRefresh]
	clear(values)
	if refreshToken == "" {
		return v.refuse(ctx, r, rev, "no refresh token: the provider granted none", nil)
	}
	cfg, err := v.config(ctx, t)
	if err != nil {
		return err
	}
	rctx := v.oauth.withClient(ctx)
	if r := t.Connection.OAuth.Resource; r != "" {
		rctx = context.WithValue(ctx, oauth2.HTTPClient, v.oauth.withResource(cfg.Endpoint.TokenURL, r))
	}
	rctx, cancel := context.WithTimeout(rctx, v.oauth.cfg.RefreshLease)
	defer cancel()
	tok, err := cfg.TokenSource(rctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	var refused *oauth2.RetrieveError
	if errors.As(err, &refused) && refused.Response != nil && refused.Response.StatusCode >= 400 && refused.Response.StatusCode < 500 &&
		refused.Response.StatusCode != http.StatusTooManyRequests {
		why := refused.ErrorCode
		if why == "" {
			why = refused.Response.Status
		}
		return v.refuse(ctx, r, rev, why, nil)
	}
	if err != nil {
		return fmt.Errorf("credentials: oauth: refresh %s/%s: %w", account, t.ID, err)
	}
	return v.storeGrant(ctx, account, t.ID, tok, false)
}

// refuse marks r's grant refused (why), compare-and-set, its tokens dropped; after
// another writer's write, only if still holds of the record read again (nil: always).
func (v *Vault) refuse(ctx context.Context, r *Record, rev uint64, why string, still func(*Record) bool) error {
	for {
		values, err := v.keys.open(&r.Envelope, r.Account, r.Tool)
		if err != nil {
			return err
		}
		delete(values, grantAccess)
		delete(values, grantRefresh)
		delete(values, grantType)
		g := *r.Grant
		g.Refused = why
		r.Grant, r.UpdatedAt = &g, time.Now().UTC().Truncate(time.Millisecond)
		if err := v.write(ctx, r, values, rev); !errors.Is(err, errConflict) {
			return err
		}
		if r, rev, err = v.Read(ctx, r.Account, r.Tool); err != nil || r.Grant == nil || (still != nil && !still(r)) {
			return err
		}
	}
}

// RefuseGrant marks account's grant for t refused (why), as a refused refresh does,
// when the server behind t refused the access token of a call sealed at sealedAt:
// unless the grant was authorized again or refreshed since (its token is another),
// the account must authorize t again. A connection without a grant is left alone.
func (v *Vault) RefuseGrant(ctx context.Context, account string, t *wire.Tool, sealedAt time.Time, why string) error {
	sameGrant := func(r *Record) bool {
		g := r.Grant
		return g != nil && g.Refused == "" && !g.GrantedAt.After(sealedAt) && !g.RefreshedAt.After(sealedAt)
	}
	r, rev, err := v.Read(ctx, account, t.ID)
	if errors.Is(err, registry.ErrNotFound) || (err == nil && !sameGrant(r)) {
		return nil
	}
	if err != nil {
		return err
	}
	return v.refuse(ctx, r, rev, why, sameGrant)
}

func (v *Vault) log() *slog.Logger { return slog.Default() }

// withResource is the providers' HTTP client adding the resource indicator to the
// token requests it sends to tokenURL: oauth2's refresh takes no parameter of the
// caller's, and RFC 8707 asks for it on every token request.
func (o *oauth) withResource(tokenURL, resource string) *http.Client {
	c := *o.cfg.HTTPClient
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = resourceForm{next: next, tokenURL: tokenURL, resource: resource}
	return &c
}

type resourceForm struct {
	next               http.RoundTripper
	tokenURL, resource string
}

func (f resourceForm) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.String() != f.tokenURL || req.Body == nil {
		return f.next.RoundTrip(req)
	}
	b, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(b))
	if err != nil {
		return nil, fmt.Errorf("credentials: oauth: token request: %w", err)
	}
	if form.Get("resource") == "" {
		form.Set("resource", f.resource)
	}
	body := form.Encode()
	out := req.Clone(req.Context())
	out.Body, out.ContentLength = io.NopCloser(strings.NewReader(body)), int64(len(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	return f.next.RoundTrip(out)
}
