package legacy

import (
	"context"
	"sync/atomic"
)

// runners run the work that outlives its request (a legacy session's calls, answered
// on the session's stream) on goroutines kept for the next piece of work. A goroutine
// made per call starts with a small stack and grows it, copying it each time, to what
// a call takes; a kept one has grown it already.
//
// A runner that finishes its work waits for more while fewer than maxIdle others wait,
// and ends otherwise, so that a burst leaves no more than maxIdle goroutines behind;
// every waiting runner ends with ctx.
type runners struct {
	ctx     context.Context
	maxIdle int32
	work    chan func() // unbuffered: a send succeeds only to a runner waiting
	idle    atomic.Int32
}

// maxIdleRunners is how many runners wait for work at most: twice the callers that
// make bench's legacy row drives the edge with at once (32).
const maxIdleRunners = 64

func newRunners(ctx context.Context, maxIdle int32) *runners {
	return &runners{ctx: ctx, maxIdle: maxIdle, work: make(chan func())}
}

// Go runs f on a waiting runner, or on a new one when none waits.
func (r *runners) Go(f func()) {
	select {
	case r.work <- f:
	default:
		go r.run(f)
	}
}

func (r *runners) run(f func()) {
	for {
		f()
		if r.idle.Add(1) > r.maxIdle {
			r.idle.Add(-1)
			return
		}
		select {
		case f = <-r.work:
			r.idle.Add(-1)
		case <-r.ctx.Done():
			r.idle.Add(-1)
			return
		}
	}
}
