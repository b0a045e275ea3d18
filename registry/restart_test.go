package registry_test

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// TestPresenceIsTrueAfterNATSRestarts: NATS stops and starts again, all of it, and the
// presence bucket, in memory, comes back empty (a single node keeps no such bucket at
// all; a cluster makes it again, empty, with its revisions counting from 1). The view
// must show the workers that are running, within the presence TTL: the one that came
// back and wrote its presence again, and not the one that died meanwhile, whose
// presence went with the bucket's contents.
func TestPresenceIsTrueAfterNATSRestarts(t *testing.T) {
	t.Run("a single node", func(t *testing.T) {
		cfg := bus.ServerConfig{Name: "restarts", Host: "127.0.0.1", Port: freePort(t), JetStream: true, StoreDir: t.TempDir()}
		srv := startServer(t, cfg)
		store := presenceAfterRestart(t, srv.ClientURL(), 1, func() {
			srv.Shutdown()
			srv.WaitForShutdown()
		}, func() { srv = startServer(t, cfg) })
		// The shared rate buckets, in memory too, are made again by the first take
		// that misses them.
		testenv.WaitFor(t, "the shared rate buckets back", func() bool {
			_, _, err := store.TakeTokens(testenv.Context(t), registry.KeyRateID("k"), 10, 10, 1, 0, time.Now())
			return err == nil
		})
	})
	t.Run("a 3-node cluster", func(t *testing.T) {
		c := testenv.NewCluster(t)
		presenceAfterRestart(t, c.AllURLs(), 3, func() {
			for i := range c.Servers {
				c.Stop(i)
			}
		}, func() {
			for i := range c.Servers {
				c.Start(t, i)
			}
			// What the test measures is the view's recovery once the cluster can serve
			// the bucket again, not how long its elections take on a loaded machine.
			c.WaitJetStream(t)
			c.WaitStreamLeader(t, "KV_"+registry.BucketPresence)
		})
	})
}

// presenceAfterRestart runs two workers and a view on the NATS system at url, stops it,
// kills one worker while it is down, starts it, and checks the view.
func presenceAfterRestart(t *testing.T, url string, replicas int, stop, start func()) *registry.Store {
	store := testenv.Store(t, testenv.Conn(t, url), replicas)
	const ttl = 2 * time.Second // the workers' own
	view := testenv.View(t, store)

	survivor := runWorker(t, url, "survivor", ttl)
	dying := runWorker(t, url, "dying", ttl)
	instances := func() map[string]bool {
		got := map[string]bool{}
		for _, p := range view.Snapshot().Presence("echo") {
			got[p.Instance] = true
		}
		return got
	}
	testenv.WaitFor(t, "both workers present", func() bool { return len(instances()) == 2 })
	// A busy presence bucket: the view has seen many revisions, more than the
	// survivor writes again for a while after the restart.
	for range 200 {
		if err := store.PutPresence(testenv.Context(t), registry.Presence{Tool: "other", Instance: "busy", StartedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}

	stop()
	dying() // dies while NATS is down: its presence is never written again
	start()

	began := time.Now()
	testenv.WaitFor(t, "only the surviving worker present", func() bool {
		got := instances()
		return len(got) == 1 && got["survivor"]
	})
	t.Logf("presence true %v after the restart", time.Since(began).Round(time.Millisecond))
	// And it stays so: the view follows the bucket as it is now.
	time.Sleep(ttl)
	if got := instances(); len(got) != 1 || !got["survivor"] {
		t.Fatalf("instances %v a TTL later, want only the survivor", got)
	}
	survivor()
	return store
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	n, _ := strconv.Atoi(port)
	return n
}

func startServer(t *testing.T, cfg bus.ServerConfig) *server.Server {
	t.Helper()
	s, err := bus.StartServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// runWorker runs a worker of the echo tool as instance on a connection of its own,
// and returns what kills it: its connection closes, nothing is cleaned up.
func runWorker(t *testing.T, url, instance string, ttl time.Duration) (kill func()) {
	t.Helper()
	nc, err := bus.Connect(url, instance, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	w := workers.New(nc, workers.Tool{ID: "echo"}, workers.WithInstance(instance), workers.WithPresenceTTL(ttl),
		workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Func("echo", "echoes", func(_ context.Context, _ *workers.Call, in map[string]any) (map[string]any, error) {
		return in, nil
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(context.Background())
	}()
	select {
	case <-w.Ready():
	case <-time.After(testenv.Patience):
		t.Fatalf("worker %s not ready", instance)
	}
	kill = func() {
		nc.Close()
		<-done
	}
	t.Cleanup(func() {
		if !nc.IsClosed() {
			kill()
		}
	})
	return kill
}
