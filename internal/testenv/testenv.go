// Package testenv starts real toolgate parts for tests: embedded NATS servers (one
// node or a 3-node JetStream cluster on 127.0.0.1), connections, and the registry.
// Everything it starts is stopped by t.Cleanup.
package testenv

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	c := newCluster(t, func(*bus.ServerConfig) {})
	nc := Conn(t, c.URL())
	WaitPlacement(t, nc)
	nc.Close()
	return c
}

// newCluster starts the cluster after edit has adjusted each node's config.
func newCluster(t testing.TB, edit func(*bus.ServerConfig)) *Cluster {
	t.Helper()
	ports := FreePorts(t, 6) // routes, then clients: fixed, so that a node starts again where it was
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
	c.WaitJetStream(t)
	return c
}

// WaitPlacement waits until the cluster nc is connected to places a stream on three
// nodes: a meta leader that knows three peers may not yet have what placement needs
// of each (a new leader elected just then, or a peer's first statistics not in), and
// the registry's first R3 bucket would be refused ("no suitable peers for placement").
func WaitPlacement(t testing.TB, nc *nats.Conn) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	const probe = "testenv-placement"
	WaitFor(t, "testenv: the cluster places a stream on its three nodes", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: probe, Subjects: []string{probe}, Replicas: 3, Storage: jetstream.MemoryStorage})
		return err == nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), Patience)
	defer cancel()
	if err := js.DeleteStream(ctx, probe); err != nil {
		t.Fatalf("testenv: %v", err)
	}
}

// WaitJetStream waits until the cluster has a JetStream meta leader that knows all
// three peers: after NewCluster, or after its nodes were started again.
func (c *Cluster) WaitJetStream(t testing.TB) {
	t.Helper()
	WaitFor(t, "testenv: a JetStream meta leader that knows 3 peers", func() bool {
		for _, s := range c.Servers {
			if s.Running() && s.JetStreamIsLeader() && len(s.JetStreamClusterPeers()) == 3 {
				return true
			}
		}
		return false
	})
}

// WaitStreamLeader waits until the stream (a bucket's is KV_<bucket>) of the
// global account (a cluster without the deployment's security) has a leader.
func (c *Cluster) WaitStreamLeader(t testing.TB, stream string) {
	t.Helper()
	WaitFor(t, "testenv: a leader of stream "+stream, func() bool {
		for _, s := range c.Servers {
			if !s.Running() {
				continue
			}
			if s.JetStreamIsStreamLeader(server.DEFAULT_GLOBAL_ACCOUNT, stream) {
				return true
			}
		}
		return false
	})
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

// FreePorts are n TCP ports of 127.0.0.1 that were free a moment ago, for servers a
// test starts as processes.
func FreePorts(t testing.TB, n int) []int {
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
	return slog.New(slog.NewTextHandler(LogWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// LogWriter writes each write as a line of the test log, until the test ends. A
// goroutine the test leaves behind (a call's follower that records its end once its
// deadline passes) may still log after that, which the testing package turns into a
// panic of the whole package: its lines are dropped instead.
func LogWriter(t testing.TB) io.Writer {
	w := &testWriter{t: t}
	t.Cleanup(w.end)
	return w
}

type testWriter struct {
	t     testing.TB
	mu    sync.Mutex
	ended bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.ended {
		w.t.Helper()
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *testWriter) end() {
	w.mu.Lock()
	w.ended = true
	w.mu.Unlock()
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

// Context is a context that ends with the test (or after twice Patience).
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*Patience)
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

// Patience is how long a test waits for something that should happen (a view to take
// a record, a node to elect a leader, a process to print its banner) before it fails:
// generous, so that a test fails because the thing did not happen, not because a
// loaded machine was slow to show it. TOOLGATE_TEST_PATIENCE (a Go duration, "2m")
// sets it for a machine slower still.
var Patience = patience()

// PatienceEnv is the variable that sets Patience.
const PatienceEnv = "TOOLGATE_TEST_PATIENCE"

func patience() time.Duration {
	if v := os.Getenv(PatienceEnv); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			return d
		}
		fmt.Fprintf(os.Stderr, "testenv: %s=%q is not a positive duration; using 30s\n", PatienceEnv, v)
	}
	return 30 * time.Second
}

// WaitFor polls cond every 10ms until it holds, and fails the test if it does not
// within Patience.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !poll(Patience, cond) {
		t.Fatalf("%s: not true within %v (%s)", what, Patience, PatienceEnv)
	}
}

// Eventually waits as WaitFor does, for something the product promises to do within
// a time: it reports (t.Logf) how long it took when that is longer than within, and
// fails only when it does not happen within Patience (or within, if longer). It
// returns how long it took.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	return EventuallyBefore(t, within, max(within, Patience), what, cond)
}

// EventuallyBefore is Eventually for a condition that could come true another way
// once limit has passed (a presence left behind expires by its TTL): it fails when
// cond does not hold within limit, which should be well above within.
func EventuallyBefore(t testing.TB, within, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if !poll(limit, cond) {
		t.Fatalf("%s: not true within %v (promised within %v)", what, limit, within)
	}
	took := time.Since(start)
	if took > within {
		t.Logf("%s: took %v, more than the %v promised", what, took.Round(time.Millisecond), within)
	}
	return took
}

func poll(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
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
