package workers_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

func TestCallRequestAsksTheSessionsClient(t *testing.T) {
	e := newEnv(t)
	type outcome struct {
		result json.RawMessage
		err    error
	}
	outcomes := make(chan outcome, 1)
	ask := workers.Method{Name: "ask", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		r, err := c.Request(ctx, "elicitation/create", map[string]any{"message": "Your name?"})
		outcomes <- outcome{r, err}
		return map[string]any{}, nil
	}}
	e.start(workers.Tool{ID: "asker"}, []workers.Method{ask})
	runWith := func(t *testing.T, session string, caps []string, timeout time.Duration) outcome {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		_, _ = bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "asker", Method: "ask", CallID: "ask-" + session,
			RequestID: "ask-" + session, Data: []byte(`{}`), MCPContext: wire.MCPContext{Session: session, ClientCapabilities: caps}})
		select {
		case o := <-outcomes:
			return o
		case <-time.After(testenv.Patience):
			t.Fatal("the handler did not finish")
			return outcome{}
		}
	}
	run := func(t *testing.T, session string, timeout time.Duration) outcome {
		t.Helper()
		return runWith(t, session, nil, timeout)
	}

	t.Run("the client's result comes back to the handler", func(t *testing.T) {
		se := testenv.NewSessionEdge(t, e.nc, "asker", "sess-ok", func(id string) string {
			return `{"jsonrpc":"2.0","id":"` + id + `","result":{"action":"accept","content":{"name":"Ada"}}}`
		})
		o := run(t, "sess-ok", testenv.Patience)
		if o.err != nil || string(o.result) != `{"action":"accept","content":{"name":"Ada"}}` {
			t.Fatalf("got %s %v", o.result, o.err)
		}
		sent := <-se.Sent
		if sent["jsonrpc"] != "2.0" || sent["method"] != "elicitation/create" || !strings.HasPrefix(sent["id"].(string), "tg-") {
			t.Errorf("sent %v", sent)
		}
		if p, _ := sent["params"].(map[string]any); p["message"] != "Your name?" {
			t.Errorf("params %v", sent["params"])
		}
	})
	t.Run("the client's error is an RPCError", func(t *testing.T) {
		testenv.NewSessionEdge(t, e.nc, "asker", "sess-no", func(id string) string {
			return `{"jsonrpc":"2.0","id":"` + id + `","error":{"code":-1,"message":"User rejected"}}`
		})
		o := run(t, "sess-no", testenv.Patience)
		var re *workers.RPCError
		if !errors.As(o.err, &re) || re.Code != -1 || re.Message != "User rejected" {
			t.Fatalf("got %v, want the client's JSON-RPC error", o.err)
		}
	})
	t.Run("a client that did not declare the capability is not asked", func(t *testing.T) {
		se := testenv.NewSessionEdge(t, e.nc, "asker", "sess-sampling-only", nil)
		o := runWith(t, "sess-sampling-only", []string{"roots", "sampling"}, testenv.Patience)
		if !errors.Is(o.err, workers.ErrNotDeclared) || !strings.Contains(o.err.Error(), "does not support elicitation") {
			t.Fatalf("got %v, want ErrNotDeclared naming elicitation", o.err)
		}
		select {
		case m := <-se.Sent:
			t.Fatalf("the session was sent %v", m)
		default:
		}
	})
	t.Run("a call without a session cannot ask", func(t *testing.T) {
		if o := run(t, "", testenv.Patience); !errors.Is(o.err, workers.ErrNoSession) {
			t.Fatalf("got %v, want ErrNoSession", o.err)
		}
	})
	t.Run("with nothing to store session messages it fails at once", func(t *testing.T) {
		start := time.Now()
		o := run(t, "sess-nowhere", testenv.Patience)
		if !errors.Is(o.err, workers.ErrNoSessionLog) || time.Since(start) > time.Second {
			t.Fatalf("got %v after %v", o.err, time.Since(start))
		}
	})
	t.Run("when the call ends first the client is told the request is cancelled", func(t *testing.T) {
		se := testenv.NewSessionEdge(t, e.nc, "asker", "sess-slow", nil)
		o := run(t, "sess-slow", 300*time.Millisecond)
		if o.err == nil {
			t.Fatal("no error without an answer")
		}
		req := <-se.Sent
		select {
		case note := <-se.Sent:
			p, _ := note["params"].(map[string]any)
			if note["method"] != "notifications/cancelled" || p["requestId"] != req["id"] {
				t.Errorf("got %v after %v", note, req)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("no notifications/cancelled")
		}
	})
}

// BenchmarkCallRequest is a call whose handler asks its session's client something
// once (Call.Request), answered at once: what a worker's request to its client costs
// the worker, with the edge's side (storing the request, relaying the client's
// answer) played by a subscriber on the caller's connection.
func BenchmarkCallRequest(b *testing.B) {
	e := newEnv(b)
	ask := workers.Method{Name: "ask", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		_, err := c.Request(ctx, "sampling/createMessage", map[string]any{"maxTokens": 1})
		return map[string]any{}, err
	}}
	e.start(workers.Tool{ID: "asker"}, []workers.Method{ask})
	subj := wire.DefaultSubjects
	if _, err := e.nc.Subscribe(subj.SessionOut("asker", "sess-bench"), func(m *nats.Msg) {
		var req struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(m.Data, &req)
		_ = m.Respond([]byte(`{"stream":"tg-mcp-events","seq":1}`))
		_ = e.nc.Publish(subj.SessionReply("asker", "sess-bench", req.ID), []byte(`{"jsonrpc":"2.0","id":"`+req.ID+`","result":{}}`))
	}); err != nil {
		b.Fatal(err)
	}
	if err := e.nc.Flush(); err != nil {
		b.Fatal(err)
	}
	req := &wire.Request{Tool: "asker", Method: "ask", CallID: "bench", RequestID: "bench", Data: []byte(`{}`), MCPContext: wire.MCPContext{Session: "sess-bench", ClientCapabilities: []string{"sampling"}}}
	b.ReportAllocs()
	for b.Loop() {
		req.Deadline = time.Now().Add(testenv.Patience)
		r, err := bus.Do(context.Background(), e.nc, subj, req)
		if err != nil || r.Status != 200 {
			b.Fatal(r, err)
		}
	}
}
