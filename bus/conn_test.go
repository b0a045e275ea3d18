package bus_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAConnectionLeavesAServerThatStopsAnswering: the server a client is connected to
// stops answering but keeps the connection open (it hangs, or the network between is
// cut). The client gives it up within seconds, by its pings, and goes on with another
// node, instead of waiting minutes with every request it sends lost.
func TestAConnectionLeavesAServerThatStopsAnswering(t *testing.T) {
	srv := testenv.Server(t)
	proxy := testenv.NewStallingProxy(t, srv.Addr().String())
	through, direct := "nats://"+proxy.Addr, srv.ClientURL()
	nc, err := bus.Connect(through+","+direct, "test", testenv.Logger(t), nats.DontRandomize())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if nc.ConnectedUrl() != through {
		t.Fatalf("connected to %s, want %s first", nc.ConnectedUrl(), through)
	}
	stalled := time.Now()
	proxy.Stall()
	limit := bus.PingInterval*time.Duration(bus.MaxPingsOut+2) + 5*time.Second
	testenv.Eventually(t, limit, "the client on another node", func() bool {
		return nc.IsConnected() && nc.ConnectedUrl() == direct
	})
	t.Logf("on another node %v after the server stopped answering", time.Since(stalled).Round(time.Millisecond))
	if err := nc.Flush(); err != nil {
		t.Fatalf("the connection on the other node: %v", err)
	}
}
