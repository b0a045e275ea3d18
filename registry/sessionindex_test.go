package registry_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestSessionIndexFollowsThroughANodeLoss: the node that serves an edge's consumer of
// the sessions bucket stops. An edge's index, connected to another node, goes on following the bucket:
// a session another edge opens afterwards is known to it, and one deleted ends here,
// within seconds.
func TestSessionIndexFollowsThroughANodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	writer := testenv.Store(t, testenv.Conn(t, c.Servers[0].ClientURL()), 3)
	ctx := testenv.Context(t)

	// The node to stop is the one that serves the index's consumer, and the index is
	// connected to another, so that what is measured is the follower, not a
	// reconnect; the writer is on the third.
	var x *registry.SessionIndex
	ended := make(chan string, 16)
	var bg sync.WaitGroup
	own, host := -1, -1
	for try := 0; try < 3*len(c.Servers) && (host < 0 || host == own); try++ {
		own = try % len(c.Servers)
		stop, cancel := context.WithCancel(context.Background())
		var err error
		x, err = testenv.Store(t, testenv.Conn(t, c.Servers[own].ClientURL()), 3).FollowSessions(ctx, stop, testenv.Logger(t), func(id, _ string) { ended <- id }, &bg)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		host = consumerHost(t, c, writer)
		if host == own {
			cancel()
			bg.Wait()
			continue
		}
		t.Cleanup(func() { cancel(); bg.Wait() })
	}
	if host < 0 || host == own {
		t.Fatal("every consumer of the sessions bucket was on the index's own node")
	}
	if other := 3 - own - host; other != 0 {
		writer = testenv.Store(t, testenv.Conn(t, c.Servers[other].ClientURL()), 3)
	}
	open := func(ctx context.Context) (string, error) {
		sess := registry.Session{ID: registry.NewID(""), Account: "acme", Tool: "kit", CreatedAt: time.Now().UTC()}
		_, err := writer.CreateSession(ctx, sess)
		return sess.ID, err
	}
	known := func(id string) func() bool {
		return func() bool { _, ok := x.Get(id); return ok }
	}
	before, err := open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the index knows the session opened before", known(before))

	c.Stop(host)
	stopped := time.Now()
	var after string
	testenv.WaitFor(t, "a session opened after the node stopped", func() bool {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		after, err = open(attempt)
		return err == nil
	})
	written := time.Now()
	testenv.WaitFor(t, "the index knows the session opened after the node stopped", known(after))
	t.Logf("written %v after node %d stopped; known to the index %v later",
		written.Sub(stopped).Round(time.Millisecond), host+1, time.Since(written).Round(time.Millisecond))

	testenv.WaitFor(t, "the session opened before is deleted", func() bool {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return writer.DeleteSession(attempt, before) == nil
	})
	select {
	case id := <-ended:
		if id != before {
			t.Fatalf("ended %s, want %s", id, before)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the index did not end the deleted session within 10s")
	}
	if _, ok := x.Get(before); ok {
		t.Error("the deleted session is still in the index")
	}
}

// consumerHost is the node that serves the one consumer of the sessions bucket, or -1
// while it has none.
func consumerHost(t *testing.T, c *testenv.Cluster, store *registry.Store) int {
	t.Helper()
	ctx := testenv.Context(t)
	host := -1
	testenv.WaitFor(t, "the sessions bucket's consumer has a node", func() bool {
		st, err := store.JetStream().Stream(ctx, "KV_"+registry.BucketSessions)
		if err != nil {
			return false
		}
		infos := st.ListConsumers(ctx)
		for ci := range infos.Info() {
			if ci.Cluster == nil {
				continue
			}
			for i, s := range c.Servers {
				if s.Name() == ci.Cluster.Leader {
					host = i
				}
			}
		}
		return host >= 0
	})
	return host
}
