// Package testenv starts real toolgate parts for tests: embedded NATS servers (one
// node or a 3-node JetStream cluster on 127.0.0.1), connections, and the registry.
// Everything it starts is stopped by t.Cleanup.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Server starts a single JetStream node on a free port.
func Server(t testing.TB) *server.Server {
	t.Helper()
	return ServerWith(t, func(*bus.ServerConfig) {})
}

// ServerWith starts a single JetStream node after edit has adjusted its config.
func ServerWith(t testing.TB, edit func(*bus.ServerConfig)) *server.Server {
	t.Helper()
	cfg := bus.ServerConfig{Name: "test", Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: t.TempDir()}
	edit(&cfg)
	s, err := bus.StartServer(cfg)
	if err != nil {
		t.Fatalf("testenv: start nats: %v", err)
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s
}

// Cluster is a 3-node JetStream cluster.
type Cluster struct {
	Servers []*server.Server
	configs []bus.ServerConfig
}

// URL is a client URL listing every node, so a client fails over when one stops.
func (c *Cluster) URL() string {
	var urls []string
	for _, s := range c.Servers {
		if s.Running() {
			urls = append(urls, s.ClientURL())
		}
	}
	return strings.Join(urls, ",")
}

// NewCluster starts three JetStream nodes routed to each other and waits until the
// cluster has a JetStream meta leader that knows all three peers (before that, an R3
// stream finds no placement).
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	return newCluster(t, func(*bus.ServerConfig) {})
}

// newCluster starts the cluster after edit has adjusted each node's config.
func newCluster(t testing.TB, edit func(*bus.ServerConfig)) *Cluster {
	t.Helper()
	ports := freePorts(t, 6) // routes, then clients: fixed, so that a node starts again where it was
	c := &Cluster{}
	for i := range 3 {
		var routes []string
		for j, p := range ports[:3] {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", p))
			}
		}
		cfg := bus.ServerConfig{
			Name: fmt.Sprintf("n%d", i+1), Host: "127.0.0.1", Port: ports[3+i], JetStream: true, StoreDir: t.TempDir(),
			Cluster: bus.ClusterConfig{Name: "tg-test", Host: "127.0.0.1", Port: ports[i], Routes: routes},
		}
		edit(&cfg)
		s, err := bus.StartServer(cfg)
		if err != nil {
			t.Fatalf("testenv: start node %d: %v", i+1, err)
		}
		c.Servers = append(c.Servers, s)
		c.configs = append(c.configs, cfg)
	}
	t.Cleanup(func() {
		for _, s := range c.Servers {
			s.Shutdown()
			s.WaitForShutdown()
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		for _, s := range c.Servers {
			if s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == 3 {
				return c
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("testenv: cluster had no JetStream leader with 3 peers within 20s")
	return nil
}

// Stop shuts one node down.
func (c *Cluster) Stop(i int) {
	c.Servers[i].Shutdown()
	c.Servers[i].WaitForShutdown()
}

// Start starts a stopped node again as it was (name, ports, store), as a restarted
// process would.
func (c *Cluster) Start(t testing.TB, i int) {
	t.Helper()
	s, err := bus.StartServer(c.configs[i])
	if err != nil {
		t.Fatalf("testenv: start node %d again: %v", i+1, err)
	}
	c.Servers[i] = s
}

// AllURLs lists every node's client URL, running or not: what a client that should
// find the nodes again after they restart is given.
func (c *Cluster) AllURLs() string {
	var urls []string
	for _, cfg := range c.configs {
		urls = append(urls, fmt.Sprintf("nats://%s:%d", cfg.Host, cfg.Port))
	}
	return strings.Join(urls, ",")
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	var ls []net.Listener
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testenv: free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// Conn connects to url (a server's ClientURL or a Cluster's URL).
func Conn(t testing.TB, url string) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(url, "test", Logger(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Logger writes slog output to the test log, shown only when the test fails.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Buffer collects what a logger or a command writes while the test reads it: a
// bytes.Buffer safe for concurrent use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Context is a context that ends with the test (or after 60s).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Store opens the registry on nc with replicas and the default options, and answers
// workers' asks on nc as an edge does (Asks), so that workers can store their records
// there. (A test of presence expiry gives its worker a short TTL of its own:
// workers.WithPresenceTTL.)
func Store(t testing.TB, nc *nats.Conn, replicas int) *registry.Store {
	t.Helper()
	opts := registry.DefaultOptions()
	opts.Replicas = replicas
	st, err := registry.Open(Context(t), nc, opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	Asks(t, nc, wire.DefaultSubjects)
	return st
}

// Asks answers workers' asks under subj on nc (package asks), as every edge does,
// until the test ends.
func Asks(t testing.TB, nc *nats.Conn, subj wire.Subjects) *asks.Server {
	t.Helper()
	s, err := asks.Serve(nc, subj, 0, Logger(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// View starts a registry view on store that lives as long as the test.
func View(t testing.TB, store *registry.Store) *registry.View {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	v, err := registry.NewView(ctx, store, Logger(t))
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return v
}

// KeepPresent writes p to store and refreshes it, as a worker's heartbeat does, until
// the test ends: for tests that answer a tool's calls themselves, without the worker
// SDK, and need the tool to look online.
func KeepPresent(t testing.TB, store *registry.Store, p registry.Presence) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	beat := func() error {
		bctx, bcancel := context.WithTimeout(ctx, 5*time.Second)
		defer bcancel()
		return store.PutPresence(bctx, p)
	}
	if err := beat(); err != nil {
		cancel()
		t.Fatalf("testenv: presence: %v", err)
	}
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(store.Options().PresenceTTL / 4)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = beat()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped })
}

// LinkSigner is a signer with a random secret.
func LinkSigner(t testing.TB) *registry.LinkSigner {
	t.Helper()
	s, err := registry.NewLinkSigner([]byte(registry.NewLinkSecret()))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Eventually polls cond every 10ms until it holds or within passes.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Registry is a single node with the registry open on it: the setup most tests need.
type Registry struct {
	Server *server.Server
	Conn   *nats.Conn
	Store  *registry.Store
	View   *registry.View
	Signer *registry.LinkSigner
	Ctx    context.Context
}

// NewRegistry starts a node, opens the registry (R1) and follows it with a view.
func NewRegistry(t testing.TB) *Registry {
	t.Helper()
	s := Server(t)
	nc := Conn(t, s.ClientURL())
	st := Store(t, nc, 1)
	return &Registry{Server: s, Conn: nc, Store: st, View: View(t, st), Signer: LinkSigner(t), Ctx: Context(t)}
}

// NPXPackage returns npx once it has the npm package pkg, fetched within two minutes;
// it skips the test when there is no npx or the registry cannot be reached.
func NPXPackage(t testing.TB, pkg string) string {
	t.Helper()
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("skipping: no npx on PATH to fetch " + pkg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if out, err := exec.CommandContext(ctx, npx, "--yes", "--package", pkg, "-c", "true").CombinedOutput(); err != nil {
		t.Skipf("skipping: npx could not install %s within 2 minutes: %v\n%s", pkg, err, out)
	}
	t.Logf("npx has %s (%v)", pkg, time.Since(start).Round(time.Millisecond))
	return npx
}
