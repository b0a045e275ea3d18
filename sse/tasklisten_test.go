package sse_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/sse"
)

// The go-sdk (v1.8.0) client has no taskIds in its subscriptions/listen filter, so
// these tests speak 2026-07-28 as raw JSON-RPC over HTTP, on real TCP connections to
// the edges, and read the listen stream's events as they arrive.

// listenStream is an open subscriptions/listen stream.
type listenStream struct {
	resp   *http.Response
	events chan map[string]json.RawMessage // each message's JSON-RPC object
	cancel context.CancelFunc
}

// openListen POSTs subscriptions/listen with notifications to url, as a client that
// declares the tasks extension, and reads its events on a goroutine.
func openListen(t *testing.T, url, notifications string) *listenStream {
	t.Helper()
	h, body := rev20260728("subscriptions/listen", `"notifications":`+notifications)
	body = withTasksExtension(body)
	h["Accept"] = "text/event-stream"
	ctx, cancel := context.WithCancel(testenv.Context(t))
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	ls := &listenStream{resp: resp, events: make(chan map[string]json.RawMessage, 64), cancel: cancel}
	t.Cleanup(ls.close)
	go func() {
		defer close(ls.events)
		lines := bufio.NewScanner(resp.Body)
		lines.Buffer(nil, 1<<20)
		for lines.Scan() {
			d, ok := strings.CutPrefix(lines.Text(), "data: ")
			var m map[string]json.RawMessage
			if ok && json.Unmarshal([]byte(d), &m) == nil {
				ls.events <- m
			}
		}
	}()
	return ls
}

func (ls *listenStream) close() { ls.cancel(); ls.resp.Body.Close() }

// next is the stream's next message, failing the test when none comes in time.
func (ls *listenStream) next(t *testing.T) map[string]json.RawMessage {
	t.Helper()
	select {
	case m, ok := <-ls.events:
		if !ok {
			t.Fatal("the listen stream ended")
		}
		return m
	case <-time.After(testenv.Patience):
		t.Fatal("no message on the listen stream")
	}
	return nil
}

// params is a notification's params.
func params(t *testing.T, m map[string]json.RawMessage) map[string]json.RawMessage {
	t.Helper()
	var p map[string]json.RawMessage
	if err := json.Unmarshal(m["params"], &p); err != nil {
		t.Fatalf("params of %v: %v", m, err)
	}
	return p
}

// TestTaskStatusOnListen: a task started on one edge is followed through a
// subscriptions/listen stream on another: the acknowledgement grants its id, then
// notifications/tasks carries it as tasks/get would answer it, working, then
// completed with its result inline; a task cancelled through a third request is seen
// cancelled. Another account cannot follow the id (-32602), and its own stream on the
// same tool carries nothing of the task.
func TestTaskStatusOnListen(t *testing.T) {
	e := newEnv(t)
	a, b := e.startEdge(t, 0, nil), e.startEdge(t, 0, nil)
	urlA, urlB := e.streamableURL(a.url), e.streamableURL(b.url)
	otherURL := b.url + "/mcp/" + e.otherAccountLink(t)
	testenv.WaitFor(t, "the edge knows the other link", func() bool {
		return taskCall2026(t, otherURL, "server/discover", "", "").status == http.StatusOK
	})
	other := openListen(t, otherURL, `{"toolsListChanged":true}`)
	if m := other.next(t); str(m["method"]) != "notifications/subscriptions/acknowledged" {
		t.Fatalf("the other account's first message: %v", m)
	}

	created := rpcResult(t, taskCall2026(t, urlA, "tools/call", "sleep", `"name":"sleep","arguments":{"ms":1500}`))
	id := str(created["taskId"])
	if str(created["resultType"]) != "task" || id == "" {
		t.Fatalf("a long call: %v", created)
	}
	if x := taskCall2026(t, otherURL, "subscriptions/listen", "", `"notifications":{"taskIds":["`+id+`"]}`); func() bool {
		code, _ := x.rpcError()
		return code != -32602
	}() {
		t.Fatalf("another account's listen to the task: %d %s, want -32602", x.status, x.body)
	}

	ls := openListen(t, urlB, `{"taskIds":["`+id+`"]}`)
	ack := params(t, ls.next(t))
	if !strings.Contains(string(ack["notifications"]), `"taskIds":["`+id+`"]`) || !strings.Contains(string(ack["_meta"]), "subscriptionId") {
		t.Fatalf("the acknowledgement: %v", ack)
	}
	var statuses []string
	var last map[string]json.RawMessage
	for len(statuses) == 0 || statuses[len(statuses)-1] != "completed" {
		m := ls.next(t)
		if str(m["method"]) != "notifications/tasks" {
			t.Fatalf("a message on the listen stream: %v", m)
		}
		last = params(t, m)
		if str(last["taskId"]) != id || !strings.Contains(string(last["_meta"]), "io.modelcontextprotocol/subscriptionId") {
			t.Fatalf("notifications/tasks: %v", last)
		}
		statuses = append(statuses, str(last["status"]))
	}
	if statuses[0] != "working" || len(last["result"]) == 0 || !strings.Contains(string(last["result"]), "content") {
		t.Fatalf("statuses %v, the last %v", statuses, last)
	}
	got := rpcResult(t, taskCall2026(t, urlA, "tasks/get", id, `"taskId":"`+id+`"`))
	if string(got["result"]) != string(last["result"]) || str(got["lastUpdatedAt"]) != str(last["lastUpdatedAt"]) {
		t.Fatalf("the notification %v is not tasks/get's %v", last, got)
	}

	// A task cancelled through edge A, heard on B's stream that follows it.
	created = rpcResult(t, taskCall2026(t, urlA, "tools/call", "wait", `"name":"wait","arguments":{}`))
	waitID := str(created["taskId"])
	lw := openListen(t, urlB, `{"taskIds":["`+waitID+`"],"toolsListChanged":true}`)
	lw.next(t) // the acknowledgement
	if p := params(t, lw.next(t)); str(p["status"]) != "working" {
		t.Fatalf("the waiting task: %v", p)
	}
	rpcResult(t, taskCall2026(t, urlA, "tasks/cancel", waitID, `"taskId":"`+waitID+`"`))
	if p := params(t, lw.next(t)); str(p["taskId"]) != waitID || str(p["status"]) != "cancelled" {
		t.Fatalf("after tasks/cancel: %v", p)
	}

	other.close()
	for m := range other.events {
		if strings.Contains(string(m["params"]), id) || strings.Contains(string(m["params"]), waitID) || str(m["method"]) == "notifications/tasks" {
			t.Fatalf("the other account's stream carried %v", m)
		}
	}
}

// TestListenHearsAnOverdueTask: a task whose edge stopped before recording its end
// (its record, written here, says working until a deadline that passes) is written by
// nobody, yet the stream that follows it carries it failed once it reads as overdue,
// as tasks/get then answers it.
func TestListenHearsAnOverdueTask(t *testing.T) {
	e := newEnv(t)
	b := e.startEdge(t, 0, nil)
	now := time.Now()
	rec := calls.Record{ID: "call_" + strings.Repeat("8", 22), Account: testAccount, Link: testTool, Tool: testTool, Method: "wait",
		CallID: "task-of-a-dead-edge", Protocol: calls.ProtocolMCP, Status: calls.Working, CreatedAt: now, Deadline: now.Add(time.Second)}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := e.store.JetStream().KeyValue(testenv.Context(t), calls.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(testenv.Context(t), rec.ID, raw); err != nil {
		t.Fatal(err)
	}
	ls := openListen(t, e.streamableURL(b.url), `{"taskIds":["`+rec.ID+`"]}`)
	ls.next(t) // the acknowledgement
	if p := params(t, ls.next(t)); str(p["status"]) != "working" {
		t.Fatalf("the task before its deadline: %v", p)
	}
	p := params(t, ls.next(t))
	if str(p["taskId"]) != rec.ID || str(p["status"]) != "failed" || !strings.Contains(str(p["statusMessage"]), "timed out") {
		t.Fatalf("the task past its deadline: %v", p)
	}
	if late := time.Since(rec.Deadline.Add(calls.OverdueAfter)); late < 0 {
		t.Fatalf("the stream said failed %v before the record read as overdue", -late)
	}
	got := rpcResult(t, taskCall2026(t, e.streamableURL(b.url), "tasks/get", rec.ID, `"taskId":"`+rec.ID+`"`))
	if str(got["status"]) != "failed" {
		t.Fatalf("tasks/get of the overdue task: %v", got)
	}
}

// TestListenTasksBounded: a stream follows at most --mcp-listen-tasks task ids (one
// more is refused, -32602, and nothing is watched); an id that is no task, and taskIds
// from a client that did not declare the tasks extension, are refused too.
func TestListenTasksBounded(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.MaxListenTasks = 2 })
	url := e.streamableURL(ed.url)
	var ids []string
	for range 2 {
		created := rpcResult(t, taskCall2026(t, url, "tools/call", "wait", `"name":"wait","arguments":{}`))
		ids = append(ids, `"`+str(created["taskId"])+`"`)
	}
	refused := func(what, taskIDs string, want int64) {
		t.Helper()
		x := taskCall2026(t, url, "subscriptions/listen", "", `"notifications":{"taskIds":[`+taskIDs+`]}`)
		if code, _ := x.rpcError(); code != want {
			t.Fatalf("%s: %d %s, want %d", what, x.status, x.body, want)
		}
	}
	refused("three ids", strings.Join(append(ids, ids[0]), ","), -32602)
	refused("an id that is no task", `"call_nothing"`, -32602)
	refused("a subject pattern", `">"`, -32602)

	h, body := rev20260728("subscriptions/listen", `"notifications":{"taskIds":[`+ids[0]+`]}`)
	if code, _ := do(t, "POST", url, h, body).rpcError(); code != -32021 {
		t.Fatalf("taskIds without the tasks extension: %d, want -32021", code)
	}

	ls := openListen(t, url, `{"taskIds":[`+strings.Join(ids, ",")+`]}`)
	ack := params(t, ls.next(t))
	if !strings.Contains(string(ack["notifications"]), strings.Join(ids, ",")) {
		t.Fatalf("two ids: %v", ack)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		p := params(t, ls.next(t))
		seen[str(p["taskId"])] = str(p["status"]) == "working"
	}
	for _, id := range ids {
		if !seen[strings.Trim(id, `"`)] {
			t.Fatalf("the working tasks' first status: %v", seen)
		}
	}
}
