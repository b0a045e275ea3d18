package sse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

// TestCallStreamsOnlyWhenItHasSomethingToSend: the go-sdk client, in a session of
// 2025-11-25, declares roots (its default) and sampling, so the tool of any of its calls may ask it something. A call
// whose tool asks nothing is answered as application/json, and nothing of it is kept
// in the event log; a call whose tool asks the client to sample gets the request on
// its own POST's stream, then its answer there.
func TestCallStreamsOnlyWhenItHasSomethingToSend(t *testing.T) {
	e := newEnv(t)
	// A call answers first however slow the machine is: only what it sends makes it
	// a stream.
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.StreamAfter = testenv.Patience })
	ctx := testenv.Context(t)
	rec := &testenv.CallRecorder{}
	c := mcp.NewClient(&mcp.Implementation{Name: "roots-and-sampling", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled on the POST stream"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(ed.url), HTTPClient: &http.Client{Transport: rec}}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "quick"}})
	if err != nil || res.IsError || !strings.Contains(testenv.ToolText(res), "quick") {
		t.Fatalf("echo: %+v, %v", res, err)
	}
	if got := rec.Last(t); got.ContentType != "application/json" {
		t.Fatalf("a call whose tool sent nothing first was answered as %s, want application/json", got.ContentType)
	}
	if n := testenv.PostRecords(t, e.worker.nc, testTool, cs.ID()); n != 0 {
		t.Fatalf("the event log keeps %d records of the session's POST streams after a call answered with JSON, want none", n)
	}

	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
	if err != nil || res.IsError || !strings.Contains(testenv.ToolText(res), "sampled on the POST stream") {
		t.Fatalf("ask: %+v, %v", res, err)
	}
	got := rec.Last(t)
	if got.ContentType != "text/event-stream" || !strings.Contains(got.Body(), `"method":"sampling/createMessage"`) {
		t.Fatalf("a call whose tool asked the client was answered as %s carrying %q, want the sampling request on its stream", got.ContentType, got.Body())
	}
	if n := testenv.PostRecords(t, e.worker.nc, testTool, cs.ID()); n == 0 {
		t.Fatal("the event log keeps nothing of the call answered on a stream; its client could not resume it")
	}
}

// TestCallThatAskedResumes: the tool asks its client something during a call answered
// as JSON or a stream, so the call becomes a stream, whose connection then breaks.
// The client resumes it on another edge from the stream's priming event: it gets the
// tool's request again (the tool put it on the stream before the stream opened),
// answers it there, and gets the call's answer.
func TestCallThatAskedResumes(t *testing.T) {
	e := newEnv(t)
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 0, nil)
	session := samplingSession(t, e.streamableURL(a.url))
	call, primed, asked := askOnAStream(t, e.streamableURL(a.url), session)
	call.close()
	var req struct {
		ID string `json:"id"`
	}
	_ = json.Unmarshal([]byte(asked), &req)

	resumed := openStream(t, "GET", e.streamableURL(b.url), map[string]string{
		"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": primed,
	}, "")
	if _, again := resumed.next(t, "message"); again != asked {
		t.Fatalf("the resumed stream carried %s first, want the tool's request %s", again, asked)
	}
	reply := `{"jsonrpc":"2.0","id":"` + req.ID + `","result":{"role":"assistant","model":"m","content":{"type":"text","text":"after the resume"}}}`
	if x := do(t, "POST", e.streamableURL(b.url), map[string]string{"Mcp-Session-Id": session}, reply); x.status != http.StatusAccepted {
		t.Fatalf("answering the sampling request: %d %s", x.status, x.body)
	}
	if _, data := resumed.next(t, "message"); !strings.Contains(data, `"id":2`) || !strings.Contains(data, "after the resume") {
		t.Fatalf("the resumed stream carried %s, want the answer to request 2 with the sampled text", data)
	}
}

// samplingSession opens a session whose client declares sampling at url.
func samplingSession(t *testing.T, url string) string {
	t.Helper()
	hello := strings.Replace(initialize, `"capabilities":{}`, `"capabilities":{"sampling":{}}`, 1)
	x := do(t, "POST", url, map[string]string{"Accept": "application/json, text/event-stream"}, hello)
	session := x.header.Get("Mcp-Session-Id")
	if x.status != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d %s", x.status, x.body)
	}
	return session
}

// askOnAStream calls the kit's ask method (request 2) in session at url, taking JSON
// or a stream, and returns the stream the call became, its priming event's id and the
// tool's sampling request it carried.
func askOnAStream(t *testing.T, url, session string) (call *legacyStream, primed, asked string) {
	t.Helper()
	call = openStream(t, "POST", url, map[string]string{"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session},
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"ask"}}`)
	primed = strings.TrimPrefix(call.nextLine(t, 0, func(l string) bool { return strings.HasPrefix(l, "id: ") }), "id: ")
	_, asked = call.next(t, "message")
	if !strings.Contains(asked, `"method":"sampling/createMessage"`) {
		t.Fatalf("the call's stream carried %s, want the tool's sampling request", asked)
	}
	return call, primed, asked
}

// TestCallThatAskedOutlivesItsEdge: the tool asks its client something during a call
// answered as JSON or a stream, so the call becomes a stream, and the edge running it
// dies. The client resumes the stream on another edge from its priming event: it gets
// the tool's request again, and, once the call's deadline has passed, the timeout, as
// for any call whose tool answered the edge that died.
func TestCallThatAskedOutlivesItsEdge(t *testing.T) {
	e := newEnv(t)
	tool := kitTool()
	for i := range tool.Methods {
		if tool.Methods[i].Name == "ask" {
			tool.Methods[i].Timeout = registry.Duration(2 * time.Second)
		}
	}
	if err := e.store.PutTool(testenv.Context(t), tool); err != nil {
		t.Fatal(err)
	}
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 0, nil)
	session := samplingSession(t, e.streamableURL(b.url))
	testenv.WaitFor(t, "the edge about to die knows the session and the ask method's deadline", func() bool {
		x := do(t, "POST", e.streamableURL(a.url), map[string]string{"Accept": "application/json", "Mcp-Session-Id": session},
			`{"jsonrpc":"2.0","id":1,"method":"ping"}`)
		return x.status == http.StatusOK
	})

	_, primed, asked := askOnAStream(t, e.streamableURL(a.url), session)
	a.kill()

	resumed := openStream(t, "GET", e.streamableURL(b.url), map[string]string{
		"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": primed,
	}, "")
	if _, again := resumed.next(t, "message"); again != asked {
		t.Fatalf("the resumed stream carried %s first, want the tool's request %s", again, asked)
	}
	if _, data := resumed.next(t, "message"); !strings.Contains(data, `"id":2`) || !strings.Contains(data, "did not answer in time") {
		t.Fatalf("the resumed stream carried %s, want the timeout of request 2", data)
	}
}

// TestCallsOfASessionShareASubscription: the edge follows the POST streams of a
// client that may be asked something with one subscription for the session, not
// one per call: calls that ask nothing change no interest on the bus, and calls in
// parallel that each ask the client get their own requests on their own streams.
func TestCallsOfASessionShareASubscription(t *testing.T) {
	srv := testenv.Server(t)
	e := setupEnv(t, []string{srv.ClientURL()}, 1)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.StreamAfter = testenv.Patience })
	ctx := testenv.Context(t)
	c := mcp.NewClient(&mcp.Implementation{Name: "sampler", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(ed.url)}, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	echo := func() {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %+v, %v", res, err)
		}
	}
	echo() // the session's subscription is made
	inserts := func() uint64 {
		sz, err := srv.Subsz(nil)
		if err != nil {
			t.Fatal(err)
		}
		return sz.NumInserts
	}
	before := inserts()
	const calls = 20
	for range calls {
		echo()
	}
	// None of them subscribes; the bus may have made one or two of its own meanwhile.
	if n := inserts() - before; n > 2 {
		t.Fatalf("%d calls of one session made %d subscriptions on the bus, want none", calls, n)
	}

	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
			if err == nil && (res.IsError || !strings.Contains(testenv.ToolText(res), "sampled")) {
				err = fmt.Errorf("ask answered %+v", res)
			}
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
