package workers

import (
	"context"
	"time"

	"github.com/nats-io/nats.go"
)

// Cancels that name no call running here are remembered for a while: the call may be
// waiting for a slot at the concurrency bound, or its message may reach intake after
// the cancel, and it must not start once its caller has given up (a queued send_email
// the caller already saw time out would otherwise still go out). A call that waits
// longer than the window is still stopped by its own deadline, checked before it runs.
const (
	DefaultCancelMemory    = time.Minute
	DefaultCancelMemoryMax = 10_000 // call ids; the oldest go first past it
)

// recentCancels is the set of call ids cancelled in the last window, at most max
// of them, in O(1) per cancel: a queue in arrival order, and a map for lookups.
type recentCancels struct {
	window time.Duration
	max    int
	at     map[string]time.Time // id → when it was last cancelled
	queue  []cancelMark         // oldest first, from head
	head   int
}

type cancelMark struct {
	id string
	at time.Time
}

func newRecentCancels(window time.Duration, max int) *recentCancels {
	return &recentCancels{window: window, max: max, at: map[string]time.Time{}}
}

// add remembers id as cancelled at now, forgetting what fell out of the window or
// over the bound.
func (r *recentCancels) add(id string, now time.Time) {
	r.at[id] = now
	r.queue = append(r.queue, cancelMark{id, now})
	for r.head < len(r.queue) {
		m := r.queue[r.head]
		if now.Sub(m.at) < r.window && len(r.queue)-r.head <= r.max {
			break
		}
		if r.at[m.id].Equal(m.at) { // not cancelled again since
			delete(r.at, m.id)
		}
		r.queue[r.head] = cancelMark{}
		r.head++
	}
	if r.head > len(r.queue)/2 { // keep the queue's backing array from growing forever
		r.queue = append(r.queue[:0], r.queue[r.head:]...)
		r.head = 0
	}
}

// has reports whether id was cancelled within the window before now.
func (r *recentCancels) has(id string, now time.Time) bool {
	at, ok := r.at[id]
	return ok && now.Sub(at) < r.window
}

// runningCall is a call running here, which a cancel of its id reaches.
type runningCall struct {
	cancel context.CancelCauseFunc
	next   *runningCall // another call of the same id
}

// track makes the call cancellable by a message on its cancel subject, until untrack.
// A call whose cancel came before it started is cancelled at once. A call without an
// id is not tracked (nil).
func (w *Worker) track(callID string, cancel context.CancelCauseFunc) *runningCall {
	if callID == "" {
		return nil
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	if w.cancelled.has(callID, time.Now()) {
		cancel(ErrCancelled)
	}
	rc := &runningCall{cancel: cancel, next: w.running[callID]}
	w.running[callID] = rc
	return rc
}

// untrack ends what track began.
func (w *Worker) untrack(callID string, rc *runningCall) {
	if rc == nil {
		return
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	head := w.running[callID]
	if head == rc {
		if rc.next == nil {
			delete(w.running, callID)
		} else {
			w.running[callID] = rc.next
		}
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == rc {
			p.next = rc.next
			return
		}
	}
}

// onCancel cancels the running calls a cancel message names, and remembers it for
// calls that have yet to start (see WithCancelMemory). Every instance of the tool
// hears every cancel of the tool's calls; most name a call running elsewhere.
func (w *Worker) onCancel(msg *nats.Msg) {
	tool, id, ok := w.cfg.subjects.ParseCancel(msg.Subject)
	if !ok || tool != w.tool.ID {
		return
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	for rc := w.running[id]; rc != nil; rc = rc.next {
		rc.cancel(ErrCancelled)
	}
	w.cancelled.add(id, time.Now())
}
