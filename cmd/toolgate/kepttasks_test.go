package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestTasksOfAServerThatKnowsNothingOfThem: a bridged server without tasks (the
// fixture's tools, NoTasks) gets tasks from the gateway through its link. At
// 2026-07-28 a tool that asks its client for input (an input_required result of its
// own) makes a task that waits in input_required; the client's answers, given
// through tasks/update in parts, reach the tool in its retry, and the task completes
// with its result inline. At 2025-11-25 a task-augmented tools/call is a task whose
// tasks/result is the tool's result.
func TestTasksOfAServerThatKnowsNothingOfThem(t *testing.T) {
	server := mcpfixture.New(mcpfixture.Options{NoTasks: true})
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(upstream.Close)
	_, link, _ := bridgedLinkIn(t, t.TempDir(), "jobs", "--url", upstream.URL, "--task-support", "failing_job=required,greet=forbidden")

	post := func(header map[string]string, body string) map[string]json.RawMessage {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		data := string(b)
		for _, line := range strings.Split(data, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"id"`) {
				data = d
			}
		}
		var m struct {
			Result map[string]json.RawMessage `json:"result"`
		}
		if json.Unmarshal([]byte(data), &m) != nil || m.Result == nil {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, b)
		}
		return m.Result
	}
	rpcErr := func(header map[string]string, body string) int64 {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m struct {
			Error struct {
				Code int64 `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return m.Error.Code
	}
	str := func(raw json.RawMessage) string {
		var s string
		_ = json.Unmarshal(raw, &s)
		return s
	}
	call2026 := func(method, name, params string) map[string]json.RawMessage {
		t.Helper()
		return post(map[string]string{"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name},
			`{"jsonrpc":"2.0","id":1,"method":"`+method+`","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
				`"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}},`+params+`}}`)
	}

	t.Run("a task that asks for input, answered in parts", func(t *testing.T) {
		created := call2026("tools/call", "multi_input", `"name":"multi_input","arguments":{}`)
		id := str(created["taskId"])
		if str(created["resultType"]) != "task" || id == "" {
			t.Fatalf("tools/call: %v", created)
		}
		get := func() map[string]json.RawMessage { return call2026("tasks/get", id, `"taskId":"`+id+`"`) }
		var got map[string]json.RawMessage
		testenv.WaitFor(t, "the task asks", func() bool {
			got = get()
			return str(got["status"]) == "input_required"
		})
		if !strings.Contains(string(got["inputRequests"]), `"first"`) || !strings.Contains(string(got["inputRequests"]), `"second"`) {
			t.Fatalf("input requests: %s", got["inputRequests"])
		}
		call2026("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"first":{"action":"accept","content":{"name":"Ada"}}}`)
		got = get()
		if str(got["status"]) != "input_required" || strings.Contains(string(got["inputRequests"]), `"first"`) || !strings.Contains(string(got["inputRequests"]), `"second"`) {
			t.Fatalf("after a partial answer: %v", got)
		}
		call2026("tasks/update", id, `"taskId":"`+id+`","inputResponses":{"second":{"action":"accept","content":{"name":"Grace"}}}`)
		testenv.WaitFor(t, "the task completes", func() bool {
			got = get()
			return str(got["status"]) == "completed"
		})
		if !strings.Contains(string(got["result"]), "first=Ada second=Grace") {
			t.Fatalf("the result: %s", got["result"])
		}
	})

	t.Run("a protocol error fails the task", func(t *testing.T) {
		created := call2026("tools/call", "protocol_error_job", `"name":"protocol_error_job","arguments":{}`)
		id := str(created["taskId"])
		var got map[string]json.RawMessage
		testenv.WaitFor(t, "the task ends", func() bool {
			got = call2026("tasks/get", id, `"taskId":"`+id+`"`)
			return str(got["status"]) != "working"
		})
		if str(got["status"]) != "failed" || !strings.Contains(string(got["error"]), "broke down") || len(got["result"]) != 0 {
			t.Fatalf("the failed task: %v", got)
		}
	})

	t.Run("a 2025-11-25 task", func(t *testing.T) {
		init := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
		req, _ := http.NewRequest(http.MethodPost, link, strings.NewReader(init))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := map[string]string{"Mcp-Session-Id": resp.Header.Get("Mcp-Session-Id"), "Mcp-Protocol-Version": "2025-11-25"}
		created := post(h, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":0.5,"label":"x"},"task":{"ttl":60000}}}`)
		var task struct {
			TaskID string `json:"taskId"`
		}
		if json.Unmarshal(created["task"], &task) != nil || task.TaskID == "" {
			t.Fatalf("CreateTaskResult: %v", created)
		}
		res := post(h, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+task.TaskID+`"}}`)
		if !strings.Contains(string(res["content"]), "computed x") {
			t.Fatalf("tasks/result: %v", res)
		}
		// A tool whose tasks are forbidden answers a task-augmented call as any call.
		res = post(h, `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"greet","arguments":{"name":"Ada"},"task":{}}}`)
		if _, isTask := res["task"]; isTask || !strings.Contains(string(res["content"]), "Hello, Ada!") {
			t.Fatalf("a forbidden task: %v", res)
		}
		// One whose tasks are required is refused without params.task.
		if x := rpcErr(h, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"failing_job","arguments":{}}}`); x != -32601 {
			t.Fatalf("a required task called without params.task: %d, want -32601", x)
		}
	})
}
