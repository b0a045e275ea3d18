package mcpbridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// remote is the fixture served over HTTP on 127.0.0.1, one server for every session,
// as a deployed remote server is.
type remote struct {
	url       string
	cancelled chan string

	mu       sync.Mutex
	tokens   []string        // the Authorization headers the server got
	sessions map[string]bool // the MCP sessions its requests named
}

func serveRemote(t *testing.T, handler func(*mcp.Server) http.Handler) *remote {
	t.Helper()
	r := &remote{cancelled: make(chan string, 8), sessions: map[string]bool{}}
	s := mcpfixture.New(mcpfixture.Options{Cancelled: func(tool string) { r.cancelled <- tool }})
	h := handler(s)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.tokens = append(r.tokens, req.Header.Get("Authorization"))
		if id := req.Header.Get("Mcp-Session-Id"); id != "" {
			r.sessions[id] = true
		}
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/mcp"
	return r
}

func remoteConfig(tool, url string) mcpbridge.Config {
	cfg := mcpbridge.DefaultConfig()
	cfg.Tool, cfg.URL, cfg.Sessions = tool, url, 2
	cfg.Header = http.Header{"Authorization": []string{"Bearer s3cret"}}
	cfg.StartTimeout = 10 * time.Second
	return cfg
}

func TestRemoteStreamableHTTPServer(t *testing.T) {
	e := newEnv(t)
	r := serveRemote(t, func(s *mcp.Server) http.Handler {
		return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	})
	e.start(remoteConfig("remote", r.url))
	ctx := testenv.Context(t)

	t.Run("every request to the server carries the configured header", func(t *testing.T) {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, tok := range r.tokens {
			if tok != "Bearer s3cret" {
				t.Fatalf("a request carried Authorization %q", tok)
			}
		}
		if len(r.tokens) == 0 {
			t.Fatal("no request reached the server")
		}
	})
	t.Run("the server's tools are the tool's methods", func(t *testing.T) {
		entry := e.view.Snapshot().RawTool("remote")
		if entry.Method("echo") == nil || entry.Method("process_pid") == nil || entry.Method("crash") != nil {
			t.Errorf("methods %+v", entry.Tool.Methods)
		}
		if !entry.Tool.Capabilities.Resources {
			t.Errorf("capabilities %+v", entry.Tool.Capabilities)
		}
	})
	t.Run("a call answers with the structured result", func(t *testing.T) {
		res := e.result(t, ctx, "remote", call{method: "echo", params: `{"text":"over http"}`})
		if sc, _ := json.Marshal(res["structuredContent"]); string(sc) != `{"length":9,"text":"over http"}` {
			t.Errorf("structuredContent %s", sc)
		}
	})
	t.Run("progress and log notifications reach the caller, all before the result", func(t *testing.T) {
		for _, tt := range []struct{ method, want string }{
			{"test_tool_with_progress", "progress 0/100, progress 50/100, progress 100/100"},
			{"test_tool_with_logging", `log "Tool execution started", log "Tool processing data", log "Tool execution completed"`},
		} {
			id := "req-remote-" + tt.method
			notes := e.notes(t, "remote", id)
			e.result(t, ctx, "remote", call{method: tt.method, params: `{}`, progress: true, requestID: id})
			var got []string
			for _, n := range notes() {
				if n.Kind == wire.KindLog {
					got = append(got, "log "+string(n.Data))
				} else {
					got = append(got, "progress "+jsonNumber(n.Progress)+"/"+jsonNumber(n.Total))
				}
			}
			if strings.Join(got, ", ") != tt.want {
				t.Errorf("%s: notifications %v", tt.method, got)
			}
		}
	})
	t.Run("a cancelled call is cancelled on the server", func(t *testing.T) {
		// The server's sleep says it started (a progress notification) before the call
		// is cancelled.
		started, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress("remote", "req-remote-sleep"))
		if err != nil {
			t.Fatal(err)
		}
		defer started.Unsubscribe()
		cctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			_, err := e.do(cctx, "remote", call{method: "sleep", params: `{}`, progress: true, requestID: "req-remote-sleep"})
			errc <- err
		}()
		if _, err := started.NextMsg(testenv.Patience); err != nil {
			t.Fatalf("the sleep did not start on the server: %v", err)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("the call returned %v", err)
		}
		select {
		case tool := <-r.cancelled:
			if tool != "sleep" {
				t.Errorf("cancelled %s", tool)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("the server did not see the cancellation")
		}
	})
	t.Run("a resource read and a prompt get", func(t *testing.T) {
		rr, err := e.askMCP(ctx, "remote", "resources/read", `{"uri":"test://static-binary"}`, "")
		if err != nil || !strings.Contains(string(rr.Data), `"mimeType":"image/png"`) || !strings.Contains(string(rr.Data), `"blob":"iVBOR`) {
			t.Errorf("read: %v %s", err, data(rr))
		}
		pr, err := e.askMCP(ctx, "remote", "prompts/get", `{"name":"test_simple_prompt"}`, "")
		if err != nil || !strings.Contains(string(pr.Data), mcpfixture.SimplePrompt) {
			t.Errorf("prompt: %v %s", err, data(pr))
		}
	})
	t.Run("a subscribed session hears of a resource's update", func(t *testing.T) {
		session := "sess-watch"
		if _, err := e.store.CreateSession(ctx, registry.Session{ID: session, Account: account, Tool: "remote"}); err != nil {
			t.Fatal(err)
		}
		out, err := e.nc.SubscribeSync(wire.DefaultSubjects.SessionOut("remote", session))
		if err != nil {
			t.Fatal(err)
		}
		defer out.Unsubscribe()
		if _, err := e.askMCP(ctx, "remote", "resources/subscribe", `{"uri":"`+mcpfixture.WatchedResource+`"}`, session); err != nil {
			t.Fatal(err)
		}
		e.result(t, ctx, "remote", call{method: "update_resource", params: `{"uri":"` + mcpfixture.WatchedResource + `"}`})
		msg, err := out.NextMsg(testenv.Patience)
		if err != nil {
			t.Fatalf("no notification: %v", err)
		}
		if got := string(msg.Data); got != `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched-resource"}}` {
			t.Errorf("notification %s", got)
		}
	})
	t.Run("a server's new tool becomes a method", func(t *testing.T) {
		e.result(t, ctx, "remote", call{method: "toggle_extra", params: `{}`})
		testenv.WaitFor(t, "the record has the extra method", func() bool {
			return e.view.Snapshot().RawTool("remote").Method(mcpfixture.ExtraToolName) != nil
		})
		for range 2 { // both sessions know it: the server is one
			if res := e.result(t, ctx, "remote", call{method: mcpfixture.ExtraToolName, params: `{}`}); texts(res)[0] != "extra here" {
				t.Errorf("extra: %v", res)
			}
		}
		e.result(t, ctx, "remote", call{method: "toggle_extra", params: `{}`})
		testenv.WaitFor(t, "the record lost the extra method", func() bool {
			return e.view.Snapshot().RawTool("remote").Method(mcpfixture.ExtraToolName) == nil
		})
	})
}

func TestRemoteLegacySSEServer(t *testing.T) {
	e := newEnv(t)
	r := serveRemote(t, func(s *mcp.Server) http.Handler {
		return mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	})
	e.start(remoteConfig("legacy", r.url))
	ctx := testenv.Context(t)
	if !e.logs.has("using HTTP+SSE") {
		t.Error("no word of the fallback to HTTP+SSE in the log")
	}
	res := e.result(t, ctx, "legacy", call{method: "test_simple_text", params: `{}`})
	if got := texts(res); len(got) != 1 || got[0] != mcpfixture.SimpleText {
		t.Errorf("texts %q", got)
	}
	id := "req-legacy-progress"
	notes := e.notes(t, "legacy", id)
	e.result(t, ctx, "legacy", call{method: "test_tool_with_progress", params: `{}`, progress: true, requestID: id})
	if n := notes(); len(n) != 3 {
		t.Errorf("%d progress notifications, want 3", len(n))
	}
}

func jsonNumber(f float64) string {
	b, _ := json.Marshal(f)
	return string(b)
}

func data(r *wire.Reply) []byte {
	if r == nil {
		return nil
	}
	return r.Data
}

// TestRemoteSessions checks which client sessions get an upstream session of their
// own from a remote server: every one when the server names sessions, none when it
// keeps no session state (stateless Streamable HTTP), whose calls share the pool.
func TestRemoteSessions(t *testing.T) {
	for _, tt := range []struct {
		name, tool string
		stateless  bool
		setting    string
		clients    int // client sessions, each calling once
		want       int // upstream sessions held for them
	}{
		{"a server with sessions", "remote-own", false, mcpbridge.UpstreamAuto, 1, 1},
		{"a stateless server", "remote-shared", true, mcpbridge.UpstreamAuto, 1, 0},
		{"a server with sessions, shared", "remote-pool", false, mcpbridge.UpstreamShared, 8, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			r := serveRemote(t, func(s *mcp.Server) http.Handler {
				return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: tt.stateless})
			})
			cfg := remoteConfig(tt.tool, r.url)
			cfg.UpstreamSessions = tt.setting
			b := e.start(cfg)
			ctx := testenv.Context(t)
			for i := range tt.clients {
				text := fmt.Sprintf("hi %d", i)
				res := e.result(t, ctx, tt.tool, call{method: "echo", params: `{"text":"` + text + `"}`, session: fmt.Sprintf("sess-remote-%d", i)})
				if got := texts(res); len(got) != 1 || !strings.Contains(got[0], text) {
					t.Fatalf("echo answered %v", res)
				}
			}
			if held := b.ClientSessions(); len(held) != tt.want {
				t.Fatalf("upstream sessions held for client sessions %v; want %d", held, tt.want)
			}
			r.mu.Lock()
			seen := len(r.sessions)
			r.mu.Unlock()
			if !tt.stateless && seen > cfg.Sessions+tt.want {
				t.Fatalf("the server saw %d sessions for %d client sessions, want at most the pool's %d and %d of clients", seen, tt.clients, cfg.Sessions, tt.want)
			}
		})
	}
}
