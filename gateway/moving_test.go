package gateway_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestACallWaitsForWorkersMovingToAnotherNode: the registry says the tool has a live
// worker, but no worker is subscribed on the bus: it is reconnecting to another NATS
// node. A call sent then waits for it, up to MovingWorkersWait, instead of failing with
// no responders; a tool with no live instance fails at once; and past the wait the
// call fails as before.
func TestACallWaitsForWorkersMovingToAnotherNode(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{})
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	call := func() error {
		_, err := gw.Call(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)})
		return err
	}

	t.Run("no live instance: no responders at once", func(t *testing.T) {
		began := time.Now()
		if err := call(); !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("got %v, want no responders", err)
		}
		if waited := time.Since(began); waited >= gateway.MovingWorkersWait {
			t.Fatalf("waited %s for a tool with no live instance", waited)
		}
	})

	testenv.KeepPresent(t, env.Store, registry.Presence{Tool: "echo", Instance: "moving", StartedAt: time.Now()})
	testenv.Eventually(t, 5*time.Second, "the view sees the instance", func() bool { return env.View.Snapshot().Instances("echo") == 1 })

	t.Run("a live instance that is not on the bus yet: past the wait, no responders", func(t *testing.T) {
		began := time.Now()
		if err := call(); !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("got %v, want no responders", err)
		}
		if waited := time.Since(began); waited < gateway.MovingWorkersWait {
			t.Fatalf("gave up after %s, before MovingWorkersWait", waited)
		}
	})

	t.Run("a live instance that subscribes within the wait answers", func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- call() }()
		time.Sleep(gateway.MovingWorkersWait / 4) // the call found no one, and waits
		worker := testenv.Conn(t, env.Conn.ConnectedUrl())
		if _, err := worker.QueueSubscribe(wire.DefaultSubjects.Call("echo", "echo"), wire.DefaultSubjects.QueueGroup("echo"), func(m *nats.Msg) {
			_ = m.Respond([]byte(`{}`))
		}); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("the call: %v", err)
		}
	})
}
