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

// TestStreamOfAKilledEdgeIsFinished: the edge running a tools/call answered with a
// stream dies before the tool answers. The client resumes the stream on another edge
// with Last-Event-ID and gets the response from the event log: the tool's answer, or,
// when the tool never answers, the timeout once the call's deadline has passed.
func TestStreamOfAKilledEdgeIsFinished(t *testing.T) {
	e := newEnv(t)
	// hang never answers; its deadline is short.
	hang := registry.Method{Name: "hang", Description: "Never answers", Timeout: registry.Duration(2 * time.Second)}
	if err := e.store.PutTool(testenv.Context(t), kitTool(hang)); err != nil {
		t.Fatal(err)
	}
	subj := wire.DefaultSubjects
	if _, err := e.worker.nc.QueueSubscribe(subj.Call(testTool, hang.Name), subj.QueueGroup(testTool), func(m *nats.Msg) {
		e.worker.sessions <- m.Header.Get(wire.HeaderSession)
	}); err != nil {
		t.Fatal(err)
	}
	if err := e.worker.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	b := e.startEdge(t, 0, nil)

	for _, tc := range []struct{ name, call, want string }{
		{"the tool's answer", `{"name":"sleep","arguments":{"ms":1500}}`, `\"slept\":1500`},
		{"the timeout", `{"name":"hang"}`, `hang: the tool did not answer in time`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := e.startEdge(t, 0, nil)
			session := initSession(t, e.streamableURL(a.url))
			call := openStream(t, "POST", e.streamableURL(a.url), map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session},
				`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":`+tc.call+`}`)
			primed := call.nextLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "id: ") })
			select {
			case <-e.worker.sessions: // the call reached the worker
			case <-time.After(testenv.Patience):
				t.Fatal("the call never reached the worker")
			}
			a.kill()

			resumed := openStream(t, "GET", e.streamableURL(b.url), map[string]string{
				"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": strings.TrimPrefix(primed, "id: "),
			}, "")
			_, data := resumed.next(t, "message")
			if !strings.Contains(data, `"id":7`) || !strings.Contains(data, tc.want) {
				t.Fatalf("the resumed stream carried %s, want the response to request 7 with %s", data, tc.want)
			}
		})
	}
}
