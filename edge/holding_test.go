package edge_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// holdingWorker runs a worker of tool on a connection of its own, with one method,
// hold, that runs until released or its caller gives up; started gets each call's
// id as it begins. kill closes the worker's connection, as a crash would.
type holdingWorker struct {
	started chan string
	release chan struct{}
	nc      *nats.Conn
	named   *nats.Subscription // what the tool's workers say they hold
}

func (e *env) holdingWorker(t *testing.T, tool string, concurrency int) *holdingWorker {
	t.Helper()
	hw := &holdingWorker{started: make(chan string, 16), release: make(chan struct{}), nc: testenv.Conn(t, e.nc.ConnectedUrl())}
	var err error
	if hw.named, err = e.nc.SubscribeSync(wire.DefaultSubjects.Holding(tool)); err != nil {
		t.Fatal(err)
	}
	w := workers.New(hw.nc, workers.Tool{ID: tool}, workers.WithConcurrency(concurrency), workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Method{Name: "hold", Timeout: 30 * time.Second, Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		hw.started <- c.CallID
		select {
		case <-hw.release:
			return map[string]bool{"released": true}, nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}})
	e.runWorker(t, w, tool, hw.release)
	return hw
}

// runWorker runs w, a worker of tool, until the test ends, when it closes release
// (unless the test did) and stops the worker; it returns once the edge sees the tool
// online.
func (e *env) runWorker(t *testing.T, w *workers.Worker, tool string, release chan struct{}) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
		stop()
		<-done
	})
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	testenv.WaitFor(t, "the edge sees "+tool+" online", func() bool {
		return e.view.Snapshot().RawTool(tool) != nil && e.view.Snapshot().Instances(tool) > 0
	})
}

// waitHeld waits until the worker named call id among those it holds: the edge has
// heard it hold the call.
func (hw *holdingWorker) waitHeld(t *testing.T, id string) {
	t.Helper()
	for held := false; !held; {
		msg, err := hw.named.NextMsg(testenv.Patience)
		if err != nil {
			t.Fatalf("the worker never named call %s: %v", id, err)
		}
		h, err := wire.ReadHolding(msg.Data)
		held = err == nil && slices.Contains(h.Calls, id)
	}
}

func (hw *holdingWorker) waitStarted(t *testing.T) string {
	t.Helper()
	select {
	case id := <-hw.started:
		return id
	case <-time.After(testenv.Patience):
		t.Fatal("the call never started on the worker")
		return ""
	}
}

// TestCallsOfADeadWorkerFail: a worker dies while it runs a call (its connection
// gone, as a SIGKILL leaves it). The call fails with 503 tool_unavailable within about
// a second, not at its 30 s deadline. A call that runs long on a live worker, or waits
// for a slot at its bound, is not given up.
func TestCallsOfADeadWorkerFail(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})

	t.Run("a call whose worker dies fails at once", func(t *testing.T) {
		hw := e.holdingWorker(t, "fragile", 4)
		e.connect("acme", "fragile")
		answered := e.callInBackground(key, "fragile", "hold", `{}`)
		id := hw.waitStarted(t)
		hw.waitHeld(t, id)
		killed := time.Now()
		hw.nc.Close()
		select {
		case r := <-answered:
			took := time.Since(killed)
			r.expect(t, http.StatusServiceUnavailable, edge.CodeToolUnavailable)
			if r.header.Get("Retry-After") == "" {
				t.Fatal("a 503 without Retry-After")
			}
			t.Logf("the call failed %v after its worker died", took.Round(time.Millisecond))
		case <-time.After(testenv.Patience):
			t.Fatalf("the call of the dead worker had no answer %v after it died", testenv.Patience)
		}
	})

	t.Run("calls that run long, or wait for a slot, run to their answer", func(t *testing.T) {
		hw := e.holdingWorker(t, "patient", 1)
		e.connect("acme", "patient")
		first := e.callInBackground(key, "patient", "hold", `{}`)
		hw.waitStarted(t)
		second := e.callInBackground(key, "patient", "hold", `{}`) // waits for the only slot
		time.Sleep(3 * wire.HoldingLost)                           // the scenario: long past when an unheard call is given up
		close(hw.release)
		for i, ch := range []<-chan result{first, second} {
			if r := <-ch; r.status != http.StatusOK {
				t.Fatalf("call %d: status %d %s, want 200 after it was released", i+1, r.status, r.body)
			}
		}
	})

	t.Run("a call nobody names is given up only if the tool's workers name their calls", func(t *testing.T) {
		// Requests taken by a subscriber that never answers nor names them: the
		// request lost, for the edge's purposes.
		for _, holding := range []bool{true, false} {
			tool := map[bool]string{true: "naming", false: "silent"}[holding]
			e.deploy(registry.Tool{ID: tool, Holding: holding, Methods: []registry.Method{{Name: "hold", Timeout: wire.Duration(4 * wire.HoldingLost)}}})
			e.connect("acme", tool)
			wc := testenv.Conn(t, e.nc.ConnectedUrl())
			if _, err := wc.QueueSubscribe(wire.DefaultSubjects.Call(tool, "hold"), wire.DefaultSubjects.QueueGroup(tool), func(*nats.Msg) {}); err != nil {
				t.Fatal(err)
			}
			if err := wc.Flush(); err != nil {
				t.Fatal(err)
			}
			testenv.KeepPresent(t, e.store, registry.Presence{Tool: tool, Instance: "mute", StartedAt: time.Now()})
			start := time.Now()
			r := e.call(key, tool, "hold", `{}`)
			took := time.Since(start)
			if holding {
				r.expect(t, http.StatusServiceUnavailable, edge.CodeToolUnavailable)
				if took >= 4*wire.HoldingLost {
					t.Fatalf("the lost call failed after %v, at its deadline, not when nothing was heard of it", took)
				}
			} else {
				r.expect(t, http.StatusGatewayTimeout, edge.CodeToolTimeout)
			}
		}
	})
}
