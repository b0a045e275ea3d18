package legacy

import (
	"context"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestRunners: work runs, a runner that finished waits for the next piece and takes
// it, a burst leaves at most maxIdle runners waiting, and the waiting ones end with
// the context.
func TestRunners(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const maxIdle = 3
	r := newRunners(ctx, maxIdle)

	// A burst: 10 pieces held until all have started, so each has a runner of its own.
	var started, finished sync.WaitGroup
	release := make(chan struct{})
	started.Add(10)
	finished.Add(10)
	for range 10 {
		r.Go(func() {
			started.Done()
			<-release
			finished.Done()
		})
	}
	started.Wait()
	close(release)
	finished.Wait()
	testenv.WaitFor(t, "the burst's runners down to the most kept", func() bool { return r.idle.Load() == maxIdle })

	// The next piece goes to a waiting runner.
	ran := make(chan struct{})
	testenv.WaitFor(t, "a waiting runner takes the next piece", func() bool {
		select {
		case r.work <- func() { close(ran) }:
			return true
		default:
			return false
		}
	})
	<-ran
	testenv.WaitFor(t, "the runner waiting again", func() bool { return r.idle.Load() == maxIdle })

	cancel()
	testenv.WaitFor(t, "the waiting runners gone with the context", func() bool { return r.idle.Load() == 0 })
	done := make(chan struct{})
	r.Go(func() { close(done) }) // still runs, on a runner of its own
	<-done
}
