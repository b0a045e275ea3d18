package sse_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// taskCall2026 sends a 2026-07-28 request of a client that declares the tasks
// extension, naming name in Mcp-Name when it is not "".
func taskCall2026(t *testing.T, url, method, name, params string) exchange {
	t.Helper()
	h, body := rev20260728(method, params)
	body = withTasksExtension(body)
	if name != "" {
		h["Mcp-Name"] = name
	}
	return do(t, "POST", url, h, body)
}

// withTasksExtension is a 2026-07-28 request body whose client declares the tasks
// extension.
func withTasksExtension(body string) string {
	return strings.Replace(body, `"io.modelcontextprotocol/clientCapabilities":{}`,
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}`, 1)
}

// rpcResult reads the result of a JSON response, or of a stream's last event.
func rpcResult(t *testing.T, x exchange) map[string]json.RawMessage {
	t.Helper()
	body := x.body
	if strings.HasPrefix(x.header.Get("Content-Type"), "text/event-stream") {
		for _, line := range strings.Split(string(body), "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"result"`) {
				body = []byte(d)
			}
		}
	}
	var m struct {
		Result map[string]json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &m); err != nil || m.Result == nil {
		t.Fatalf("no result: %d %s", x.status, x.body)
	}
	return m.Result
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

// TestKeptTasksOfTheExtension: a tool that knows nothing of tasks (kit) gets tasks
// of the 2026-07-28 extension from the gateway: a call longer than
// --mcp-stream-after answers with a task, tasks/get on another edge reads it and then
// its result inline, a short call answers at once, tasks/cancel stops a running one,
// and another account's tasks/get of its id is an unknown task (-32602).
func TestKeptTasksOfTheExtension(t *testing.T) {
	e := newEnv(t)
	a, b := e.startEdge(t, 0, nil), e.startEdge(t, 0, nil)
	urlA, urlB := e.streamableURL(a.url), e.streamableURL(b.url)

	disc := rpcResult(t, taskCall2026(t, urlA, "server/discover", "", ""))
	if !strings.Contains(string(disc["capabilities"]), `"io.modelcontextprotocol/tasks"`) {
		t.Fatalf("server/discover declares no tasks extension: %s", disc["capabilities"])
	}

	quick := rpcResult(t, taskCall2026(t, urlA, "tools/call", "echo", `"name":"echo","arguments":{"text":"hi"}`))
	if str(quick["resultType"]) != "complete" || !strings.Contains(string(quick["content"]), "hi") {
		t.Fatalf("a short call: %v", quick)
	}

	created := rpcResult(t, taskCall2026(t, urlA, "tools/call", "sleep", `"name":"sleep","arguments":{"ms":1500}`))
	id := str(created["taskId"])
	if str(created["resultType"]) != "task" || id == "" || str(created["status"]) != "working" || len(created["ttlMs"]) == 0 {
		t.Fatalf("a long call: %v", created)
	}
	got := rpcResult(t, taskCall2026(t, urlB, "tasks/get", id, `"taskId":"`+id+`"`))
	if str(got["taskId"]) != id || str(got["status"]) != "working" || str(got["resultType"]) != "complete" {
		t.Fatalf("tasks/get while it works: %v", got)
	}

	otherURL := b.url + "/mcp/" + e.otherAccountLink(t)
	testenv.WaitFor(t, "the edge knows the other link", func() bool {
		return taskCall2026(t, otherURL, "server/discover", "", "").status == http.StatusOK
	})
	x := taskCall2026(t, otherURL, "tasks/get", id, `"taskId":"`+id+`"`)
	if code, _ := x.rpcError(); code != -32602 {
		t.Fatalf("another account's tasks/get: %d %s, want -32602", x.status, x.body)
	}

	testenv.WaitFor(t, "the task completes", func() bool {
		got = rpcResult(t, taskCall2026(t, urlB, "tasks/get", id, `"taskId":"`+id+`"`))
		return str(got["status"]) == "completed"
	})
	if !strings.Contains(string(got["result"]), "slept") && !strings.Contains(string(got["result"]), "content") {
		t.Fatalf("the completed task's result: %v", got)
	}

	created = rpcResult(t, taskCall2026(t, urlA, "tools/call", "wait", `"name":"wait","arguments":{}`))
	id = str(created["taskId"])
	ack := rpcResult(t, taskCall2026(t, urlB, "tasks/cancel", id, `"taskId":"`+id+`"`))
	if str(ack["resultType"]) != "complete" || len(ack["taskId"]) != 0 {
		t.Fatalf("tasks/cancel: %v", ack)
	}
	got = rpcResult(t, taskCall2026(t, urlA, "tasks/get", id, `"taskId":"`+id+`"`))
	if str(got["status"]) != "cancelled" {
		t.Fatalf("after tasks/cancel: %v", got)
	}
	select { // the worker hears the cancel
	case <-e.worker.cancelled:
	case <-time.After(testenv.Patience):
		t.Fatal("the worker never saw the cancel")
	}
	// Cancelling a task that ended is acknowledged the same.
	rpcResult(t, taskCall2026(t, urlB, "tasks/cancel", id, `"taskId":"`+id+`"`))

	created = rpcResult(t, taskCall2026(t, urlA, "tools/call", "fail", `"name":"fail","arguments":{}`))
	if str(created["resultType"]) == "task" {
		id = str(created["taskId"])
		testenv.WaitFor(t, "the failing task ends", func() bool {
			got = rpcResult(t, taskCall2026(t, urlB, "tasks/get", id, `"taskId":"`+id+`"`))
			return str(got["status"]) != "working"
		})
		created = map[string]json.RawMessage{}
		_ = json.Unmarshal(got["result"], &created)
	}
	if !strings.Contains(string(created["isError"]), "true") {
		// A tool's own failure is a completed task whose result says isError.
		t.Fatalf("a tool that failed: %v", created)
	}
}

// TestKeptTasksOf20251125: a session of 2025-11-25 gets the tasks capability for a
// tool that knows nothing of tasks, lists its tools with execution.taskSupport, and a
// task-augmented tools/call is a task that tasks/get, tasks/result, tasks/list and
// tasks/cancel read, on any edge; another account's link knows none of it.
func TestKeptTasksOf20251125(t *testing.T) {
	e := newEnv(t)
	a, b := e.startEdge(t, 0, nil), e.startEdge(t, 0, nil)
	urlA, urlB := e.streamableURL(a.url), e.streamableURL(b.url)
	x := do(t, "POST", urlA, map[string]string{"Accept": "application/json, text/event-stream"}, initialize)
	if !strings.Contains(string(rpcResult(t, x)["capabilities"]), `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) {
		t.Fatalf("initialize declares no tasks: %s", x.body)
	}
	h := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": x.header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	rpc := func(url, method, params string) exchange {
		return do(t, "POST", url, h, `{"jsonrpc":"2.0","id":3,"method":"`+method+`","params":`+params+`}`)
	}
	if list := rpc(urlA, "tools/list", `{}`); !strings.Contains(string(list.body), `"execution":{"taskSupport":"optional"}`) {
		t.Fatalf("tools/list: %s", list.body)
	}

	// The session's standalone stream, on the other edge, hears when the task ends.
	statusSeen := make(chan string, 4)
	go func() {
		req, _ := http.NewRequestWithContext(testenv.Context(t), http.MethodGet, urlB, nil)
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Mcp-Session-Id", h["Mcp-Session-Id"])
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		defer resp.Body.Close()
		lines := bufio.NewScanner(resp.Body)
		for lines.Scan() {
			if strings.Contains(lines.Text(), "notifications/tasks/status") {
				statusSeen <- lines.Text()
			}
		}
	}()
	created := rpcResult(t, rpc(urlA, "tools/call", `{"name":"sleep","arguments":{"ms":800},"task":{"ttl":60000}}`))
	var task struct {
		TaskID string `json:"taskId"`
		Status string `json:"status"`
		TTL    int64  `json:"ttl"`
	}
	if err := json.Unmarshal(created["task"], &task); err != nil || task.TaskID == "" || task.Status != "working" || task.TTL <= 0 {
		t.Fatalf("CreateTaskResult: %v", created)
	}
	got := rpcResult(t, rpc(urlB, "tasks/get", `{"taskId":"`+task.TaskID+`"}`))
	if str(got["taskId"]) != task.TaskID {
		t.Fatalf("tasks/get: %v", got)
	}
	listed := rpcResult(t, rpc(urlB, "tasks/list", `{}`))
	if !strings.Contains(string(listed["tasks"]), task.TaskID) {
		t.Fatalf("tasks/list: %v", listed)
	}
	res := rpcResult(t, rpc(urlB, "tasks/result", `{"taskId":"`+task.TaskID+`"}`)) // waits for the end
	if !strings.Contains(string(res["content"]), "text") || !strings.Contains(string(res["_meta"]), task.TaskID) {
		t.Fatalf("tasks/result: %v", res)
	}
	select {
	case line := <-statusSeen:
		if !strings.Contains(line, task.TaskID) || !strings.Contains(line, `"status":"completed"`) {
			t.Fatalf("notifications/tasks/status: %s", line)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the session's stream never heard notifications/tasks/status")
	}
	if x := rpc(urlA, "tasks/cancel", `{"taskId":"`+task.TaskID+`"}`); func() bool { c, _ := x.rpcError(); return c != -32602 }() {
		t.Fatalf("tasks/cancel of an ended task: %s, want -32602", x.body)
	}

	created = rpcResult(t, rpc(urlA, "tools/call", `{"name":"wait","arguments":{},"task":{}}`))
	_ = json.Unmarshal(created["task"], &task)
	cancelled := rpcResult(t, rpc(urlB, "tasks/cancel", `{"taskId":"`+task.TaskID+`"}`))
	if str(cancelled["status"]) != "cancelled" {
		t.Fatalf("tasks/cancel: %v", cancelled)
	}

	otherURL := b.url + "/mcp/" + e.otherAccountLink(t)
	testenv.WaitFor(t, "the edge knows the other link", func() bool {
		return do(t, "POST", otherURL, map[string]string{"Accept": "application/json, text/event-stream"}, initialize).status == http.StatusOK
	})
	ox := do(t, "POST", otherURL, map[string]string{"Accept": "application/json, text/event-stream"}, initialize)
	oh := map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": ox.header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
	for _, m := range []string{"tasks/get", "tasks/result", "tasks/cancel"} {
		x := do(t, "POST", otherURL, oh, `{"jsonrpc":"2.0","id":4,"method":"`+m+`","params":{"taskId":"`+task.TaskID+`"}}`)
		if code, _ := x.rpcError(); code != -32602 {
			t.Fatalf("another account's %s: %s, want -32602", m, x.body)
		}
	}
	ol := rpcResult(t, do(t, "POST", otherURL, oh, `{"jsonrpc":"2.0","id":5,"method":"tasks/list","params":{}}`))
	if string(ol["tasks"]) != "[]" {
		t.Fatalf("another account's tasks/list: %s", ol["tasks"])
	}
}

// otherAccountLink is a link of another account to the same tool.
func (e *env) otherAccountLink(t *testing.T) string {
	t.Helper()
	ctx := testenv.Context(t)
	if _, err := e.store.CreateAccount(ctx, registry.Account{ID: "globex", Name: "Globex"}); err != nil {
		t.Fatal(err)
	}
	signer := testenv.LinkSigner(t)
	conn, err := e.store.Connect(ctx, "globex", testTool, signer)
	if err != nil {
		t.Fatal(err)
	}
	return signer.Token("globex", testTool, conn.LinkNonce)
}

// TestKeptTasksOutliveTheirEdge: the edge running a task dies (its connection cut,
// nothing recorded); the tool's answer, sent on a subject an edge stores, is found by
// the next tasks/get, on another edge, which records the task's end from it.
func TestKeptTasksOutliveTheirEdge(t *testing.T) {
	e := newEnv(t)
	a, b := e.startEdge(t, 0, nil), e.startEdge(t, 0, nil)
	testenv.Asks(t, b.nc, wire.DefaultSubjects) // as every edge runs it: it stores the answer
	created := rpcResult(t, taskCall2026(t, e.streamableURL(a.url), "tools/call", "sleep", `"name":"sleep","arguments":{"ms":1500}`))
	id := str(created["taskId"])
	if id == "" {
		t.Fatalf("tools/call: %v", created)
	}
	a.kill()
	var got map[string]json.RawMessage
	testenv.WaitFor(t, "another edge finishes the task", func() bool {
		got = rpcResult(t, taskCall2026(t, e.streamableURL(b.url), "tasks/get", id, `"taskId":"`+id+`"`))
		return str(got["status"]) != "working"
	})
	if str(got["status"]) != "completed" || !strings.Contains(string(got["result"]), "content") {
		t.Fatalf("the task after its edge died: %v", got)
	}
}
