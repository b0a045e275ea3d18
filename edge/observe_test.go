package edge_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// spans installs, once per test binary, an in-memory exporter behind the global
// tracer provider: otel's global hands its tracers to the first provider set, so
// every test that looks at spans shares this one and picks its own by trace id.
var spans = sync.OnceValue(func() *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp)))
	return exp
})

func spansOf(exp *tracetest.InMemoryExporter, id trace.TraceID) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range exp.GetSpans() {
		if s.SpanContext.TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// TestOneTraceFromEdgeToWorker: the edge's server span, the bus request span and the
// span a worker starts from the message's headers are one trace, each the parent of
// the next; and /metrics counts the call.
func TestOneTraceFromEdgeToWorker(t *testing.T) {
	exp := spans()
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	workerTrace := make(chan trace.SpanContext, 1)
	e.serve(echoTool, func(method string, m *nats.Msg) {
		ctx := wire.Propagator.Extract(context.Background(), wire.HeaderCarrier(m.Header))
		_, span := otel.Tracer("toolgate-test-worker").Start(ctx, "worker "+method, trace.WithSpanKind(trace.SpanKindServer))
		respond(m, 0, "application/json", []byte(`{"ok":true}`))
		span.End()
		workerTrace <- span.SpanContext()
	})
	e.connect("acme", "echo")

	if r := e.call(key, "echo", "echo", `{}`); r.status != http.StatusOK {
		t.Fatalf("call: %d %s", r.status, r.body)
	}
	worker := <-workerTrace
	var got tracetest.SpanStubs
	testenv.WaitFor(t, "three spans of the call's trace", func() bool {
		got = spansOf(exp, worker.TraceID())
		return len(got) == 3
	})
	byName := map[string]tracetest.SpanStub{}
	for _, s := range got {
		byName[s.Name] = s
	}
	edgeSpan, ok1 := byName["POST /tool-call/:tool/:method"]
	busSpan, ok2 := byName["tool.request "+wire.DefaultSubjects.Call("echo", "echo")]
	workerSpan, ok3 := byName["worker echo"]
	if !ok1 || !ok2 || !ok3 {
		t.Fatalf("spans %v: want the edge's, the bus request's and the worker's", names(got))
	}
	if edgeSpan.SpanKind != trace.SpanKindServer || busSpan.SpanKind != trace.SpanKindClient {
		t.Fatalf("kinds: edge %v, bus %v", edgeSpan.SpanKind, busSpan.SpanKind)
	}
	if busSpan.Parent.SpanID() != edgeSpan.SpanContext.SpanID() || workerSpan.Parent.SpanID() != busSpan.SpanContext.SpanID() {
		t.Fatal("the spans are not a chain edge -> bus -> worker")
	}
	attrs := map[string]string{}
	for _, kv := range edgeSpan.Attributes {
		attrs[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{
		"http.request.method": "POST", "http.route": "/tool-call/:tool/:method", "url.path": "/tool-call/echo/echo",
		"http.response.status_code": "200", "toolgate.request_id": attrs["toolgate.request_id"],
	} {
		if attrs[k] != v || v == "" {
			t.Errorf("edge span: %s = %q, want %q", k, attrs[k], v)
		}
	}

	// A caller's own trace context is continued, not replaced.
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	e.call(key, "echo", "echo", `{}`, "traceparent", parent)
	if w := <-workerTrace; w.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Fatalf("worker trace %s, want the caller's", w.TraceID())
	}

	e.call(key, "nope", "echo", `{}`).expect(t, http.StatusNotFound, edge.CodeToolNotFound)
	m := e.do(http.MethodGet, "/metrics", "")
	for _, want := range []string{
		`toolgate_tool_calls_total{code="ok",method="echo",tool="echo"} 2`,
		`toolgate_tool_calls_total{code="tool_not_found",method="unknown",tool="unknown"} 1`,
		`toolgate_tool_call_duration_seconds_count{method="echo",tool="echo"} 2`,
		`toolgate_tool_duration_seconds_count{method="echo",tool="echo"} 2`,
		`toolgate_tool_calls_in_flight 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(m.body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func names(ss tracetest.SpanStubs) []string {
	var out []string
	for _, s := range ss {
		out = append(out, s.Name)
	}
	return out
}

// TestHealthAndReadiness: /healthz answers while the process lives; /readyz only while
// NATS is connected and the edge is not shutting down.
func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t)
	if r := e.do(http.MethodGet, "/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz %d", r.status)
	}
	if r := e.do(http.MethodGet, "/readyz", ""); r.status != http.StatusOK {
		t.Fatalf("readyz %d %s", r.status, r.body)
	}
	e.srv.Shutdown()
	testenv.WaitFor(t, "readyz fails without NATS", func() bool {
		return e.do(http.MethodGet, "/readyz", "").status == http.StatusServiceUnavailable
	})
	if r := e.do(http.MethodGet, "/healthz", ""); r.status != http.StatusOK {
		t.Fatalf("healthz %d without NATS: the process is alive", r.status)
	}
}

// TestGracefulShutdown: when Serve's context ends, a call in flight still gets its
// answer and Serve returns cleanly.
func TestGracefulShutdown(t *testing.T) {
	e := newEnv(t)
	key := e.account("acme", registry.Limits{})
	started := make(chan struct{})
	e.serve(echoTool, func(_ string, m *nats.Msg) {
		close(started)
		time.Sleep(300 * time.Millisecond)
		respond(m, 0, "text/plain", []byte("done"))
	})
	e.connect("acme", "echo")
	answer := e.callInBackground(key, "echo", "echo", `{}`)
	<-started
	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if r := <-answer; r.status != http.StatusOK || string(r.body) != "done" {
		t.Fatalf("in-flight call: %d %s", r.status, r.body)
	}
	if _, err := http.Get(e.url + "/healthz"); err == nil {
		t.Fatal("the edge still takes connections after Serve returned")
	}
}

// TestShutdownDrains: when Serve's context ends with a DrainDelay, the edge turns
// unready and goes on serving for the delay, every answer closing its connection, so
// that a balancer moves new requests elsewhere before any is refused; then it stops
// taking connections and still answers the call in flight before Serve returns.
func TestShutdownDrains(t *testing.T) {
	const delay = 4 * time.Second
	e := newEnv(t, withEdge(func(c *edge.Config) { c.DrainDelay = delay }))
	key := e.account("acme", registry.Limits{})
	held, release := make(chan struct{}), make(chan struct{})
	e.serve(echoTool, func(_ string, m *nats.Msg) {
		if string(m.Data) == `{"hold":true}` {
			close(held)
			<-release
		}
		respond(m, 0, "application/json", m.Data)
	})
	e.connect("acme", "echo")
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	call := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, e.url+"/tool-call/echo/echo", strings.NewReader(body))
		req.Header.Set("SERVICE_API_KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := fresh.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return resp, err
	}
	inFlight := make(chan error, 1)
	go func() {
		resp, err := call(`{"hold":true}`)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		inFlight <- err
	}()
	<-held
	stopped := make(chan error, 1)
	began := time.Now()
	go func() { stopped <- e.stop() }()

	testenv.Eventually(t, delay, "readyz unready while draining", func() bool {
		resp, err := fresh.Get(e.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	resp, err := call(`{"n":1}`)
	if err != nil || resp.StatusCode != http.StatusOK || !resp.Close {
		t.Fatalf("a call while draining (%s after the stop): %v %+v; want 200 closing its connection", time.Since(began), err, resp)
	}
	testenv.Eventually(t, 2*delay, "no new connections once the delay is over", func() bool {
		_, err := call(`{"n":2}`)
		return err != nil
	})
	close(release)
	if err := <-inFlight; err != nil {
		t.Fatalf("the call in flight: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if waited := time.Since(began); waited < delay {
		t.Fatalf("Serve returned %s after its context ended, before the drain delay %s", waited, delay)
	}
}
