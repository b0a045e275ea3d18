package workers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/workers"
)

func TestHandlerSeesTheCaller(t *testing.T) {
	e := newEnv(t)
	seen := make(chan *workers.Call, 1)
	spanCtx := make(chan trace.SpanContext, 1)
	ctxDeadline := make(chan time.Time, 1)
	look := workers.Method{Name: "look", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		seen <- c
		spanCtx <- trace.SpanContextFromContext(ctx)
		d, _ := ctx.Deadline()
		ctxDeadline <- d
		return map[string]any{}, nil
	}}
	e.start(workers.Tool{ID: "mirror"}, []workers.Method{look})

	ctx, span := otel.Tracer("test").Start(context.Background(), "edge")
	deadline := time.Now().Add(3 * time.Second).Truncate(time.Millisecond)
	_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "mirror", Method: "look", CallID: "call-42", RequestID: "req-42", Account: "acme",
		Deadline: deadline, Data: []byte(`{"x":1}`), MCPContext: wire.MCPContext{Session: "sess-7"}})
	span.End()
	if err != nil {
		t.Fatal(err)
	}
	c := <-seen
	workerSpan := <-spanCtx

	t.Run("the handler sees the account, request and call ids, session and parameters", func(t *testing.T) {
		if c.Account != "acme" || c.RequestID != "req-42" || c.CallID != "call-42" || c.Session != "sess-7" || string(c.Params) != `{"x":1}` {
			t.Errorf("call: account %q, request %q, call %q, session %q, params %s", c.Account, c.RequestID, c.CallID, c.Session, c.Params)
		}
		if c.Tool != "mirror" || c.Method != "look" {
			t.Errorf("call: tool %q, method %q", c.Tool, c.Method)
		}
	})

	t.Run("the handler's context ends at the caller's deadline", func(t *testing.T) {
		if !c.Deadline.Equal(deadline) {
			t.Errorf("Call.Deadline %v, want %v", c.Deadline, deadline)
		}
		if d := <-ctxDeadline; !d.Equal(deadline) {
			t.Errorf("ctx deadline %v, want %v", d, deadline)
		}
	})

	t.Run("the worker's span continues the caller's trace through the bus", func(t *testing.T) {
		if workerSpan.TraceID() != span.SpanContext().TraceID() {
			t.Fatalf("worker trace %s, caller trace %s", workerSpan.TraceID(), span.SpanContext().TraceID())
		}
		var request, worker trace.SpanContext
		var requestParent, workerParent trace.SpanContext
		testenv.WaitFor(t, "the worker's span ended", func() bool {
			for _, s := range spans.Ended() {
				if s.SpanContext().TraceID() != span.SpanContext().TraceID() {
					continue
				}
				switch {
				case strings.HasPrefix(s.Name(), "tool.request "):
					request, requestParent = s.SpanContext(), s.Parent()
				case s.Name() == "tool.call mirror.look":
					worker, workerParent = s.SpanContext(), s.Parent()
				}
			}
			return worker.IsValid()
		})
		if !request.IsValid() {
			t.Fatal("no request span from bus.Do")
		}
		if requestParent.SpanID() != span.SpanContext().SpanID() {
			t.Errorf("the request span's parent is %s, want the caller's span %s", requestParent.SpanID(), span.SpanContext().SpanID())
		}
		if workerParent.SpanID() != request.SpanID() {
			t.Errorf("the worker span's parent is %s, want the request span %s", workerParent.SpanID(), request.SpanID())
		}
		if worker.SpanID() != workerSpan.SpanID() {
			t.Errorf("the handler's context holds span %s, want the worker span %s", workerSpan.SpanID(), worker.SpanID())
		}
	})
}

func TestCancelMessageCancelsTheHandler(t *testing.T) {
	e := newEnv(t)
	started := make(chan struct{})
	cause := make(chan error, 1)
	wait := workers.Method{Name: "wait", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		close(started)
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return nil, ctx.Err()
	}}
	e.start(workers.Tool{ID: "waiter"}, []workers.Method{wait})

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "waiter", Method: "wait", CallID: "call-cancel", RequestID: "req-cancel", Deadline: time.Now().Add(time.Minute)})
		errc <- err
	}()
	<-started
	cancel() // bus.Do publishes tg.cancel.waiter.call-cancel
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("bus.Do: %v, want context.Canceled", err)
	}
	select {
	case err := <-cause:
		if !errors.Is(err, workers.ErrCancelled) {
			t.Errorf("cause %v, want ErrCancelled", err)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the handler's context was not cancelled")
	}
}

// TestCancelReachesEveryCallOfACallID: calls that share a call id (a request the bus
// delivered twice) are all cancelled by its cancel message, and one that finishes
// first leaves the others cancellable. A cancel that names the call by its request
// id, or names another tool, cancels nothing.
func TestCancelReachesEveryCallOfACallID(t *testing.T) {
	e := newEnv(t)
	started := make(chan string, 3)
	causes := make(chan error, 3)
	wait := workers.Method{Name: "wait", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		var p struct{ Quick bool }
		_ = c.Bind(&p)
		started <- string(c.Params)
		if p.Quick {
			return "done", nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}}
	e.start(workers.Tool{ID: "waiter"}, []workers.Method{wait}, workers.WithConcurrency(4))

	replies := make(chan error, 3)
	send := func(params string) {
		go func() {
			_, err := bus.Do(context.Background(), e.nc, wire.DefaultSubjects, &wire.Request{Tool: "waiter", Method: "wait", CallID: "call-shared", RequestID: "req-shared",
				Deadline: time.Now().Add(time.Minute), Data: []byte(params)})
			replies <- err
		}()
		<-started
	}
	send(`{}`)
	send(`{"quick":true}`)
	if err := <-replies; err != nil {
		t.Fatalf("the quick call: %v", err)
	}
	send(`{}`)
	for _, wrong := range []string{wire.DefaultSubjects.Cancel("waiter", "req-shared"), wire.DefaultSubjects.Cancel("other", "call-shared")} {
		if err := e.nc.Publish(wrong, nil); err != nil {
			t.Fatal(err)
		}
	}
	// A call of the same tool, sent after the wrong cancels, is not cancelled by them:
	// once it answers, the worker has heard them too and cancelled nothing.
	send(`{"quick":true}`)
	if err := <-replies; err != nil {
		t.Fatalf("the second quick call: %v", err)
	}
	select {
	case err := <-causes:
		t.Fatalf("a cancel naming the request id, or another tool, cancelled a call: %v", err)
	default:
	}
	if err := e.nc.Publish(wire.DefaultSubjects.Cancel("waiter", "call-shared"), nil); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		select {
		case err := <-causes:
			if !errors.Is(err, workers.ErrCancelled) {
				t.Errorf("cause %v, want ErrCancelled", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("a call of the call id was not cancelled")
		}
	}
}

func TestProgressAndLog(t *testing.T) {
	e := newEnv(t)
	report := workers.Method{Name: "report", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		if err := c.Progress(1, 2, "half way"); err != nil {
			return nil, err
		}
		if err := c.Log("info", "reporter", map[string]int{"step": 1}); err != nil {
			return nil, err
		}
		return "done", nil
	}}
	e.start(workers.Tool{ID: "reporter"}, []workers.Method{report})

	for _, tt := range []struct {
		name     string
		id       string
		progress bool
		want     []string
	}{
		{"a caller that asks for progress gets progress and log notifications", "req-loud", true, []string{
			`{"kind":"progress","progress":1,"total":2,"message":"half way"}`,
			`{"kind":"log","level":"info","logger":"reporter","data":{"step":1}}`,
		}},
		{"a caller that does not ask gets none", "req-quiet", false, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			id := tt.id
			sub, err := e.nc.SubscribeSync(wire.DefaultSubjects.Progress("reporter", id))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Unsubscribe()
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			if _, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "reporter", Method: "report", CallID: id, RequestID: "req-" + id, MCPContext: wire.MCPContext{Progress: tt.progress}}); err != nil {
				t.Fatal(err)
			}
			if err := e.nc.Flush(); err != nil {
				t.Fatal(err)
			}
			var got []string
			for {
				msg, err := sub.NextMsg(100 * time.Millisecond)
				if err != nil {
					break
				}
				got = append(got, string(msg.Data))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("notifications:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestCallOutcomes(t *testing.T) {
	e := newEnv(t)
	methods := []workers.Method{
		{Name: "json", Handler: func(context.Context, *workers.Call) (any, error) {
			return map[string]any{"ok": true}, nil
		}},
		{Name: "raw", Handler: func(context.Context, *workers.Call) (any, error) {
			return workers.Raw{Status: 201, ContentType: "text/csv", Data: []byte("a,b\n1,2\n")}, nil
		}},
		{Name: "mcp", Handler: func(context.Context, *workers.Call) (any, error) {
			return workers.MCPResult(`{"content":[{"type":"text","text":"hi"}],"isError":true}`), nil
		}},
		{Name: "fail", Handler: func(context.Context, *workers.Call) (any, error) {
			return nil, &workers.Error{Code: "quota_exceeded", Message: "no more today", Status: 429, Data: map[string]int{"retry_in": 60}}
		}},
		{Name: "broken", Handler: func(context.Context, *workers.Call) (any, error) {
			return nil, errors.New("database is down")
		}},
		{Name: "panic", Handler: func(context.Context, *workers.Call) (any, error) {
			panic("boom")
		}},
		{Name: "slow", Handler: func(ctx context.Context, _ *workers.Call) (any, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		}},
		workers.Func("typed", "", func(_ context.Context, _ *workers.Call, in struct {
			N int `json:"n"`
		}) (int, error) {
			return in.N * 2, nil
		}),
	}
	e.start(workers.Tool{ID: "outcomes"}, methods)

	do := func(t *testing.T, method, params string, timeout time.Duration) (*wire.Reply, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		return bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "outcomes", Method: method, CallID: "r-" + method, RequestID: "r-" + method, Data: []byte(params)})
	}
	toolErr := func(t *testing.T, err error, code string, status int) *wire.ToolError {
		t.Helper()
		var te *wire.ToolError
		if !errors.As(err, &te) {
			t.Fatalf("got %v, want a *wire.ToolError", err)
		}
		if te.Code != code || te.Status != status {
			t.Errorf("tool error code %q status %d, want %q %d (message %q)", te.Code, te.Status, code, status, te.Message)
		}
		return te
	}

	t.Run("a value comes back as JSON with status 200", func(t *testing.T) {
		r, err := do(t, "json", `{}`, testenv.Patience)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || r.ContentType != "application/json" || string(r.Data) != `{"ok":true}` {
			t.Errorf("reply %d %q %s", r.Status, r.ContentType, r.Data)
		}
	})
	t.Run("a Raw reply keeps its status, content type and bytes", func(t *testing.T) {
		r, err := do(t, "raw", `{}`, testenv.Patience)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 201 || r.ContentType != "text/csv" || string(r.Data) != "a,b\n1,2\n" {
			t.Errorf("reply %d %q %q", r.Status, r.ContentType, r.Data)
		}
	})
	t.Run("an MCPResult comes back as its JSON, marked as a CallToolResult", func(t *testing.T) {
		r, err := do(t, "mcp", `{}`, testenv.Patience)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != 200 || r.ContentType != "application/json" || !r.MCPResult {
			t.Errorf("reply %d %q, MCP result %v", r.Status, r.ContentType, r.MCPResult)
		}
		if string(r.Data) != `{"content":[{"type":"text","text":"hi"}],"isError":true}` {
			t.Errorf("body %s", r.Data)
		}
	})
	t.Run("a tool's Error becomes a ToolError with its code, message, status and data", func(t *testing.T) {
		_, err := do(t, "fail", `{}`, testenv.Patience)
		te := toolErr(t, err, "quota_exceeded", 429)
		if te.Message != "no more today" || string(te.Data) != `{"retry_in":60}` {
			t.Errorf("message %q, data %s", te.Message, te.Data)
		}
	})
	t.Run("any other error is an internal tool error", func(t *testing.T) {
		_, err := do(t, "broken", `{}`, testenv.Patience)
		te := toolErr(t, err, "internal", 0)
		if te.Message != "database is down" {
			t.Errorf("message %q", te.Message)
		}
	})
	t.Run("a panic is an internal tool error and the worker lives on", func(t *testing.T) {
		_, err := do(t, "panic", `{}`, testenv.Patience)
		toolErr(t, err, "internal", 0)
		if _, err := do(t, "json", `{}`, testenv.Patience); err != nil {
			t.Fatalf("after the panic: %v", err)
		}
	})
	t.Run("parameters that do not decode are invalid_params", func(t *testing.T) {
		_, err := do(t, "typed", `{"n":"two"}`, testenv.Patience)
		toolErr(t, err, "invalid_params", 400)
		r, err := do(t, "typed", `{"n":21}`, testenv.Patience)
		if err != nil || string(r.Data) != "42" {
			t.Fatalf("typed call: %v %s", err, r.Data)
		}
	})
	t.Run("a handler past the caller's deadline is a timeout", func(t *testing.T) {
		start := time.Now()
		_, err := do(t, "slow", `{}`, 200*time.Millisecond)
		if !errors.Is(err, bus.ErrTimeout) {
			t.Fatalf("got %v, want bus.ErrTimeout", err)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("timed out after %v, want about 200ms", d)
		}
	})
	t.Run("a method nobody serves is no responders", func(t *testing.T) {
		_, err := do(t, "absent", `{}`, testenv.Patience)
		if !errors.Is(err, bus.ErrNoResponders) {
			t.Fatalf("got %v, want bus.ErrNoResponders", err)
		}
	})
}

func TestPayloadLimits(t *testing.T) {
	srv := testenv.ServerWith(t, func(c *bus.ServerConfig) { c.MaxPayload = 4096 })
	e := newEnvAt(t, srv.ClientURL())
	methods := []workers.Method{
		{Name: "echo", Handler: func(_ context.Context, c *workers.Call) (any, error) { return c.Params, nil }},
		{Name: "big", Handler: func(context.Context, *workers.Call) (any, error) {
			return workers.Raw{ContentType: "text/plain", Data: make([]byte, 8192)}, nil
		}},
	}
	e.start(workers.Tool{ID: "sizes"}, methods)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()

	t.Run("a request over max_payload is refused before it is sent", func(t *testing.T) {
		params, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 5000)})
		_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "echo", CallID: "r1", RequestID: "r1", Data: params})
		var tooLarge *bus.PayloadTooLargeError
		if !errors.As(err, &tooLarge) {
			t.Fatalf("got %v, want *bus.PayloadTooLargeError", err)
		}
		if tooLarge.Max != 4096 || tooLarge.Size <= 5000 {
			t.Errorf("size %d, max %d", tooLarge.Size, tooLarge.Max)
		}
	})
	t.Run("a request under max_payload goes through", func(t *testing.T) {
		r, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "echo", CallID: "r2", RequestID: "r2", Data: []byte(`{"a":1}`)})
		if err != nil || string(r.Data) != `{"a":1}` {
			t.Fatalf("got %v %s", err, r.Data)
		}
	})
	t.Run("a reply over max_payload without a payloads bucket is an error", func(t *testing.T) {
		_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "big", CallID: "r3", RequestID: "r3"})
		var te *wire.ToolError
		if !errors.As(err, &te) || te.Code != workers.CodeInternal || !strings.Contains(te.Message, "could not be stored") {
			t.Fatalf("got %v, want an internal tool error saying the reply could not be stored", err)
		}
	})
	store, err := payloads.Open(ctx, e.nc, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Run("a reply over max_payload travels as a payload", func(t *testing.T) {
		r, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "big", CallID: "r4", RequestID: "r4"})
		if err != nil {
			t.Fatal(err)
		}
		p, ok, err := wire.PayloadOf(r.Header)
		if !ok || err != nil || len(r.Data) != 0 || p.Size != 8192 || p.Parts < 2 {
			t.Fatalf("payload %+v %v %v, body of %d bytes", p, ok, err, len(r.Data))
		}
		data, err := store.Read(ctx, "sizes", p)
		if err != nil || !bytes.Equal(data, make([]byte, 8192)) || r.ContentType != "text/plain" {
			t.Fatalf("read %d bytes (%v), content type %q", len(data), err, r.ContentType)
		}
		if _, err := store.Read(ctx, "other", p); err == nil {
			t.Error("another tool's name reads the payload")
		}
	})
	t.Run("a reply past the caller's limit is payload_too_large", func(t *testing.T) {
		h := nats.Header{wire.HeaderPayloadLimit: []string{"5000"}}
		_, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "big", CallID: "r5", RequestID: "r5",
			MCPContext: wire.MCPContext{Header: h}})
		var te *wire.ToolError
		if !errors.As(err, &te) || te.Code != workers.CodePayloadTooLarge || te.Status != 413 {
			t.Fatalf("got %v, want a payload_too_large tool error with status 413", err)
		}
	})
	t.Run("a request that names a payload gets its bytes", func(t *testing.T) {
		params, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 10000)})
		p, err := store.Write(ctx, "sizes", params, nil, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		defer store.Delete(ctx, "sizes", p)
		h := nats.Header{wire.HeaderPayload: []string{p.String()}}
		r, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &wire.Request{Tool: "sizes", Method: "echo", CallID: "r6", RequestID: "r6",
			MCPContext: wire.MCPContext{Header: h}})
		if err != nil {
			t.Fatal(err)
		}
		pr, ok, _ := wire.PayloadOf(r.Header)
		if !ok {
			t.Fatal("the echo of 10 kB came back in the message")
		}
		data, err := store.Read(ctx, "sizes", pr)
		if err != nil || !bytes.Equal(data, params) {
			t.Fatalf("echo: %d bytes (%v), want the %d sent", len(data), err, len(params))
		}
	})
}

// queue is a one-slot worker of a "work" method: a call with {"block":true} holds the
// slot until release is closed or it is cancelled; any other call counts itself in ran.
type queue struct {
	e       *env
	started chan struct{}
	release chan struct{}
	ran     atomic.Int32
}

func newQueue(t *testing.T) *queue {
	q := &queue{e: newEnv(t), started: make(chan struct{}, 1), release: make(chan struct{})}
	work := workers.Method{Name: "work", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		var p struct{ Block bool }
		_ = c.Bind(&p)
		if !p.Block {
			q.ran.Add(1)
			return "done", nil
		}
		q.started <- struct{}{}
		select {
		case <-q.release:
			return "released", nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}}
	q.e.start(workers.Tool{ID: "queue"}, []workers.Method{work}, workers.WithConcurrency(1))
	return q
}

// call sends a call of work and returns its outcome.
func (q *queue) call(ctx context.Context, id, params string, deadline time.Time) error {
	_, err := bus.Do(ctx, q.e.nc, wire.DefaultSubjects, &wire.Request{Tool: "queue", Method: "work", CallID: id, RequestID: id, Deadline: deadline, Data: []byte(params)})
	return err
}

// settled returns once every call queued so far has been taken: a call sent now runs
// after them, on the one slot.
func (q *queue) settled(t *testing.T) {
	t.Helper()
	if err := q.call(context.Background(), "req-last", `{}`, time.Now().Add(time.Minute)); err != nil {
		t.Fatalf("the last call: %v", err)
	}
}

// TestACallPastItsDeadlineDoesNotRun: a call whose deadline passes while it waits for
// a slot is not run once one frees: its caller has already been told it timed out.
func TestACallPastItsDeadlineDoesNotRun(t *testing.T) {
	q := newQueue(t)
	blocking := make(chan error, 1)
	go func() {
		blocking <- q.call(context.Background(), "req-blocking", `{"block":true}`, time.Now().Add(time.Minute))
	}()
	<-q.started

	if err := q.call(context.Background(), "req-queued", `{}`, time.Now().Add(150*time.Millisecond)); !errors.Is(err, bus.ErrTimeout) {
		t.Fatalf("the queued call: %v, want a timeout", err)
	}
	close(q.release)
	if err := <-blocking; err != nil {
		t.Fatalf("the blocking call: %v", err)
	}
	q.settled(t)
	if n := q.ran.Load(); n != 1 {
		t.Fatalf("%d calls ran, want 1 (the last): the timed-out call ran once a slot freed", n)
	}
}

// TestACallCancelledBeforeItStartsDoesNotRun: a caller that gives up on a call still
// waiting for a slot stops it from ever running, even though no instance was running
// it when the cancel came.
func TestACallCancelledBeforeItStartsDoesNotRun(t *testing.T) {
	q := newQueue(t)
	blockCtx, cancelBlocking := context.WithCancel(context.Background())
	blocking := make(chan error, 1)
	go func() { blocking <- q.call(blockCtx, "req-blocking", `{"block":true}`, time.Now().Add(time.Minute)) }()
	<-q.started

	// The server has the call (a copy comes to the test) before it is cancelled: it is
	// on its way to the worker's queue, if not there yet; the test holds either way.
	sent, err := q.e.nc.SubscribeSync(wire.DefaultSubjects.Call("queue", "work"))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.e.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	queued := make(chan error, 1)
	go func() { queued <- q.call(queuedCtx, "req-queued", `{}`, time.Now().Add(time.Minute)) }()
	if _, err := sent.NextMsg(testenv.Patience); err != nil {
		t.Fatalf("the queued call was not sent: %v", err)
	}
	cancelQueued() // bus.Do publishes tg.cancel.queue.req-queued
	if err := <-queued; !errors.Is(err, context.Canceled) {
		t.Fatalf("the queued call: %v, want context.Canceled", err)
	}
	// Cancel the blocking call too: the worker hears cancels in order, so once that one
	// ends, the queued call's cancel has been heard.
	cancelBlocking()
	<-blocking
	q.settled(t)
	if n := q.ran.Load(); n != 1 {
		t.Fatalf("%d calls ran, want 1 (the last): the cancelled call ran once a slot freed", n)
	}
}
