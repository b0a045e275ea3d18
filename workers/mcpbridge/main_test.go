package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// TestMain makes this test binary the fixture's stdio child when started as one, and
// sets the variable every child it starts inherits.
func TestMain(m *testing.M) {
	mcpfixture.RunIfChild()
	os.Setenv(mcpfixture.ChildEnv, "stdio")
	os.Exit(m.Run())
}

// fixtureCommand runs the fixture as a stdio child: this test binary, re-executed.
func fixtureCommand() []string { return []string{os.Args[0]} }

// env is one NATS server with the registry, a caller's gateway and an account that
// the tools under test are connected to.
type env struct {
	t     *testing.T
	url   string
	nc    *nats.Conn
	store *registry.Store
	view  *registry.View
	gw    *gateway.Gateway
	logs  *sink
}

const account = "acme"

func newEnv(t *testing.T) *env {
	t.Helper()
	r := testenv.NewRegistry(t)
	if _, err := r.Store.CreateAccount(r.Ctx, registry.Account{ID: account, Name: "Acme"}); err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(r.Conn, r.View, gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, url: r.Server.ClientURL(), nc: r.Conn, store: r.Store, view: r.View, gw: gw, logs: newSink(t)}
}

// bridge is one running bridge.
type bridge struct {
	*mcpbridge.Bridge
	cancel context.CancelFunc
	done   chan error
}

// start runs a bridge for cfg on a connection of its own, as the worker process
// would, connects the tool to the account and returns once the tool is served and
// visible in the caller's view.
func (e *env) start(cfg mcpbridge.Config) *bridge {
	e.t.Helper()
	return e.startWith(cfg)
}

// startWith is start with options for the bridge's worker.
func (e *env) startWith(cfg mcpbridge.Config, opts ...workers.Option) *bridge {
	e.t.Helper()
	nc := testenv.Conn(e.t, e.url)
	if _, err := e.store.Connect(testenv.Context(e.t), account, cfg.Tool, testenv.LinkSigner(e.t)); err != nil && !errors.Is(err, registry.ErrExists) {
		e.t.Fatal(err)
	}
	mark := e.logs.mark()
	b := &bridge{Bridge: mcpbridge.New(nc, cfg, e.logs.logger(), opts...), done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.done <- b.Run(ctx) }()
	e.t.Cleanup(func() {
		cancel()
		select {
		case <-b.done:
		case <-time.After(testenv.Patience):
			e.t.Errorf("bridge %s did not stop within %v", cfg.Tool, testenv.Patience)
		}
	})
	// A server that is slow to start (npx resolving a package on a loaded machine)
	// has the config's StartTimeout before the bridge gives up on it by itself.
	budget := testenv.Patience + cfg.StartTimeout
	select {
	case <-b.Ready():
	case err := <-b.done:
		e.t.Fatalf("bridge did not start: %v", err)
	case <-time.After(budget):
		e.t.Fatalf("bridge not ready within %v", budget)
	}
	// Ready needs one session; the tests want all of them.
	for i := range cfg.Sessions {
		e.logs.waitFrom(e.t, mark, budget, "upstream session started", fmt.Sprintf("session=%d ", i))
	}
	testenv.WaitFor(e.t, "the tool in the caller's view", func() bool {
		_, err := e.view.Snapshot().Tool(registry.Principal{Account: account}, cfg.Tool)
		return err == nil
	})
	return b
}

func stdioConfig(tool string, sessions int) mcpbridge.Config {
	cfg := mcpbridge.DefaultConfig()
	cfg.Tool, cfg.Command, cfg.Sessions = tool, fixtureCommand(), sessions
	cfg.StartTimeout = 20 * time.Second
	return cfg
}

var requests atomic.Int64

// call is what the REST tool-call route does: gateway.Call with the caller's account.
type call struct {
	method, params string
	session        string
	caps           []string // what the session's client declared; nil for unknown
	progress       bool
	requestID      string // the call's id too, which its progress subject names
}

func (e *env) do(ctx context.Context, tool string, c call) (*wire.Reply, error) {
	if c.requestID == "" {
		c.requestID = fmt.Sprintf("req-%d", requests.Add(1))
	}
	return e.gw.Call(ctx, &gateway.Call{
		Principal: registry.Principal{Account: account}, Tool: tool, Method: c.method, Params: []byte(c.params),
		CallID: c.requestID, RequestID: c.requestID, Timeout: 20 * time.Second, MCPContext: wire.MCPContext{Session: c.session, ClientCapabilities: c.caps, Progress: c.progress},
	})
}

// result calls the tool and decodes the reply, which must be an MCP CallToolResult.
func (e *env) result(t *testing.T, ctx context.Context, tool string, c call) map[string]any {
	t.Helper()
	r, err := e.do(ctx, tool, c)
	if err != nil {
		t.Fatal(err)
	}
	if !r.MCPResult || r.ContentType != "application/json" || r.Status != 200 {
		t.Fatalf("reply %d %q, MCP result %v: %s", r.Status, r.ContentType, r.MCPResult, r.Data)
	}
	var m map[string]any
	if err := json.Unmarshal(r.Data, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// texts are the text blocks of a CallToolResult.
func texts(res map[string]any) []string {
	var out []string
	content, _ := res["content"].([]any)
	for _, c := range content {
		if m, _ := c.(map[string]any); m["type"] == "text" {
			out = append(out, m["text"].(string))
		}
	}
	return out
}

// askMCP sends an MCP request on the tool's tg.mcp subject, as the edge does.
func (e *env) askMCP(ctx context.Context, tool, method, params, session string) (*wire.Reply, error) {
	id := fmt.Sprintf("mcp-%d", requests.Add(1))
	return bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{
		Tool: tool, MCP: true, Method: method, CallID: id, RequestID: id, Account: account, Deadline: time.Now().Add(10 * time.Second), Data: []byte(params), MCPContext: wire.MCPContext{Session: session},
	})
}

// notes collects the progress and log notifications of the call id of tool.
func (e *env) notes(t *testing.T, tool, id string) func() []wire.Notification {
	t.Helper()
	sub, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress(tool, id))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sub.Unsubscribe() })
	return func() []wire.Notification {
		var out []wire.Notification
		for {
			msg, err := sub.NextMsg(200 * time.Millisecond)
			if err != nil {
				return out
			}
			var n wire.Notification
			if err := json.Unmarshal(msg.Data, &n); err != nil {
				t.Fatal(err)
			}
			out = append(out, n)
		}
	}
}

// toolError asserts err is the tool's error with code and status.
func toolError(t *testing.T, err error, code string, status int) *wire.ToolError {
	t.Helper()
	var te *wire.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want a tool error %s", err, code)
	}
	if te.Code != code || te.Status != status {
		t.Fatalf("tool error %s %d %q, want %s %d", te.Code, te.Status, te.Message, code, status)
	}
	return te
}

// serverError asserts err is the server's JSON-RPC error, passed on as the worker's
// JSON-RPC error (with the server's code, whatever it is).
func serverError(t *testing.T, err error) *wire.RPCError {
	t.Helper()
	var re *wire.RPCError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want the server's JSON-RPC error", err)
	}
	return re
}

// sink keeps every line the bridge logs, and shows them in the test's log; it goes
// quiet once the test is over, as goroutines of the SDK may log late.
type sink struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
	seen []line
}

type line struct {
	text string
	at   time.Time
}

func newSink(t *testing.T) *sink {
	s := &sink{t: t}
	t.Cleanup(func() {
		s.mu.Lock()
		s.done = true
		s.mu.Unlock()
	})
	return s
}

func (s *sink) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(sinkWriter{s}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// mark is where the log is now, for waitFrom.
func (s *sink) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.seen)
}

// wait returns the first line logged from now on that contains every one of parts,
// and when it was logged.
func (s *sink) wait(t *testing.T, within time.Duration, parts ...string) (string, time.Time) {
	t.Helper()
	return s.waitFrom(t, s.mark(), within, parts...)
}

// waitFrom is wait for the lines logged since mark.
func (s *sink) waitFrom(t *testing.T, mark int, within time.Duration, parts ...string) (string, time.Time) {
	t.Helper()
	within = max(within, testenv.Patience) // within is how soon it is expected
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		lines := slices.Clone(s.seen[mark:])
		s.mu.Unlock()
		for _, l := range lines {
			if containsAll(l.text, parts) {
				return l.text, l.at
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no log line with %q within %v", parts, within)
	return "", time.Time{}
}

// has reports whether any line so far contains every one of parts.
func (s *sink) has(parts ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.seen, func(l line) bool { return containsAll(l.text, parts) })
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

type sinkWriter struct{ s *sink }

func (w sinkWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	text := strings.TrimRight(string(p), "\n")
	w.s.seen = append(w.s.seen, line{text: text, at: time.Now()})
	if !w.s.done {
		w.s.t.Log(text)
	}
	return len(p), nil
}
