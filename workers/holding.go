package workers

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// Every call a worker takes is held until its reply is sent, whether it runs or waits
// for a slot at the concurrency bound; the worker names those it has held for a while
// on its tool's Holding subject (see wire.HoldingAfter), so that an edge learns at
// once, rather than at the call's deadline, that a call's worker died or that the call
// was lost on the way. That is why calls taken at the bound wait here, where they are
// known, and not in the connection's pending queue, where they are not.

// queuePerSlot bounds the calls taken that wait for a slot: so many per slot of the
// concurrency bound. Past it the worker takes no more, and the server's routing and the
// connection's pending queue hold the rest, as they would without a queue here.
const queuePerSlot = 16

// slots holds the calls a worker has taken: those running, at most its concurrency,
// and those waiting for a slot, in the order they came.
type slots struct {
	max int

	mu      sync.Mutex
	changed *sync.Cond // running or the queue shrank, or the worker died
	running int
	queue   []job
	dead    bool
	held    map[string]time.Time // call id -> when taken
}

func newSlots(max int) *slots {
	s := &slots{max: max, held: map[string]time.Time{}}
	s.changed = sync.NewCond(&s.mu)
	return s
}

// take holds j and reports whether it may run now; if not, it waits in the queue,
// and a runner done with its call takes it (next). At the queue's bound take waits
// for room. It reports false, and holds nothing, once the worker is dead.
func (s *slots) take(j job) (run, taken bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for !s.dead && s.running >= s.max && len(s.queue) >= s.max*queuePerSlot {
		s.changed.Wait()
	}
	if s.dead {
		return false, false
	}
	if j.callID != "" {
		s.held[j.callID] = time.Now()
	}
	if s.running < s.max {
		s.running++
		return true, true
	}
	s.queue = append(s.queue, j)
	return false, true
}

// next lets go of done, a call that has been answered, and returns the call that
// waited longest, to run in its slot; ok is false when none waits and the slot is
// given back.
func (s *slots) next(done job) (j job, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.held, done.callID)
	defer s.changed.Broadcast()
	if len(s.queue) > 0 && !s.dead {
		j = s.queue[0]
		s.queue[0] = job{}
		s.queue = s.queue[1:]
		return j, true
	}
	s.running--
	return job{}, false
}

// die drops the calls waiting for a slot (nobody would hear their replies: the
// connection is gone) and takes no more.
func (s *slots) die() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = true
	for _, j := range s.queue {
		delete(s.held, j.callID)
	}
	s.queue = nil
	s.changed.Broadcast()
}

// waitIdle returns once no call runs or waits.
func (s *slots) waitIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.running > 0 || len(s.queue) > 0 {
		s.changed.Wait()
	}
}

// heldSince lists the calls held since before t.
func (s *slots) heldSince(t time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, at := range s.held {
		if at.Before(t) {
			ids = append(ids, id)
		}
	}
	return ids
}

// holdingBatch bounds the call ids one Holding message names, to keep it far below
// the server's max_payload.
const holdingBatch = 1000

// announceHolding names, every wire.HoldingEvery until ctx ends, the calls the instance
// has held for wire.HoldingAfter or more.
func (w *Worker) announceHolding(ctx context.Context) {
	tick := time.NewTicker(wire.HoldingEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			ids := w.slots.heldSince(now.Add(-wire.HoldingAfter))
			for len(ids) > 0 {
				n := min(len(ids), holdingBatch)
				msg, err := w.cfg.subjects.HoldingMsg(w.tool.ID, &wire.Holding{Instance: w.cfg.instance, Calls: ids[:n]})
				if err == nil {
					err = w.nc.PublishMsg(msg)
				}
				if err != nil {
					w.log.Warn("naming the calls held failed", "err", err)
					break
				}
				ids = ids[n:]
			}
		}
	}
}
