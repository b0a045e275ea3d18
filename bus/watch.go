package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrCallLost means nothing was heard of a call for wire.HoldingLost: no worker named
// it as one it holds, and no answer came. The worker that took it died, or the request
// or its answer was lost with a NATS node. The tool is unavailable for this call; the
// call is cancelled, so a worker that does hold it stops.
var ErrCallLost = errors.New("bus: the call was lost: no worker holds it any more")

// Watcher follows what the workers of every tool say they hold (wire.Holding) and gives
// up the calls of this edge that nothing is heard of, so that a call whose worker died
// fails within about a second instead of at its deadline. It costs a call that is
// answered quickly nothing on the bus.
type Watcher struct {
	nc       *nats.Conn
	subjects wire.Subjects

	mu       sync.Mutex
	calls    map[string]*watched // by call id
	scanning bool                // a scan goroutine runs while calls are watched
}

type watched struct {
	tool   string
	heard  time.Time // sent, or last named by a worker
	cancel context.CancelCauseFunc
}

// NewWatcher follows the Holding subjects of every tool on nc.
func NewWatcher(nc *nats.Conn, subjects wire.Subjects) (*Watcher, error) {
	w := &Watcher{nc: nc, subjects: subjects, calls: map[string]*watched{}}
	if _, err := nc.Subscribe(subjects.HoldingAll(), w.onHolding); err != nil {
		return nil, fmt.Errorf("bus: follow the calls workers hold: %w", err)
	}
	return w, nil
}

// Send sends req as bus.Do does; with watch (the tool's workers name the calls they hold, see
// wire.Tool.Holding), a call nothing is heard of for wire.HoldingLost fails with
// ErrCallLost.
func (w *Watcher) Send(ctx context.Context, req *wire.Request, watch bool) (*wire.Reply, error) {
	if !watch || req.CallID == "" {
		return Do(ctx, w.nc, w.subjects, req)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	c := w.watch(req.CallID, req.Tool, cancel)
	defer w.unwatch(req.CallID, c)
	reply, err := Do(ctx, w.nc, w.subjects, req)
	if err != nil && errors.Is(context.Cause(ctx), ErrCallLost) {
		return nil, ErrCallLost
	}
	return reply, err
}

// watch watches the call callID of tool until unwatch.
func (w *Watcher) watch(callID, tool string, cancel context.CancelCauseFunc) *watched {
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

// scan gives up the calls nothing was heard of for wire.HoldingLost, until no call is
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
		for _, c := range w.calls {
			if now.Sub(c.heard) > wire.HoldingLost {
				c.cancel(ErrCallLost)
			}
		}
		w.mu.Unlock()
	}
}
