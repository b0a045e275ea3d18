package sse_test

import (
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestStreamedCallsReplySubjectIsKeptByNoStream: a worker may publish once on the
// reply subject of a call it received, whatever its permissions, and name any reply
// subject there; were the event log to keep that subject, JetStream would send its
// acknowledgement wherever the worker named. So a call answered on a stream has the
// reply subject wire.Subjects.StreamAnswer, which the log does not keep (an edge
// stores the answer), and never the log's own.
func TestStreamedCallsReplySubjectIsKeptByNoStream(t *testing.T) {
	e := newEnv(t)
	held := registry.Method{Name: "held", Description: "Records its reply subject", Timeout: registry.Duration(5 * time.Second)}
	if err := e.store.PutTool(testenv.Context(t), kitTool(held)); err != nil {
		t.Fatal(err)
	}
	subj := wire.DefaultSubjects
	replies := make(chan *nats.Msg, 1)
	if _, err := e.worker.nc.QueueSubscribe(subj.Call(testTool, held.Name), subj.QueueGroup(testTool), func(m *nats.Msg) {
		replies <- m
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	a := e.startEdge(t, 0, nil)
	session := initSession(t, e.streamableURL(a.url))
	call := openStream(t, "POST", e.streamableURL(a.url), map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session},
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"held"}}`)
	call.nextLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "id: ") })
	var m *nats.Msg
	select {
	case m = <-replies:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the worker")
	}
	a2, ok := subj.ParseAsk(m.Reply)
	if !ok || a2.Kind != wire.AskAnswerKind || a2.Tool != testTool || a2.Session != session {
		t.Fatalf("the call's reply subject is %q, want the tool's stream answer subject for session %s", m.Reply, session)
	}
	if strings.HasPrefix(m.Reply, subj.SessionRoot()) {
		t.Fatalf("the reply subject %q is among the event log's", m.Reply)
	}
	// Its answer there reaches the client.
	if err := m.Respond([]byte(`{"held":true}`)); err != nil {
		t.Fatal(err)
	}
	_, data := call.next(t, "message")
	if !strings.Contains(data, `"id":7`) || !strings.Contains(data, `held`) {
		t.Fatalf("the stream carried %s", data)
	}
}
