package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestTasksBelongToTheirKey: an MCP task of a tool that knows nothing of tasks is
// the record of a call that outlives its request, and reads only for the key that
// made it: through MCP (tasks/get, tasks/cancel, subscriptions/listen) another key of the same account and
// a key of another account get -32602, through HTTP (GET and DELETE /calls/{id})
// 404; the key that made it reads it both ways.
func TestTasksBelongToTheirKey(t *testing.T) {
	e := newEnv(t, withMCP())
	mine := e.account("acme", registry.Limits{})
	sibling := e.key("acme", nil)
	stranger := e.account("globex", registry.Limits{})
	sw := e.slowWorker(t, "slowpoke")
	e.connect("acme", "slowpoke")
	e.connect("globex", "slowpoke")

	mcp := func(key, method, name, params string) result {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
			`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},` + params + `}}`
		return e.do(http.MethodPost, "/tools/slowpoke/mcp", body, "SERVICE_API_KEY", key, "Accept", "application/json, text/event-stream",
			"Content-Type", "application/json", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name)
	}
	created := mcp(mine, "tools/call", "slow", `"name":"slow","arguments":{}`)
	var task struct {
		Result struct {
			ResultType string `json:"resultType"`
			TaskID     string `json:"taskId"`
		} `json:"result"`
	}
	if err := json.Unmarshal(eventData(created.body), &task); err != nil || task.Result.ResultType != "task" || task.Result.TaskID == "" {
		t.Fatalf("tools/call: %d %s", created.status, created.body)
	}
	id := task.Result.TaskID
	receive(t, sw.started, "the call starts")

	if r := mcp(mine, "tasks/get", id, `"taskId":"`+id+`"`); r.status != http.StatusOK || !strings.Contains(string(r.body), `"status":"working"`) {
		t.Fatalf("the maker's tasks/get: %d %s", r.status, r.body)
	}
	if r := e.do(http.MethodGet, "/calls/"+id, "", "SERVICE_API_KEY", mine); r.status != http.StatusAccepted {
		t.Fatalf("the maker's GET /calls: %d %s", r.status, r.body)
	}
	for who, key := range map[string]string{"another key of the account": sibling, "another account's key": stranger} {
		for _, m := range []string{"tasks/get", "tasks/cancel"} {
			if r := mcp(key, m, id, `"taskId":"`+id+`"`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"code":-32602`) {
				t.Fatalf("%s's %s: %d %s, want 400 and -32602", who, m, r.status, r.body)
			}
		}
		// Nor may it follow the task's status.
		if r := mcp(key, "subscriptions/listen", "", `"notifications":{"taskIds":["`+id+`"]}`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `"code":-32602`) {
			t.Fatalf("%s's subscriptions/listen of the task: %d %s, want 400 and -32602", who, r.status, r.body)
		}
		for _, m := range []string{http.MethodGet, http.MethodDelete} {
			if r := e.do(m, "/calls/"+id, "", "SERVICE_API_KEY", key); r.status != http.StatusNotFound {
				t.Fatalf("%s's %s /calls: %d %s, want 404", who, m, r.status, r.body)
			}
		}
	}
	// Nothing they sent changed it: it still works, and its maker cancels it.
	if r := mcp(mine, "tasks/cancel", id, `"taskId":"`+id+`"`); r.status != http.StatusOK {
		t.Fatalf("the maker's tasks/cancel: %d %s", r.status, r.body)
	}
	receive(t, sw.cancelled, "the worker hears the cancel")
	testenv.WaitFor(t, "the task reads cancelled", func() bool {
		r := mcp(mine, "tasks/get", id, `"taskId":"`+id+`"`)
		return strings.Contains(string(r.body), `"status":"cancelled"`)
	})
}

// eventData is the JSON of a response: the body, or the data of a stream's last
// event.
func eventData(body []byte) []byte {
	out := body
	for _, line := range strings.Split(string(body), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok && strings.TrimSpace(d) != "" {
			out = []byte(d)
		}
	}
	return out
}
