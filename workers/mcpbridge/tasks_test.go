package mcpbridge_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// eventRetention is how long the edges' event log keeps events: less than the
// fixture keeps its tasks, so that a task's ttlMs is bounded by it.
const eventRetention = 2 * time.Minute

// linkEdge runs an edge's MCP server (package sse) on a connection, view and gateway
// of its own, on a real TCP listener, the link token in the path its only credential;
// it returns the edge's base URL.
func (e *env) linkEdge(t *testing.T) string {
	t.Helper()
	nc := testenv.Conn(t, e.url)
	store := testenv.Store(t, nc, 1)
	view := testenv.View(t, store)
	gw, err := gateway.New(nc, view, gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := sse.DefaultConfig()
	cfg.EventRetention = eventRetention
	srv, err := sse.New(testenv.Context(t), gw, store, cfg, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := view.Snapshot().AuthenticateLink(strings.TrimPrefix(r.URL.Path, "/mcp/"))
		if err != nil {
			http.Error(w, "unknown link", http.StatusUnauthorized)
			return
		}
		srv.ServeStreamable(w, r, p, p.Tool)
	})}
	go hs.Serve(ln)
	t.Cleanup(func() {
		_ = srv.Drain(testenv.Context(t))
		_ = hs.Close()
	})
	return "http://" + ln.Addr().String()
}

// link connects account to tool and returns the link's token.
func (e *env) link(t *testing.T, acct, tool string) string {
	t.Helper()
	ctx := testenv.Context(t)
	if acct != account {
		if _, err := e.store.CreateAccount(ctx, registry.Account{ID: acct, Name: acct}); err != nil && !errors.Is(err, registry.ErrExists) {
			t.Fatal(err)
		}
	}
	signer := testenv.LinkSigner(t)
	conn, err := e.store.Connect(ctx, acct, tool, signer)
	if err != nil {
		t.Fatal(err)
	}
	return signer.Token(acct, tool, conn.LinkNonce)
}

// modernClient speaks 2026-07-28 JSON-RPC over HTTP to a link, as the conformance
// suite does: every request with its _meta and the headers that mirror it.
type modernClient struct {
	t    *testing.T
	caps map[string]any // the capabilities each request declares
}

var withTasks = map[string]any{"elicitation": map[string]any{}, "extensions": map[string]any{mcpfixture.TasksExtension: map[string]any{}}}

// rpc sends method to url and returns its result, or its JSON-RPC error.
func (c modernClient) rpc(url, method string, params map[string]any) (map[string]any, *jsonrpc.Error) {
	c.t.Helper()
	p := map[string]any{}
	for k, v := range params {
		p[k] = v
	}
	p["_meta"] = map[string]any{
		mcp.MetaKeyProtocolVersion:    mcpbridge.StatelessRevision,
		mcp.MetaKeyClientInfo:         map[string]any{"name": "tasks-test", "version": "1"},
		mcp.MetaKeyClientCapabilities: c.caps,
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": p})
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", mcpbridge.StatelessRevision)
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"name", "taskId"} {
		if v, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var msg struct {
		Result map[string]any `json:"result"`
		Error  *jsonrpc.Error `json:"error"`
	}
	if err := json.Unmarshal(data, &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
		c.t.Fatalf("%s: %s %s", method, resp.Status, data)
	}
	return msg.Result, msg.Error
}

// ok is rpc that fails the test on an error.
func (c modernClient) ok(url, method string, params map[string]any) map[string]any {
	c.t.Helper()
	res, rerr := c.rpc(url, method, params)
	if rerr != nil {
		c.t.Fatalf("%s %v: %d %s", method, params, rerr.Code, rerr.Message)
	}
	return res
}

// refused is rpc that wants the error code.
func (c modernClient) refused(url, method string, params map[string]any, code int64) {
	c.t.Helper()
	res, rerr := c.rpc(url, method, params)
	if rerr == nil || rerr.Code != code {
		c.t.Fatalf("%s %v: want error %d, got %v %v", method, params, code, res, rerr)
	}
}

// until polls tasks/get on the urls in turn until the task's status is one of want.
func (c modernClient) until(urls []string, id string, want ...string) map[string]any {
	c.t.Helper()
	var task map[string]any
	i := 0
	testenv.WaitFor(c.t, fmt.Sprintf("task %s %v", id, want), func() bool {
		task = c.ok(urls[i%len(urls)], "tasks/get", map[string]any{"taskId": id})
		i++
		if task["taskId"] != id {
			c.t.Fatalf("tasks/get of %s answered for task %v", id, task["taskId"])
		}
		for _, w := range want {
			if task["status"] == w {
				return true
			}
		}
		return false
	})
	return task
}

// resultText is the first text of a completed task's result.
func resultText(task map[string]any) string {
	res, _ := task["result"].(map[string]any)
	if t := texts(res); len(t) > 0 {
		return t[0]
	}
	return ""
}

// TestTasksExtensionThroughTheLink: a server that declares the tasks extension
// (2026-07-28), bridged as a stdio child or over HTTP, answers a client's calls through
// the link with tasks, which the client follows, answers and cancels through any
// edge: the task lives with the server, the edges keep only a record of it in the
// event log, and the client sees task ids of the link's own. The extension is gated
// on the client declaring it; a task id of another account, or the server's own, names
// nothing.
func TestTasksExtensionThroughTheLink(t *testing.T) {
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func() func(*http.Request) *mcp.Server {
		s := mcpfixture.New(mcpfixture.Options{})
		return func(*http.Request) *mcp.Server { return s }
	}(), &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(upstream.Close)
	for _, tt := range []struct {
		name string
		cfg  func() mcpbridge.Config
	}{
		{"stdio", func() mcpbridge.Config { return stdioConfig("tasks", 1) }},
		{"url", func() mcpbridge.Config {
			cfg := mcpbridge.DefaultConfig()
			cfg.Tool, cfg.URL, cfg.Sessions = "tasks", upstream.URL, 1
			return cfg
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			token := e.link(t, account, "tasks")
			e.start(tt.cfg())
			a, b := e.linkEdge(t)+"/mcp/"+token, e.linkEdge(t)+"/mcp/"+token
			edges := []string{a, b}
			c := modernClient{t: t, caps: withTasks}

			caps, _ := c.ok(b, "server/discover", nil)["capabilities"].(map[string]any)
			if ext, _ := caps["extensions"].(map[string]any); ext[mcpfixture.TasksExtension] == nil || caps["tasks"] != nil {
				t.Fatalf("the link's capabilities: %v", caps)
			}

			t.Run("a task made through one edge is followed through another", func(t *testing.T) {
				created := c.ok(a, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0.3, "label": "across"}})
				id, _ := created["taskId"].(string)
				if created["resultType"] != "task" || !strings.HasPrefix(id, "tgt1.") || created["status"] == nil {
					t.Fatalf("want a task with a task id of the link's, got %v", created)
				}
				if ttl, _ := created["ttlMs"].(float64); ttl != float64(eventRetention.Milliseconds()) || mcpfixture.TaskTTL <= eventRetention {
					t.Fatalf("ttlMs %v: the server keeps its tasks %v, the event log their records %v", created["ttlMs"], mcpfixture.TaskTTL, eventRetention)
				}
				task := c.until([]string{b}, id, "completed")
				if task["ttlMs"] != float64(eventRetention.Milliseconds()) {
					t.Fatalf("tasks/get: ttlMs %v, the event log keeps records %v", task["ttlMs"], eventRetention)
				}
				if got := resultText(task); got != "computed across after 0.3s" {
					t.Fatalf("the task's result: %q in %v", got, task)
				}
			})

			t.Run("a task's questions are answered through any edge", func(t *testing.T) {
				id := c.ok(a, "tools/call", map[string]any{"name": "multi_input", "arguments": map[string]any{}})["taskId"].(string)
				task := c.until(edges, id, "input_required")
				asked, _ := task["inputRequests"].(map[string]any)
				if len(asked) != 2 {
					t.Fatalf("want two questions, got %v", task)
				}
				ack := c.ok(b, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
					"first": map[string]any{"action": "accept", "content": map[string]any{"name": "Ada"}}}})
				if ack["resultType"] != "complete" || ack["taskId"] != nil {
					t.Fatalf("the update's acknowledgement: %v", ack)
				}
				task = c.until([]string{a}, id, "input_required")
				if left, _ := task["inputRequests"].(map[string]any); len(left) != 1 || left["second"] == nil {
					t.Fatalf("want the second question left, got %v", task)
				}
				c.ok(a, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
					"second": map[string]any{"action": "accept", "content": map[string]any{"name": "Grace"}}}})
				task = c.until(edges, id, "completed")
				if got := resultText(task); !strings.Contains(got, "Ada") || !strings.Contains(got, "Grace") {
					t.Fatalf("the task's result: %q", got)
				}
			})

			t.Run("a task cancelled through one edge is cancelled for all", func(t *testing.T) {
				id := c.ok(b, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})["taskId"].(string)
				if ack := c.ok(a, "tasks/cancel", map[string]any{"taskId": id}); ack["resultType"] != "complete" || ack["status"] != nil {
					t.Fatalf("the cancel's acknowledgement: %v", ack)
				}
				c.until([]string{b}, id, "cancelled")
			})

			t.Run("a call asks for input first, then answers with a task", func(t *testing.T) {
				first := c.ok(a, "tools/call", map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{}})
				state, _ := first["requestState"].(string)
				if first["resultType"] != "input_required" || first["taskId"] != nil {
					t.Fatalf("the first round: %v", first)
				}
				retry := map[string]any{"name": "test_tool_with_task", "arguments": map[string]any{},
					"inputResponses": map[string]any{"user_name": map[string]any{"action": "accept", "content": map[string]any{"name": "Alice"}}}}
				if state != "" {
					retry["requestState"] = state
				}
				second := c.ok(b, "tools/call", retry)
				id, _ := second["taskId"].(string)
				if second["resultType"] != "task" || second["requestState"] != nil || !strings.HasPrefix(id, "tgt1.") {
					t.Fatalf("the second round: %v", second)
				}
				if got := resultText(c.until(edges, id, "completed")); !strings.Contains(got, "Alice") {
					t.Fatalf("the task's result: %q", got)
				}
			})

			t.Run("the extension is the client's to declare, task ids the link's to make", func(t *testing.T) {
				id := c.ok(a, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})["taskId"].(string)
				defer c.ok(a, "tasks/cancel", map[string]any{"taskId": id})
				plain := modernClient{t: t, caps: map[string]any{}}
				for _, m := range []string{"tasks/get", "tasks/update", "tasks/cancel"} {
					plain.refused(b, m, map[string]any{"taskId": id, "inputResponses": map[string]any{}}, mcpfixture.CodeMissingCapability)
				}
				if res := plain.ok(a, "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 0}}); res["resultType"] != "complete" || res["taskId"] != nil {
					t.Fatalf("a client without the extension got %v", res)
				}
				// A tool that needs a task is refused to it as the server refuses it.
				_, rerr := plain.rpc(a, "tools/call", map[string]any{"name": "failing_job", "arguments": map[string]any{}})
				var data struct {
					Required struct {
						Extensions map[string]any `json:"extensions"`
					} `json:"requiredCapabilities"`
				}
				if rerr == nil || rerr.Code != mcpfixture.CodeMissingCapability || json.Unmarshal(rerr.Data, &data) != nil || data.Required.Extensions[mcpfixture.TasksExtension] == nil {
					t.Fatalf("failing_job without the extension: %v", rerr)
				}
				// The extension is a 2026-07-28 one: a session of 2025-11-25 is not offered it.
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "older", Version: "1"}, nil).Connect(testenv.Context(t),
					&mcp.StreamableClientTransport{Endpoint: a}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if ext := cs.InitializeResult().Capabilities.Extensions; ext[mcpfixture.TasksExtension] != nil {
					t.Fatalf("initialize at 2025-11-25 declares %v", ext)
				}
				for _, m := range []string{"tasks/list", "tasks/result"} {
					c.refused(b, m, map[string]any{"taskId": id}, jsonrpc.CodeMethodNotFound)
				}
				for _, bad := range []string{"made-up", "tgt1.abc.def", id + "x", strings.TrimPrefix(id, "tgt1.")} {
					c.refused(b, "tasks/get", map[string]any{"taskId": bad}, jsonrpc.CodeInvalidParams)
				}
				// Another account's link to the same tool finds nothing of this one's.
				other := e.linkEdge(t) + "/mcp/" + e.link(t, "globex", "tasks")
				testenv.WaitFor(t, "the other account's link opens", func() bool {
					resp, err := http.Post(other, "application/json", strings.NewReader(`{}`))
					if err != nil {
						return false
					}
					resp.Body.Close()
					return resp.StatusCode != http.StatusUnauthorized
				})
				for _, m := range []string{"tasks/get", "tasks/cancel"} {
					c.refused(other, m, map[string]any{"taskId": id}, jsonrpc.CodeInvalidParams)
				}
				if task := c.ok(a, "tasks/get", map[string]any{"taskId": id}); task["status"] != "working" {
					t.Fatalf("the other account's cancel reached the task: %v", task)
				}
			})
		})
	}
}

// TestTasksStayWithTheirInstance: two instances of a stdio bridge each run their own
// server process, which keeps the tasks made on it; every later request of a task
// reaches the instance that made it, whichever edge serves it. Once that instance
// has stopped, its tasks are gone, and the client is told so in its own task id's
// terms: the server's ids never reach it.
func TestTasksStayWithTheirInstance(t *testing.T) {
	e := newEnv(t)
	token := e.link(t, account, "tasks")
	first := e.start(stdioConfig("tasks", 1))
	edges := []string{e.linkEdge(t) + "/mcp/" + token, e.linkEdge(t) + "/mcp/" + token}
	c := modernClient{t: t, caps: withTasks}
	create := func(n int) []string {
		var ids []string
		for i := range n {
			ids = append(ids, c.ok(edges[i%2], "tools/call", map[string]any{"name": "slow_compute", "arguments": map[string]any{"seconds": 60}})["taskId"].(string))
		}
		return ids
	}
	onFirst := create(3) // the only instance yet
	e.start(stdioConfig("tasks", 1))
	spread := create(6) // on either
	for round := range 3 {
		for i, id := range append(onFirst, spread...) {
			if task := c.ok(edges[(i+round)%2], "tasks/get", map[string]any{"taskId": id}); task["status"] != "working" {
				t.Fatalf("task %d: %v", i, task)
			}
		}
	}

	first.cancel() // its cleanup waits for it to end
	testenv.WaitFor(t, "the first instance's tasks are gone", func() bool {
		_, rerr := c.rpc(edges[0], "tasks/get", map[string]any{"taskId": onFirst[0]})
		return rerr != nil
	})
	serverID := regexp.MustCompile(`[0-9a-f]{32}`)
	for _, id := range onFirst {
		res, rerr := c.rpc(edges[1], "tasks/get", map[string]any{"taskId": id})
		if rerr == nil || rerr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rerr.Message, id) || serverID.MatchString(rerr.Message) {
			t.Fatalf("a task of the stopped instance: %v %v", res, rerr)
		}
	}
}
