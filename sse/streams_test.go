package sse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse"
)

func isKeepAlive(l string) bool { return strings.HasPrefix(l, ":") }

// TestIdleStreamsGetKeepAlives: a stream with nothing to say still says something,
// so that proxies and clients do not take it for dead.
func TestIdleStreamsGetKeepAlives(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.KeepAlive = 100 * time.Millisecond })

	legacy := openLegacyStream(t, e.sseURL(ed.url))
	legacy.nextLine(t, 2*time.Second, isKeepAlive)

	url := e.streamableURL(ed.url)
	session := initSession(t, url)
	get := openStream(t, "GET", url, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session}, "")
	get.nextLine(t, 2*time.Second, isKeepAlive)

	// A call that runs quietly keeps its stream alive too.
	call := openStream(t, "POST", url, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session},
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":500}}}`)
	call.nextLine(t, 2*time.Second, isKeepAlive)
	if _, data := call.next(t, "message"); !strings.Contains(data, `\"slept\":500`) {
		t.Fatalf("sleep answered %s", data)
	}
}

// TestLegacyClientLeaving: on the legacy transport the stream is the session, so a
// client that closes its stream ends the session at once, and its id is then unknown.
func TestLegacyClientLeaving(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	stream := openLegacyStream(t, e.sseURL(ed.url))
	_, session, _ := strings.Cut(stream.endpoint, "session_id=")
	if x := do(t, "POST", ed.url+stream.endpoint, nil, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); x.status != http.StatusAccepted {
		t.Fatalf("POST while the stream is open: %d %s", x.status, x.body)
	}
	stream.close()
	ctx := testenv.Context(t)
	testenv.WaitFor(t, "the session ended with its stream", func() bool {
		_, err := e.store.Session(ctx, session)
		return errors.Is(err, registry.ErrNotFound)
	})
}

// TestSessionLifetimes tests the session policy at its edges: a session whose
// client holds no stream and has no request in flight ends SessionIdle after its last
// request, and is then unknown (404); requests within it keep it, as does a request
// that runs longer than it, and a standalone stream, for as long as it is open.
func TestSessionLifetimes(t *testing.T) {
	const idle = 2 * time.Second
	e := newEnv(t)
	ed := e.startEdge(t, 0, func(c *sse.Config) { c.SessionIdle = idle })
	url := e.streamableURL(ed.url)
	ctx := testenv.Context(t)
	gone := func(session string) bool {
		_, err := e.store.Session(ctx, session)
		return errors.Is(err, registry.ErrNotFound)
	}
	list := func(session string) exchange {
		return do(t, "POST", url, map[string]string{"Mcp-Session-Id": session, "Accept": "application/json"}, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	}

	t.Run("a session left alone ends after the idle time, and is then unknown", func(t *testing.T) {
		session := initSession(t, url)
		start := time.Now()
		testenv.WaitFor(t, "the idle session ended", func() bool { return gone(session) })
		if lived := time.Since(start); lived < idle*9/10 {
			t.Fatalf("the session ended after %v, before its idle time %v", lived, idle)
		}
		// The edge learns of the end from its copy of the bucket, a moment after it.
		testenv.WaitFor(t, "the edge answers 404", func() bool { return list(session).status == http.StatusNotFound })
		if !gone(session) {
			t.Fatal("a request of the ended session brought it back")
		}
	})
	t.Run("requests within the idle time keep a session", func(t *testing.T) {
		session := initSession(t, url)
		for range 6 {
			time.Sleep(idle / 2)
			if x := list(session); x.status != http.StatusOK {
				t.Fatalf("a session in use ended: %d %s", x.status, x.body)
			}
		}
	})
	t.Run("a request in flight longer than the idle time keeps its session", func(t *testing.T) {
		session := initSession(t, url)
		x := do(t, "POST", url, map[string]string{"Mcp-Session-Id": session, "Accept": "application/json"},
			fmt.Sprintf(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":%d}}}`, (3*idle).Milliseconds()))
		if x.status != http.StatusOK || !strings.Contains(string(x.body), "slept") {
			t.Fatalf("the long call: %d %s", x.status, x.body)
		}
		if gone(session) {
			t.Fatal("the session ended while its request ran")
		}
	})
	t.Run("an open stream keeps a session; once closed the idle time runs", func(t *testing.T) {
		session := initSession(t, url)
		stream := openStream(t, "GET", url, map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session}, "")
		time.Sleep(3 * idle)
		if gone(session) {
			t.Fatal("a session holding a stream ended after the idle time")
		}
		stream.close()
		testenv.WaitFor(t, "the session ended once its stream closed", func() bool { return gone(session) })
	})
}

// TestBrokenCallStreamResumes: a call's stream breaks; the client resumes it on
// another edge with Last-Event-ID and gets the answer, and the call was never
// cancelled. A client that never comes back has its call cancelled.
func TestBrokenCallStreamResumes(t *testing.T) {
	e := newEnv(t)
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 0, nil)
	session := initSession(t, e.streamableURL(a.url))
	headers := map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session}

	call := openStream(t, "POST", e.streamableURL(a.url), headers,
		`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}`)
	primed := call.nextLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "id: ") })
	call.close()

	resumed := openStream(t, "GET", e.streamableURL(b.url), map[string]string{
		"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": strings.TrimPrefix(primed, "id: "),
	}, "")
	if _, data := resumed.next(t, "message"); !strings.Contains(data, `\"slept\":1500`) {
		t.Fatalf("the resumed stream carried %s, want the call's answer", data)
	}
	select {
	case id := <-e.worker.cancelled:
		t.Fatalf("call %s was cancelled though its client resumed", id)
	default:
	}

	t.Run("a client that does not come back cancels its call", func(t *testing.T) {
		call := openStream(t, "POST", e.streamableURL(a.url), headers,
			`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"wait"}}`)
		primed := call.nextLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "id: ") })
		id := e.worker.waitStarted(t)
		call.close()
		e.worker.waitCancelled(t, id) // after the resume grace
		late := openStream(t, "GET", e.streamableURL(b.url), map[string]string{
			"Accept": "text/event-stream", "Mcp-Session-Id": session, "Last-Event-ID": strings.TrimPrefix(primed, "id: "),
		}, "")
		if _, data := late.next(t, "message"); !strings.Contains(data, `"code":-32001`) {
			t.Fatalf("a late resume got %s, want the cancellation", data)
		}
	})
}

// TestStreamGetsWhatCameWhileNoneWasOpen: a worker may ask a session's client
// something before the client has opened its GET stream, or while it has none; the
// next stream it opens carries it, and nothing an earlier stream carried.
func TestStreamGetsWhatCameWhileNoneWasOpen(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	session := initSession(t, url)
	headers := map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session}
	// ask sends a request to the client and returns once the event log holds it.
	ask := func(what string) <-chan error {
		done := make(chan error, 1)
		logged := make(chan struct{})
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			_, err := askClientThen(ctx, e.worker.nc, session, "", "roots/list", map[string]any{"what": what}, func() { close(logged) })
			done <- err
		}()
		select {
		case <-logged:
		case err := <-done:
			t.Fatalf("asking the client about %s: %v", what, err)
		}
		return done
	}
	// closed says whether the event log holds the close of the session's last
	// standalone stream: a stream opened after it starts after it.
	js, err := jetstream.New(e.worker.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	closed := func() bool {
		st, err := js.Stream(ctx, "tg-mcp-events")
		if err != nil {
			return false
		}
		m, err := st.GetLastMsgForSubject(ctx, wire.DefaultSubjects.SessionOut(testTool, session))
		return err == nil && m.Header.Get("Tg-Event") == "close"
	}
	answer := func(get *legacyStream, what string) {
		t.Helper()
		_, data := get.next(t, "message")
		if !strings.Contains(data, what) {
			t.Fatalf("the stream carried %s, want the request about %s", data, what)
		}
		var req struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal([]byte(data), &req)
		reply := `{"jsonrpc":"2.0","id":"` + req.ID + `","result":{"roots":[]}}`
		if x := do(t, "POST", url, map[string]string{"Mcp-Session-Id": session}, reply); x.status != http.StatusAccepted {
			t.Fatalf("answering: %d %s", x.status, x.body)
		}
	}

	first := ask("first") // in the log before the stream opens
	get := openStream(t, "GET", url, headers, "")
	answer(get, "first")
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	get.close()
	testenv.WaitFor(t, "the edge logged the stream's close", closed)

	second := ask("second")
	again := openStream(t, "GET", url, headers, "")
	answer(again, "second")
	if err := <-second; err != nil {
		t.Fatal(err)
	}
}

// TestLegacyStreamMovesToAnotherEdge: the edge holding a legacy SSE stream drains; the
// client reconnects to another edge with Last-Event-ID and keeps its session and the
// events of the gap.
func TestLegacyStreamMovesToAnotherEdge(t *testing.T) {
	e := newEnv(t)
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 0, nil)
	lb := newBalancer(t, func(*http.Request) string { return a.url })

	stream := openLegacyStream(t, e.sseURL(lb.url))
	lastID := stream.firstID
	lb.sendTo(func(*http.Request) string { return b.url })
	a.stop()
	stream.nextLine(t, 5*time.Second, func(l string) bool { return strings.HasPrefix(l, "retry: ") })
	e.addMethod(t, "in_the_gap")

	again := openStream(t, "GET", e.sseURL(lb.url), map[string]string{"Accept": "text/event-stream", "Last-Event-ID": lastID}, "")
	if again.endpoint != stream.endpoint {
		t.Fatalf("reconnected to endpoint %s, want the session's %s", again.endpoint, stream.endpoint)
	}
	if _, data := again.next(t, "message"); !strings.Contains(data, "notifications/tools/list_changed") {
		t.Fatalf("after reconnecting got %s, want the list change of the gap", data)
	}
	if x := do(t, "POST", lb.url+again.endpoint, nil, `{"jsonrpc":"2.0","id":9,"method":"tools/list"}`); x.status != http.StatusAccepted {
		t.Fatalf("POST after reconnecting: %d %s", x.status, x.body)
	}
	if _, data := again.next(t, "message"); !strings.Contains(data, "in_the_gap") {
		t.Fatalf("tools/list answered %s", data)
	}
}

// TestDrainFinishesCalls: a draining edge refuses new requests but answers the calls
// it has.
func TestDrainFinishesCalls(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	session := initSession(t, url)
	headers := map[string]string{"Accept": "application/json", "Mcp-Session-Id": session}

	var wg sync.WaitGroup
	var answer exchange
	wg.Add(1)
	go func() {
		defer wg.Done()
		var err error
		answer, err = exchangeWith("POST", url, headers, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":700}}}`)
		if err != nil {
			t.Error(err)
		}
	}()
	testenv.WaitFor(t, "the call reached the worker", func() bool { return e.worker.inFlight() == 1 })
	drained := make(chan struct{})
	go func() {
		ed.stop()
		close(drained)
	}()
	testenv.WaitFor(t, "new requests refused", func() bool {
		return do(t, "POST", url, headers, `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`).status == http.StatusServiceUnavailable
	})
	wg.Wait()
	if answer.status != http.StatusOK || !strings.Contains(string(answer.body), `\"slept\":700`) {
		t.Fatalf("the call running at drain: %d %s", answer.status, answer.body)
	}
	<-drained
}

// TestLogLevels: a worker's log notifications reach the client at or above the level
// it asked for, and not at all on 2026-07-28 unless the request asks.
func TestLogLevels(t *testing.T) {
	e := newEnv(t)
	ed := e.startEdge(t, 0, nil)
	url := e.streamableURL(ed.url)
	count := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"count","arguments":{"n":2},"_meta":{"progressToken":"p"}}}`
	logsAndProgress := func(x exchange) (logs, progress int) {
		return strings.Count(string(x.body), "notifications/message"), strings.Count(string(x.body), "notifications/progress")
	}

	session := initSession(t, url)
	headers := map[string]string{"Accept": "text/event-stream", "Mcp-Session-Id": session}
	x := do(t, "POST", url, headers, fmt.Sprintf(count, 2))
	if logs, progress := logsAndProgress(x); logs != 2 || progress != 2 {
		t.Fatalf("following progress without a level: %d logs, %d progress, want 2 and 2 (%s)", logs, progress, x.body)
	}
	if x := do(t, "POST", url, map[string]string{"Accept": "application/json", "Mcp-Session-Id": session},
		`{"jsonrpc":"2.0","id":3,"method":"logging/setLevel","params":{"level":"warning"}}`); x.status != 200 {
		t.Fatalf("logging/setLevel: %d %s", x.status, x.body)
	}
	x = do(t, "POST", url, headers, fmt.Sprintf(count, 4))
	if logs, progress := logsAndProgress(x); logs != 0 || progress != 2 {
		t.Fatalf("at level warning: %d info logs, %d progress, want 0 and 2 (%s)", logs, progress, x.body)
	}

	for level, want := range map[string]int{"": 0, "debug": 2, "error": 0} {
		meta := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"`
		if level != "" {
			meta += `,"io.modelcontextprotocol/logLevel":"` + level + `"`
		}
		body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"count","arguments":{"n":2},"_meta":{` + meta + `}}}`
		x := do(t, "POST", url, map[string]string{"Accept": "text/event-stream", "Mcp-Protocol-Version": "2026-07-28",
			"Mcp-Method": "tools/call", "Mcp-Name": "count"}, body)
		if logs, progress := logsAndProgress(x); logs != want || progress != 2 {
			t.Fatalf("2026-07-28 with logLevel %q: %d logs, %d progress, want %d and 2 (%s)", level, logs, progress, want, x.body)
		}
	}
}
