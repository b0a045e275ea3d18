package bus_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestDoCarriesTraceContextWithoutProvider pins what bus.Do promises when no tracer
// provider is installed (this test binary installs none) and so starts no span: the
// caller's trace context still reaches the tool, unchanged.
func TestDoCarriesTraceContextWithoutProvider(t *testing.T) {
	if wire.Tracing() {
		t.Fatal("Tracing reports a provider in a binary that installs none")
	}
	srv, err := bus.StartServer(bus.ServerConfig{Name: "trace", Host: "127.0.0.1", Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	got := make(chan nats.Header, 1)
	sub, err := nc.Subscribe("tg.call.t.m", func(m *nats.Msg) {
		got <- m.Header
		_ = m.Respond([]byte(`{}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })

	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
	ctx, cancel := context.WithTimeout(trace.ContextWithRemoteSpanContext(context.Background(), caller), testenv.Patience)
	defer cancel()
	if _, err := bus.Do(ctx, nc, wire.DefaultSubjects, &wire.Request{Tool: "t", Method: "m", CallID: "c1", RequestID: "req_1", Data: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	h := <-got
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if tp := h.Get("traceparent"); tp != want {
		t.Fatalf("traceparent at the tool = %q, want the caller's %q", tp, want)
	}
}
