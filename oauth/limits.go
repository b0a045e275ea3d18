package oauth

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/toolgate/toolgate/registry"
)

// Limits bound what a stranger can make the authorization server keep: anyone may
// register a client (RFC 7591) or begin an authorization request before signing in,
// and each leaves a record in the registry.
type Limits struct {
	// MaxClients bounds the dynamically registered clients the deployment holds at
	// once; pre-registered clients and clients with a metadata document are not
	// counted. Past it a registration is refused (403) until one expires.
	MaxClients int
	// RegistrationsPerMinute bounds the registrations one source address makes on
	// one edge in a minute; past it a registration is refused (429, Retry-After).
	RegistrationsPerMinute int
	// MaxPending bounds the authorization requests the deployment holds at once:
	// awaiting sign-in, consent or their code's exchange, each for RequestLifetime at
	// most. Past it a new request is answered temporarily_unavailable.
	MaxPending int
	// MaxPendingPerSource bounds the authorization requests in progress begun from
	// one source address (sourceOf), across the deployment, so that one stranger
	// cannot take all of MaxPending. Past it that source's new requests are answered
	// temporarily_unavailable; other sources' are not.
	MaxPendingPerSource int
}

// DefaultLimits are the limits of a deployment that sets none.
func DefaultLimits() Limits {
	return Limits{MaxClients: 10000, RegistrationsPerMinute: 10, MaxPending: 10000, MaxPendingPerSource: 100}
}

// orDefaults is l with each zero limit DefaultLimits' own.
func (l Limits) orDefaults() Limits {
	d := DefaultLimits()
	if l.MaxClients == 0 {
		l.MaxClients = d.MaxClients
	}
	if l.RegistrationsPerMinute == 0 {
		l.RegistrationsPerMinute = d.RegistrationsPerMinute
	}
	if l.MaxPending == 0 {
		l.MaxPending = d.MaxPending
	}
	if l.MaxPendingPerSource == 0 {
		l.MaxPendingPerSource = d.MaxPendingPerSource
	}
	return l
}

// Validate names the first limit that is wrong.
func (l Limits) Validate() error {
	switch {
	case l.MaxClients < 1:
		return fmt.Errorf("oauth-max-clients: must be at least 1")
	case l.RegistrationsPerMinute < 1:
		return fmt.Errorf("oauth-registrations-per-minute: must be at least 1")
	case l.MaxPending < 1:
		return fmt.Errorf("oauth-max-pending: must be at least 1")
	case l.MaxPendingPerSource < 1:
		return fmt.Errorf("oauth-max-pending-per-source: must be at least 1")
	}
	return nil
}

// count is how many keys matching filter (a key pattern such as "req.>") bucket
// holds: the subjects a consumer delivering the last message of each would deliver,
// which the stream's leader counts without sending one. A key removed with purge
// leaves a marker that counts, which is why the requests bucket's keys are removed
// whole (records.remove).
func (rs *records) count(ctx context.Context, kv jetstream.KeyValue, filter string) (int, error) {
	stream := "KV_" + kv.Bucket()
	cons, err := rs.js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
		FilterSubject: "$KV." + kv.Bucket() + "." + filter, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy: jetstream.AckNonePolicy, MemoryStorage: true, Replicas: 1, InactiveThreshold: time.Minute,
	})
	if err != nil {
		return 0, fmt.Errorf("oauth: count %s in %s: %w", filter, kv.Bucket(), err)
	}
	info := cons.CachedInfo()
	_ = rs.js.DeleteConsumer(context.WithoutCancel(ctx), stream, info.Name) // or it goes when inactive
	return int(info.NumPending), nil
}

// errTooMany is a limit reached: the OAuth error the client gets, and its status.
type errTooMany struct {
	status     int
	code, desc string
	retryAfter time.Duration
}

func (e *errTooMany) Error() string { return e.code + ": " + e.desc }

// write answers the client in the shape of RFC 7591's errors (RFC 6749 §5.2).
func (e *errTooMany) write(w http.ResponseWriter) {
	if e.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.retryAfter+time.Second-1)/time.Second)))
	}
	writeJSON(w, e.status, map[string]string{"error": e.code, "error_description": e.desc})
}

// admitRegistration checks a registration from source against the limits.
func (s *Server) admitRegistration(ctx context.Context, source string) error {
	if wait := s.registrations.take(source, s.limits.RegistrationsPerMinute, time.Now()); wait > 0 {
		return &errTooMany{status: http.StatusTooManyRequests, code: "temporarily_unavailable", retryAfter: wait,
			desc: fmt.Sprintf("at most %d client registrations a minute from one address: try again later", s.limits.RegistrationsPerMinute)}
	}
	n, err := s.records.count(ctx, s.records.grants, clientKey(">"))
	if err != nil {
		return err
	}
	if n >= s.limits.MaxClients {
		return &errTooMany{status: http.StatusForbidden, code: "access_denied",
			desc: fmt.Sprintf("the deployment holds its limit of %d registered clients: use a client ID metadata document or a client the operator registered", s.limits.MaxClients)}
	}
	return nil
}

// admitRequest checks a new authorization request from the source tagged tag
// (sourceTag) against MaxPendingPerSource, then MaxPending. The answer goes
// back to the client's redirect URI (RFC 6749 §4.1.2.1). Two requests counted at
// once may both be taken: a bound is exceeded by at most the requests in flight.
func (s *Server) admitRequest(ctx context.Context, tag string) error {
	n, err := s.records.count(ctx, s.records.requests, requestKeys(tag))
	if err != nil {
		return oidc.ErrServerError().WithParent(err)
	}
	if n >= s.limits.MaxPendingPerSource {
		return &oidc.Error{ErrorType: "temporarily_unavailable",
			Description: fmt.Sprintf("your address holds its limit of %d authorization requests in progress: finish or abandon one, or try again in a few minutes", s.limits.MaxPendingPerSource)}
	}
	if n, err = s.records.count(ctx, s.records.requests, "req.>"); err != nil {
		return oidc.ErrServerError().WithParent(err)
	}
	if n >= s.limits.MaxPending {
		return &oidc.Error{ErrorType: "temporarily_unavailable",
			Description: fmt.Sprintf("the server holds its limit of %d authorization requests in progress: try again in a few minutes", s.limits.MaxPending)}
	}
	return nil
}

// An authorization request's id begins with the tag of the source that made it,
// so that its key, req.<tag>.<random>, is counted with that source's: the tag is
// a hash of the address, a key's token whatever the address's form.
func sourceTag(source string) string { return registry.Hash(source)[:16] }

func newRequestID(tag string) string { return tag + "." + registry.NewID("ar") }

func requestKey(id string) string { return "req." + id }

// requestKeys is the filter of the requests of the source tagged tag.
func requestKeys(tag string) string { return "req." + tag + ".*" }

// sourceOf is the address a request came from, the TCP peer's: the edge trusts no
// proxy's headers (it sets no trusted proxies), so behind a proxy every request is
// the proxy's. Registrations and authorization requests are counted by it.
func sourceOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// window counts what each source did in its current minute, on this edge.
type window struct {
	mu    sync.Mutex
	start map[string]time.Time
	n     map[string]int
}

// take counts one from source unless it made limit in its current minute; it
// returns how long until that minute ends when it did.
func (w *window) take(source string, limit int, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.start == nil {
		w.start, w.n = map[string]time.Time{}, map[string]int{}
	}
	if len(w.start) > 1024 { // forget the minutes that ended
		for s, t := range w.start {
			if now.Sub(t) >= time.Minute {
				delete(w.start, s)
				delete(w.n, s)
			}
		}
	}
	if t, ok := w.start[source]; !ok || now.Sub(t) >= time.Minute {
		w.start[source], w.n[source] = now, 0
	}
	if w.n[source] >= limit {
		return w.start[source].Add(time.Minute).Sub(now)
	}
	w.n[source]++
	return 0
}
