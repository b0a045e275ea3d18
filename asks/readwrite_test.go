package asks_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestAStateReadSeesTheWritesBeforeIt: two instances of a tool on different NATS nodes
// share its state; what one wrote and was told was stored, the other reads back at
// once, whichever edge and node answer each ask.
func TestAStateReadSeesTheWritesBeforeIt(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	ctx := testenv.Context(t)
	for _, s := range c.Servers {
		testenv.Store(t, testenv.Conn(t, s.ClientURL()), 3) // an edge on each node
	}
	if _, err := registry.CreateToolState(ctx, testenv.Conn(t, c.URL()), "alpha", registry.StateOptions{Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	var workers []*nats.Conn
	for _, s := range c.Servers {
		nc, err := nats.Connect(s.ClientURL(), nats.CustomInboxPrefix("_INBOX.tool.alpha"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		workers = append(workers, nc)
	}
	ask := func(nc *nats.Conn, m *nats.Msg) ([]byte, uint64, error) {
		answer, err := nc.RequestMsg(m, 10*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", m.Subject, err)
		}
		return wire.ReadAskReply(answer)
	}
	s := wire.DefaultSubjects
	for i := range 90 {
		want := strconv.Itoa(i)
		key := fmt.Sprintf("k%d", i%5)
		if _, _, err := ask(workers[i%3], s.AskStateMsg("alpha", wire.StatePut, key, []byte(want), 0, 0)); err != nil {
			t.Fatalf("put %s through node %d: %v", want, i%3+1, err)
		}
		for j, r := range workers {
			got, _, err := ask(r, s.AskStateMsg("alpha", wire.StateGet, key, nil, 0, 0))
			if err != nil || string(got) != want {
				t.Fatalf("%s=%s written through node %d, read through node %d: %q, %v", key, want, i%3+1, j+1, got, err)
			}
		}
	}
}
