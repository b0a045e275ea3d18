package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrCallLost means nothing was heard of a call for the Watcher's lost time
// (wire.HoldingLost unless set otherwise): no worker named
// it as one it holds, and no answer came. The worker that took it died, or the request
// or its answer was lost with a NATS node. The tool is unavailable for this call; the
// call is cancelled, so a worker that does hold it stops.
var ErrCallLost = errors.New("bus: the call was lost: no worker holds it any more")

// Watcher follows what the workers of every tool say they hold (wire.Holding) and gives
// up the calls of this edge that nothing is heard of, so that a call whose worker died
// fails within about a second instead of at its deadline. It costs a call that is
// answered quickly nothing on the bus.
//
// Silence proves a worker gone only while this edge's own connection carries what the
// workers say. So the Watcher gives nothing up while the connection is down or moving
// to another server, and counts a call's silence again from the moment it is back (a
// request sent meanwhile waits in the client's buffer and goes out then). And a call
// silent for SilenceProbe makes it ask its own server for a sign of life: a server
// that does not answer within ProbeTimeout is given up at once (the client reconnects
// elsewhere) instead of after the client's pings, seconds later, while every call it
// sends is lost. A call is given up only once a probe sent after the call's silence
// began has been answered.
type Watcher struct {
	nc       *nats.Conn
	subjects wire.Subjects
	lost     time.Duration // a call nothing was heard of for this long is given up
	log      *slog.Logger

	mu       sync.Mutex
	calls    map[string]*watched // by call id
	scanning bool                // a scan goroutine runs while calls are watched
	// The connection as last seen by scan: reconnects counted, and whether it was
	// connected.
	reconnects uint64
	connected  bool
	probing    bool      // a probe is in flight
	aliveAt    time.Time // when the last probe the server answered was sent
}

type watched struct {
	tool   string
	heard  time.Time // sent, or last named by a worker
	cancel context.CancelFunc
	lost   atomic.Bool // given up: cancelled as lost
}

// How the Watcher checks its own connection: a call silent for SilenceProbe sends a
// probe (a PING the server must answer), and a server that leaves it unanswered for
// ProbeTimeout is given up. A connection that comes back, here or on another server,
// gives each call ReconnectGrace before its silence counts again.
const (
	SilenceProbe   = 500 * time.Millisecond
	ProbeTimeout   = 750 * time.Millisecond
	ReconnectGrace = wire.HoldingLost
)

// MinCallLost is the shortest time a Watcher may take a call nothing is heard of for
// as lost: two of the workers' wire.HoldingEvery, so that one late word of a worker
// does not cost a call.
const MinCallLost = 2 * wire.HoldingEvery

// NewWatcher follows the Holding subjects of every tool on nc and gives up a call
// nothing is heard of for lost (0 for wire.HoldingLost; at least MinCallLost); log
// says when it gives up a server.
func NewWatcher(nc *nats.Conn, subjects wire.Subjects, lost time.Duration, log *slog.Logger) (*Watcher, error) {
	if lost == 0 {
		lost = wire.HoldingLost
	}
	if lost < MinCallLost {
		return nil, fmt.Errorf("bus: a call cannot be taken as lost after %v: at least %v", lost, MinCallLost)
	}
	if log == nil {
		log = slog.Default()
	}
	w := &Watcher{nc: nc, subjects: subjects, lost: lost, log: log, calls: map[string]*watched{},
		reconnects: nc.Stats().Reconnects, connected: nc.IsConnected()}
	if _, err := nc.Subscribe(subjects.HoldingAll(), w.onHolding); err != nil {
		return nil, fmt.Errorf("bus: follow the calls workers hold: %w", err)
	}
	return w, nil
}

// Send sends req as bus.Do does; with watch (the tool's workers name the calls they hold, see
// wire.Tool.Holding), a call nothing is heard of for the Watcher's lost time fails with
// ErrCallLost.
func (w *Watcher) Send(ctx context.Context, req *wire.Request, watch bool) (*wire.Reply, error) {
	if !watch || req.CallID == "" {
		return Do(ctx, w.nc, w.subjects, req)
	}
	// One context for the watcher's cancel and the call's deadline, which Do then
	// does not add again: every layer is a context and its parent's children map per
	// call. Whether the watcher gave the call up is kept beside it.
	var cancel context.CancelFunc
	if req.Deadline.IsZero() {
		ctx, cancel = context.WithCancel(ctx)
	} else {
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
	}
	defer cancel()
	c := w.watch(req.CallID, req.Tool, cancel)
	defer w.unwatch(req.CallID, c)
	reply, err := Do(ctx, w.nc, w.subjects, req)
	if err != nil && c.lost.Load() {
		return nil, ErrCallLost
	}
	return reply, err
}

// watch watches the call callID of tool until unwatch.
func (w *Watcher) watch(callID, tool string, cancel context.CancelFunc) *watched {
	c := &watched{tool: tool, heard: time.Now(), cancel: cancel}
	w.mu.Lock()
	w.calls[callID] = c
	if !w.scanning {
		w.scanning = true
		go w.scan()
	}
	w.mu.Unlock()
	return c
}

func (w *Watcher) unwatch(callID string, c *watched) {
	w.mu.Lock()
	if w.calls[callID] == c {
		delete(w.calls, callID)
	}
	w.mu.Unlock()
}

func (w *Watcher) onHolding(m *nats.Msg) {
	tool, ok := w.subjects.ParseHolding(m.Subject)
	if !ok {
		return
	}
	h, err := wire.ReadHolding(m.Data)
	if err != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range h.Calls {
		if c := w.calls[id]; c != nil && c.tool == tool {
			c.heard = now
		}
	}
}

// scanEvery is how often the watched calls are looked over.
const scanEvery = 100 * time.Millisecond

// scan gives up the calls nothing was heard of for w.lost, until no call is
// watched.
func (w *Watcher) scan() {
	tick := time.NewTicker(scanEvery)
	defer tick.Stop()
	for now := range tick.C {
		w.mu.Lock()
		if len(w.calls) == 0 {
			w.scanning = false
			w.mu.Unlock()
			return
		}
		w.scanAt(now)
		w.mu.Unlock()
	}
}

// scanAt looks the calls over at now; w.mu is held.
func (w *Watcher) scanAt(now time.Time) {
	connected, reconnects := w.nc.IsConnected(), w.nc.Stats().Reconnects
	if !connected || !w.connected || reconnects != w.reconnects {
		// Down, or back a moment ago: what the workers said meanwhile was never heard.
		w.connected, w.reconnects = connected, reconnects
		for _, c := range w.calls {
			c.heard = latest(c.heard, now.Add(ReconnectGrace-w.lost))
		}
		return
	}
	probe := false
	for _, c := range w.calls {
		silent := now.Sub(c.heard)
		switch {
		case silent > w.lost && w.aliveAt.After(c.heard.Add(SilenceProbe)):
			c.lost.Store(true)
			c.cancel()
		case silent > SilenceProbe:
			probe = true
		}
	}
	if probe && !w.probing {
		w.probing = true
		go w.probe()
	}
}

// probe asks the server for a sign of life; one that gives none within ProbeTimeout
// is given up, and the client goes on to another.
func (w *Watcher) probe() {
	sent := time.Now()
	err := w.nc.FlushTimeout(ProbeTimeout)
	w.mu.Lock()
	w.probing = false
	if err == nil {
		w.aliveAt = sent
	}
	w.mu.Unlock()
	if errors.Is(err, nats.ErrTimeout) && w.nc.IsConnected() {
		w.log.Warn("nats server silent: reconnecting", "url", w.nc.ConnectedUrlRedacted(), "waited", ProbeTimeout)
		_ = Reconnect(w.nc)
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
