package bus_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

// holdingResponder answers every call of tool on nc after hold, naming the calls it
// holds on the tool's holding subject every wire.HoldingEvery meanwhile, as a worker
// of a tool whose record says holding does.
func holdingResponder(t *testing.T, nc *nats.Conn, subjects wire.Subjects, tool string, hold time.Duration) {
	t.Helper()
	sub, err := nc.Subscribe(subjects.CallAll(tool), func(m *nats.Msg) {
		id := m.Header.Get(wire.HeaderCallID)
		go func() {
			tick := time.NewTicker(wire.HoldingEvery)
			defer tick.Stop()
			done := time.After(hold)
			for {
				select {
				case <-tick.C:
					h, _ := subjects.HoldingMsg(tool, &wire.Holding{Instance: "i1", Calls: []string{id}})
					_ = nc.PublishMsg(h)
				case <-done:
					_ = nc.PublishMsg(wire.JSONReply(m.Reply, m.Data))
					return
				}
			}
		}()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestAWatcherTellsItsOwnSilentServerFromADeadWorker: the edge's server stops
// answering (hung, or cut off the network) while a call runs on a worker that keeps
// naming it elsewhere in the cluster. The edge hears nothing of the call, but the
// worker is alive: the Watcher finds its own server silent, the connection goes on to
// another node without waiting for its pings (an hour apart here), and the call is
// answered there, not given up as lost. A worker that really dies is still given up
// (edge.TestCallsOfADeadWorkerFail).
func TestAWatcherTellsItsOwnSilentServerFromADeadWorker(t *testing.T) {
	c := testenv.NewCluster(t)
	proxy := testenv.NewStallingProxy(t, c.Servers[0].Addr().String())
	through := "nats://" + proxy.Addr
	nc, err := bus.Connect(through+","+c.Servers[1].ClientURL(), "edge", testenv.Logger(t),
		nats.DontRandomize(), nats.PingInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != through {
		t.Fatalf("connected to %s, want %s first", nc.ConnectedUrl(), through)
	}
	var subjects wire.Subjects
	holdingResponder(t, testenv.Conn(t, c.Servers[2].ClientURL()), subjects, "slow", 3*time.Second)
	w, err := bus.NewWatcher(nc, subjects, 0, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	// Before the call: the worker's interest in the call reaches the edge's node, and
	// the edge's in the holding subject the worker's node (each crosses a route).
	testenv.Eventually(t, 10*time.Second, "the call and holding subjects followed across the cluster", func() bool {
		return nc.Flush() == nil &&
			c.Servers[0].GlobalAccount().SubscriptionInterest(subjects.Call("slow", "m")) &&
			c.Servers[2].GlobalAccount().SubscriptionInterest(subjects.Holding("slow"))
	})

	type result struct {
		reply *wire.Reply
		err   error
	}
	done := make(chan result, 1)
	go func() {
		r, err := w.Send(context.Background(), &wire.Request{Tool: "slow", Method: "m", CallID: "c1",
			Data: []byte(`{"n":1}`), Deadline: time.Now().Add(20 * time.Second)}, true)
		done <- result{r, err}
	}()
	time.Sleep(wire.HoldingEvery + 100*time.Millisecond) // the call is with the worker
	proxy.Stall()

	select {
	case r := <-done:
		if errors.Is(r.err, bus.ErrCallLost) {
			t.Fatal("the call was given up as lost while the worker held it: the edge's own server was silent")
		}
		if r.err != nil || string(r.reply.Data) != `{"n":1}` {
			t.Fatalf("the call: %v, %+v", r.err, r.reply)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("no answer within 15s")
	}
	if u := nc.ConnectedUrl(); u != c.Servers[1].ClientURL() {
		t.Fatalf("the connection is on %q, want the other node %s", u, c.Servers[1].ClientURL())
	}
}

// TestACallIsLostAfterTheWatchersTime: a worker took the call and then fell silent
// (it died before it first named the call). The call is given up as lost once
// nothing was heard of it for the Watcher's lost time, not before, and long before
// its deadline; a lost time below bus.MinCallLost is refused.
func TestACallIsLostAfterTheWatchersTime(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	var subjects wire.Subjects
	taken := make(chan struct{}, 1)
	worker := testenv.Conn(t, srv.ClientURL())
	if _, err := worker.Subscribe(subjects.CallAll("mute"), func(*nats.Msg) { taken <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if err := worker.Flush(); err != nil {
		t.Fatal(err)
	}
	if _, err := bus.NewWatcher(nc, subjects, bus.MinCallLost-time.Millisecond, testenv.Logger(t)); err == nil {
		t.Fatalf("a lost time of %v was taken", bus.MinCallLost-time.Millisecond)
	}
	const lost = 2 * time.Second
	w, err := bus.NewWatcher(nc, subjects, lost, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	_, err = w.Send(context.Background(), &wire.Request{Tool: "mute", Method: "m", CallID: "c1",
		Data: []byte(`{}`), Deadline: time.Now().Add(time.Minute)}, true)
	took := time.Since(sent)
	<-taken
	if !errors.Is(err, bus.ErrCallLost) {
		t.Fatalf("the call: %v after %v, want it lost", err, took)
	}
	if took < lost {
		t.Fatalf("the call was given up after %v, before the watcher's %v", took, lost)
	}
}
