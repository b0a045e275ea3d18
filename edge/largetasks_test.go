package edge_test

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestLargeTaskResult: a 2025-11-25 task of echo given 10 MiB ends with a result past
// one message, kept in the answers' object store, and tasks/result through another
// edge gives it whole (the echoed object sha256 compared).
func TestLargeTaskResult(t *testing.T) {
	e := newEnv(t, withMCP())
	other := newEnv(t, withMCP(), onServer(e.srv.ClientURL()))
	e.runEcho(t)
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	other.knowsKey(t, key)
	// 10 MiB parsed and stored on the way in, and read whole on the way out, under
	// -race on a loaded machine: more than the harness's 30 s a request.
	e.client.Timeout, other.client.Timeout = 4*testenv.Patience, 4*testenv.Patience
	rpc := func(on *env, session, body string) result {
		t.Helper()
		return on.do(http.MethodPost, "/tools/echo/mcp", body, "SERVICE_API_KEY", key, "Accept", "application/json, text/event-stream",
			"Content-Type", "application/json", "Mcp-Protocol-Version", "2025-11-25", "Mcp-Session-Id", session)
	}
	init := rpc(e, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := init.header.Get("Mcp-Session-Id")
	if init.status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", init.status, init.body)
	}
	rpc(e, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	args := jsonBody(t, 10<<20)
	created := rpc(e, session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":`+string(args)+`,"task":{}}}`)
	var task struct {
		Result struct {
			Task struct {
				TaskID string `json:"taskId"`
			} `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(eventData(created.body), &task); err != nil || task.Result.Task.TaskID == "" {
		t.Fatalf("tools/call: %d %.300s", created.status, created.body)
	}
	got := rpc(other, session, `{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"`+task.Result.Task.TaskID+`"}}`)
	var res struct {
		Result struct {
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		} `json:"result"`
	}
	if err := json.Unmarshal(eventData(got.body), &res); err != nil || res.Result.IsError {
		t.Fatalf("tasks/result: %d %v %.300s", got.status, err, got.body)
	}
	if sha256.Sum256(res.Result.StructuredContent) != sha256.Sum256(args) {
		t.Fatalf("tasks/result: %d bytes of structured content, not the %d sent: %.300s", len(res.Result.StructuredContent), len(args), got.body)
	}
}
