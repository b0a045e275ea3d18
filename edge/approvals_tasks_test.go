package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/registry"
)

// heldTasksEnv is an edge serving the e-mail tool, counting what it is sent, to
// accounts whose rules hold its every call: acme with the edge's expiry, brief
// with one second.
type heldTasksEnv struct {
	*env
	sends         atomic.Int64
	mine, sibling string // two keys of acme
	brief         string // a key of brief
	link          string // acme's link to the tool
}

func newHeldTasksEnv(t *testing.T) *heldTasksEnv {
	h := &heldTasksEnv{env: newEnv(t, withMCP())}
	h.serve(emailTool, func(_ string, m *nats.Msg) {
		h.sends.Add(1)
		respond(m, 0, "application/json", []byte(`{"id":"msg_1"}`))
	})
	h.mine = h.account("acme", registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "email", Method: "*"}}})
	h.sibling = h.key("acme", nil)
	h.brief = h.account("brief", registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "email", Method: "*", ExpiresIn: 1}}})
	conn := h.connect("acme", "email")
	h.link = h.url + "/mcp/" + h.signer.Token("acme", "email", conn.LinkNonce)
	h.connect("brief", "email")
	return h
}

// stateless sends one 2026-07-28 request of key's to the e-mail tool, declaring the
// tasks extension, and answers its JSON-RPC message.
func (h *heldTasksEnv) stateless(key, method, name, params string) (int, map[string]json.RawMessage) {
	h.t.Helper()
	return statelessOn(h.env, key, method, name, params)
}

// statelessOn is heldTasksEnv.stateless through edge e.
func statelessOn(h *env, key, method, name, params string) (int, map[string]json.RawMessage) {
	h.t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}},` + params + `}}`
	r := h.do(http.MethodPost, "/tools/email/mcp", body, "SERVICE_API_KEY", key, "Accept", "application/json, text/event-stream",
		"Content-Type", "application/json", "Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method, "Mcp-Name", name)
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(eventData(r.body), &msg); err != nil {
		h.t.Fatalf("%s: %d %s", method, r.status, r.body)
	}
	return r.status, msg
}

// task is a task as tasks/get or a CreateTaskResult describes it.
type heldTask struct {
	ResultType    string          `json:"resultType"`
	TaskID        string          `json:"taskId"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage"`
	Result        json.RawMessage `json:"result"`
	Error         *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func (h *heldTasksEnv) get(key, id string) heldTask {
	h.t.Helper()
	_, msg := h.stateless(key, "tasks/get", id, `"taskId":"`+id+`"`)
	var task heldTask
	if err := json.Unmarshal(msg["result"], &task); err != nil {
		h.t.Fatalf("tasks/get: %s", msg["result"])
	}
	return task
}

// pending is the one approval of account that waits, once it does.
func (h *heldTasksEnv) pending(account string) approvals.Record {
	h.t.Helper()
	var list edge.ApprovalList
	testenv.WaitFor(h.t, "the call waits for approval", func() bool {
		list = decode[edge.ApprovalList](h.t, h.admin(http.MethodGet, "/approvals?account="+account+"&decision=pending", ""))
		return len(list.Approvals) == 1
	})
	return list.Approvals[0]
}

func (h *heldTasksEnv) decide(id, decision string) {
	h.t.Helper()
	if r := h.admin(http.MethodPost, "/approvals/"+id, `{"decision":"`+decision+`"}`); r.status != http.StatusOK {
		h.t.Fatalf("%s: %d %s", decision, r.status, r.body)
	}
}

// heldTask starts a held send_email of key's at 2026-07-28 and answers its task.
func (h *heldTasksEnv) heldTask(key, to string) heldTask {
	h.t.Helper()
	_, msg := h.stateless(key, "tools/call", "send_email", `"name":"send_email","arguments":{"to":"`+to+`","subject":"hi","body":"x"}`)
	var task heldTask
	if err := json.Unmarshal(msg["result"], &task); err != nil || task.ResultType != "task" || task.TaskID == "" {
		h.t.Fatalf("a held tools/call of a client taking tasks: %s", msg)
	}
	if task.Status != "working" || !strings.Contains(task.StatusMessage, "awaiting approval") {
		h.t.Fatalf("the held call's task: %+v, want working and awaiting approval", task)
	}
	return task
}

// TestHeldCallsAsTasksOfTheExtension: a held tools/call of a 2026-07-28 client that
// declares the tasks extension is answered at once with a task that works, awaiting
// approval; tasks/get reads it so until a person decides through POST
// /admin/approvals/{id}, then the result (the e-mail sent once) or the denial's
// error; tasks/cancel withdraws its approval; another key's tasks/get of it is
// -32602; an approval nobody decides fails the task with approval_expired.
func TestHeldCallsAsTasksOfTheExtension(t *testing.T) {
	h := newHeldTasksEnv(t)

	task := h.heldTask(h.mine, "ada@example.com")
	approval := h.pending("acme")
	if got := h.get(h.mine, task.TaskID); got.Status != "working" || !strings.Contains(got.StatusMessage, approval.ID) {
		t.Fatalf("tasks/get of the held task: %+v", got)
	}
	if status, msg := h.stateless(h.sibling, "tasks/get", task.TaskID, `"taskId":"`+task.TaskID+`"`); status != http.StatusBadRequest || !strings.Contains(string(msg["error"]), `"code":-32602`) {
		t.Fatalf("another key's tasks/get: %d %s, want -32602", status, msg["error"])
	}
	if r := h.do(http.MethodGet, "/calls/"+task.TaskID, "", "SERVICE_API_KEY", h.mine); r.status != http.StatusAccepted || r.header.Get(edge.HeaderCallStatus) != "awaiting_approval" {
		t.Fatalf("GET /calls of the held task: %d %s %s", r.status, r.header.Get(edge.HeaderCallStatus), r.body)
	}
	if n := h.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls before the approval", n)
	}
	h.decide(approval.ID, "approve")
	var done heldTask
	testenv.WaitFor(t, "the approved task completes", func() bool {
		done = h.get(h.mine, task.TaskID)
		return done.Status == "completed"
	})
	if !strings.Contains(string(done.Result), "msg_1") {
		t.Fatalf("the approved task's result: %s", done.Result)
	}

	denied := h.heldTask(h.mine, "bob@example.com")
	h.decide(h.pending("acme").ID, "deny")
	testenv.WaitFor(t, "the denied task fails", func() bool {
		done = h.get(h.mine, denied.TaskID)
		return done.Status == "failed"
	})
	if done.Error == nil || done.Error.Code != -32031 || !strings.Contains(done.Error.Message, "denied") {
		t.Fatalf("the denied task's error: %+v", done.Error)
	}

	cancelled := h.heldTask(h.mine, "cy@example.com")
	withdrawn := h.pending("acme")
	if status, _ := h.stateless(h.mine, "tasks/cancel", cancelled.TaskID, `"taskId":"`+cancelled.TaskID+`"`); status != http.StatusOK {
		t.Fatalf("tasks/cancel: %d", status)
	}
	testenv.WaitFor(t, "the cancelled task's approval is withdrawn", func() bool {
		return decode[approvals.Record](t, h.admin(http.MethodGet, "/approvals/"+withdrawn.ID, "")).Decision == approvals.Withdrawn
	})
	if r := h.admin(http.MethodPost, "/approvals/"+withdrawn.ID, `{"decision":"approve"}`); r.status == http.StatusOK {
		t.Fatalf("a withdrawn approval was approved: %s", r.body)
	}
	if got := h.get(h.mine, cancelled.TaskID); got.Status != "cancelled" {
		t.Fatalf("the cancelled task: %+v", got)
	}

	expiring := h.heldTask(h.brief, "dee@example.com")
	testenv.WaitFor(t, "the undecided task fails at its approval's expiry", func() bool {
		done = h.get(h.brief, expiring.TaskID)
		return done.Status == "failed"
	})
	if done.Error == nil || done.Error.Code != -32032 {
		t.Fatalf("the expired task's error: %+v", done.Error)
	}
	if n := h.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1 (the approved one)", n)
	}
}

// TestHeldCallsAsTasksOf20251125: the TypeScript SDK's client, at 2025-11-25, calls
// a held tool as a task (params.task) and follows it as the SDK does: the task is
// created at once, working and awaiting approval, until a person approves it through
// POST /admin/approvals/{id}; the SDK then reads its result, the e-mail sent once. A
// denied task fails, and its tasks/result is the denial's JSON-RPC error (-32031); a task cancelled
// while it waits withdraws its approval.
func TestHeldCallsAsTasksOf20251125(t *testing.T) {
	h := newHeldTasksEnv(t)
	c := tsclient.HTTP(t, h.link, "2025-11-25")
	ctx := testenv.Context(t)
	type outcome struct {
		res json.RawMessage
		err error
	}
	call := func(to string) (heldTask, <-chan outcome) {
		t.Helper()
		done := make(chan outcome, 1)
		go func() {
			res, err := c.Do(ctx, map[string]any{"op": "taskCall", "name": "send_email", "args": map[string]any{"to": to, "subject": "hi", "body": "x"}})
			done <- outcome{res, err}
		}()
		ev, ok := c.WaitEvent("taskCreated", testenv.Patience)
		var task heldTask
		if !ok || json.Unmarshal([]byte(ev.Message), &task) != nil || task.TaskID == "" {
			t.Fatalf("no task created: %+v\nstderr: %s", ev, c.Stderr())
		}
		if task.Status != "working" || !strings.Contains(task.StatusMessage, "awaiting approval") {
			t.Fatalf("the held call's task: %+v, want working and awaiting approval", task)
		}
		return task, done
	}

	task, done := call("ada@example.com")
	approval := h.pending("acme")
	raw, err := c.Do(ctx, map[string]any{"op": "getTask", "taskId": task.TaskID})
	if err != nil || !strings.Contains(string(raw), `"status":"working"`) || !strings.Contains(string(raw), approval.ID) {
		t.Fatalf("tasks/get of the held task: %s %v", raw, err)
	}
	if n := h.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls before the approval", n)
	}
	h.decide(approval.ID, "approve")
	if got := receive(t, done, "the SDK reads the approved task's result"); got.err != nil || !strings.Contains(string(got.res), "msg_1") || strings.Contains(string(got.res), `"isError":true`) {
		t.Fatalf("the approved task's result: %s %v", got.res, got.err)
	}

	task, done = call("bob@example.com")
	h.decide(h.pending("acme").ID, "deny")
	if got := receive(t, done, "the SDK reads the denied task"); got.err == nil || !strings.Contains(got.err.Error(), "failed") {
		t.Fatalf("the denied task: %s %v, want it failed", got.res, got.err)
	}
	if raw, err := c.Do(ctx, map[string]any{"op": "taskResult", "taskId": task.TaskID}); err == nil || !strings.Contains(err.Error(), "-32031") || !strings.Contains(err.Error(), "denied") {
		t.Fatalf("tasks/result of the denied task: %s %v, want the denial's error (-32031)", raw, err)
	}

	task, done = call("cy@example.com")
	withdrawn := h.pending("acme")
	if _, err := c.Do(ctx, map[string]any{"op": "cancelTask", "taskId": task.TaskID}); err != nil {
		t.Fatalf("tasks/cancel: %v", err)
	}
	if got := receive(t, done, "the SDK reads the cancelled task"); got.err == nil {
		t.Fatalf("the cancelled task: %s, want an error", got.res)
	}
	if d := decode[approvals.Record](t, h.admin(http.MethodGet, "/approvals/"+withdrawn.ID, "")).Decision; d != approvals.Withdrawn {
		t.Fatalf("the cancelled task's approval: %s, want withdrawn", d)
	}
	if n := h.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1 (the approved one)", n)
	}
}

// TestHeldTaskAcrossEdges: a held task made on one edge is read, approved and read
// completed through another: its record is the call's, in the shared bucket, and
// the edge that took it runs it once approved.
func TestHeldTaskAcrossEdges(t *testing.T) {
	h := newHeldTasksEnv(t)
	b := newEnv(t, onServer(h.srv.ClientURL()), withMCP())
	task := h.heldTask(h.mine, "ada@example.com")
	readOnB := func() heldTask {
		t.Helper()
		_, msg := statelessOn(b, h.mine, "tasks/get", task.TaskID, `"taskId":"`+task.TaskID+`"`)
		var got heldTask
		_ = json.Unmarshal(msg["result"], &got) // nothing, while the edge does not see the key yet
		return got
	}
	testenv.WaitFor(t, "the other edge reads the task", func() bool {
		return readOnB().Status == "working"
	})
	if got := readOnB(); !strings.Contains(got.StatusMessage, "awaiting approval") {
		t.Fatalf("tasks/get through the other edge: %+v", got)
	}
	approval := h.pending("acme")
	if r := b.admin(http.MethodPost, "/approvals/"+approval.ID, `{"decision":"approve"}`); r.status != http.StatusOK {
		t.Fatalf("approve through the other edge: %d %s", r.status, r.body)
	}
	var done heldTask
	testenv.WaitFor(t, "the task completes, read through the other edge", func() bool {
		done = readOnB()
		return done.Status == "completed"
	})
	if !strings.Contains(string(done.Result), "msg_1") || h.sends.Load() != 1 {
		t.Fatalf("the approved task: %s; %d sent", done.Result, h.sends.Load())
	}
}

// TestWaitingCallUnderAChangedRule: an MCP client without tasks waits in its request;
// when the account's rule changed before the approval came, the approved call does
// not run: its result is an isError one that says the rule changed.
func TestWaitingCallUnderAChangedRule(t *testing.T) {
	h := newHeldTasksEnv(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "approvals-test", Version: "1"}, nil)
	cs, err := c.Connect(testenv.Context(t), &mcp.StreamableClientTransport{Endpoint: h.link}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	answered := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := cs.CallTool(testenv.Context(t), &mcp.CallToolParams{Name: "send_email",
			Arguments: map[string]any{"to": "ada@example.com", "subject": "hi", "body": "x"}})
		if err != nil {
			t.Errorf("tools/call: %v", err)
		}
		answered <- res
	}()
	approval := h.pending("acme")
	if r := h.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"approvals":[{"tool":"email","method":"*","expires_in":600}]}}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the edge sees the changed rule", func() bool {
		rules := h.view.Snapshot().Account("acme").Limits.Approvals
		return len(rules) == 1 && rules[0].ExpiresIn == 600
	})
	h.decide(approval.ID, "approve")
	res := receive(t, answered, "the approved call answers")
	if res == nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "rule") {
		t.Fatalf("the call approved under the old rule: %+v", res)
	}
	if n := h.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls, want none", n)
	}
}
