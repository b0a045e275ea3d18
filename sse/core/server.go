package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Server is what every MCP transport of an edge hands its requests to, once the edge
// has authenticated them and found the principal and the tool the link reaches. One
// Server per edge; the state it shares with other edges (sessions, stream events)
// lives in NATS.
type Server struct {
	cfg    Config
	gw     *gateway.Gateway
	store  *registry.Store
	view   *registry.View
	nc     *nats.Conn
	subj   wire.Subjects
	log    *slog.Logger
	events *registry.EventLog
	index  *registry.SessionIndex

	ctx    context.Context // ends at Close: every stream and call of this edge
	cancel context.CancelFunc

	closing  atomic.Bool
	draining chan struct{} // closed when Drain starts
	drainOne sync.Once
	bg       sync.WaitGroup // the server's own goroutines: watchers
	pending  activity       // work that outlives its request: legacy answers, streams on taken connections
	inflight activity       // tool calls running on this edge

	calls     *callSet
	cancels   *nats.Subscription // every call's cancel, from any edge
	lists     *nats.Subscription // every tool's list changes its workers tell
	listeners *listenerSet
	streams   *streamSet
	changes   *toolChanges
	sweep     *sweeper
	stopView  func()

	touchMu   sync.Mutex
	lastTouch map[string]time.Time
}

// New starts serving MCP on this edge: it creates (or joins) the event log, follows
// the sessions of every edge and the registry's tool changes, and is ready when it
// returns.
func New(ctx context.Context, gw *gateway.Gateway, store *registry.Store, cfg Config, log *slog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	if err := cfg.takeSessionTTL(store.Options().SessionTTL); err != nil {
		return nil, err
	}
	subj := gw.Config().Subjects
	events, err := registry.OpenEventLog(ctx, store.JetStream(), gw.Conn(), subj, store.Options().Replicas, cfg.EventRetention, store.Options().Update)
	if err != nil {
		return nil, err
	}
	if p := gw.Payloads(); p != nil {
		events.KeepLarge(p) // a large result on a stream is kept as a reference
	}
	sctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, gw: gw, store: store, view: gw.View(), nc: gw.Conn(), subj: subj,
		log: log.With("component", "sse"), events: events,
		ctx: sctx, cancel: cancel, draining: make(chan struct{}),
		calls: newCallSet(), listeners: newListenerSet(), streams: newStreamSet(),
		lastTouch: map[string]time.Time{},
	}
	s.index, err = store.FollowSessions(ctx, sctx, s.log, s.sessionEnded, &s.bg)
	if err != nil {
		cancel()
		return nil, err
	}
	// A client's notifications/cancelled may reach another edge, which publishes
	// the call's cancel. One subscription for every cancel, made now, spares each
	// call a subscription of its own, and is in place across the cluster long before
	// any cancel of a call.
	s.cancels, err = s.nc.Subscribe(subj.CancelAll(), func(m *nats.Msg) {
		if _, callID, ok := subj.ParseCancel(m.Subject); ok {
			s.calls.cancel(callID)
		}
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sse: follow cancels: %w", err)
	}
	// A tool's workers say its prompts or resources (or tools) changed outside any
	// session: this edge's subscriptions/listen streams on the tool hear it.
	s.lists, err = s.nc.Subscribe(subj.ListChangedAll(), func(m *nats.Msg) {
		if tool, list, ok := subj.ParseListChanged(m.Subject, m.Data); ok {
			s.listeners.notify(tool, list)
		}
	})
	if err != nil {
		_ = s.cancels.Unsubscribe()
		cancel()
		return nil, fmt.Errorf("sse: follow list changes: %w", err)
	}
	if cfg.Tasks != nil {
		s.adoptKeptTasks()
	}
	s.changes = newToolChanges(s.view.Snapshot())
	s.sweep = newSweeper()
	s.stopView = s.view.OnChange(func(c registry.Change) {
		s.changes.note(c, s.view.Snapshot())
		s.sweep.note(c)
	})
	s.bg.Add(2)
	go func() {
		defer s.bg.Done()
		s.announceToolChanges()
	}()
	go func() {
		defer s.bg.Done()
		s.endRevokedSessions()
	}()
	return s, nil
}

// takeSessionTTL sets the sessions' TTL to the registry's, ttl, which keeps their
// records: a configured one must be the same, and the idle bound within it.
func (cfg *Config) takeSessionTTL(ttl time.Duration) error {
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = ttl
	} else if cfg.SessionTTL != ttl {
		return fmt.Errorf("sse: session-ttl: %v differs from the registry's session TTL %v; open the registry with SessionTTL %v", cfg.SessionTTL, ttl, cfg.SessionTTL)
	}
	if cfg.SessionIdle > cfg.SessionTTL {
		return fmt.Errorf("sse: session-idle: %v is longer than the registry's session TTL %v", cfg.SessionIdle, cfg.SessionTTL)
	}
	return nil
}

// Drain ends this edge's part gracefully: new requests are refused with 503, open
// streams are closed with a reconnection delay so their clients resume on another
// edge (their sessions stay), and calls in flight run to their answer until ctx
// ends. Then it closes the server. Call it before shutting the HTTP server down:
// streams never go idle on their own.
func (s *Server) Drain(ctx context.Context) error {
	s.closing.Store(true)
	s.drainOne.Do(func() { close(s.draining) })
	var err error
	select {
	case <-s.inflight.idle():
	case <-ctx.Done():
		err = fmt.Errorf("sse: drain: calls still running: %w", ctx.Err())
	}
	return errors.Join(err, s.Close())
}

// Close stops at once: streams end and calls in flight are cancelled.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.drainOne.Do(func() { close(s.draining) })
	s.stopView()
	_ = s.cancels.Unsubscribe()
	_ = s.lists.Unsubscribe()
	s.cancel()
	s.calls.cancelAll()
	<-s.pending.idle()
	s.bg.Wait()
	return nil
}

// View is the registry view requests are checked against.
func (s *Server) View() *registry.View { return s.view }

// Config is what the server was started with.
func (s *Server) Config() Config { return s.cfg }

// Log is where the server logs.
func (s *Server) Log() *slog.Logger { return s.log }

// Events is the event log the sessions' streams are kept in.
func (s *Server) Events() *registry.EventLog { return s.events }

// Context ends when the server closes: every stream and call of this edge.
func (s *Server) Context() context.Context { return s.ctx }

// Draining is closed once the server drains or closes: open streams end, telling
// their clients when to reconnect.
func (s *Server) Draining() <-chan struct{} { return s.draining }

// Outlive counts a piece of work that outlives its request (a legacy session's
// answer, a stream on a connection taken from the HTTP server), which Close waits
// for, until Outlived says it ended.
func (s *Server) Outlive() { s.pending.add() }

// Outlived says a piece of work Outlive counted ended.
func (s *Server) Outlived() { s.pending.done() }

// Listen registers a subscriptions/listen stream on tool until release is called:
// its listener wakes when one of the tool's lists changes.
func (s *Server) Listen(tool string) (ln *Listener, release func()) { return s.listeners.add(tool) }

// refuseIfClosing answers 503 while the server drains or after it closed.
func (s *Server) refuseIfClosing(w http.ResponseWriter) bool {
	if !s.closing.Load() {
		return false
	}
	w.Header().Set("Retry-After", "1")
	http.Error(w, "this edge is shutting down; retry", http.StatusServiceUnavailable)
	return true
}

// KeepAlive writes keep-alive comments on a stream while nothing else is written,
// until the returned func is called.
func (s *Server) KeepAlive(ew *EventWriter) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(s.cfg.KeepAlive)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				if ew.KeepAlive(s.cfg.KeepAlive) != nil {
					return
				}
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-finished
	}
}

// activity counts work in progress and tells when there is none, at any time (a
// WaitGroup may not gain work while someone waits on it).
type activity struct {
	mu   sync.Mutex
	n    int
	zero chan struct{}
}

func (a *activity) add() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n++
}

func (a *activity) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n--
	if a.n == 0 && a.zero != nil {
		close(a.zero)
		a.zero = nil
	}
}

// idle returns a channel that is closed once nothing is in progress.
func (a *activity) idle() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	ch := make(chan struct{})
	if a.n == 0 {
		close(ch)
		return ch
	}
	if a.zero == nil {
		a.zero = make(chan struct{})
	}
	return a.zero
}
