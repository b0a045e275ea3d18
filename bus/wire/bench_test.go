package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus"
)

// BenchmarkMessage builds the request message of a typical tool call, with and
// without a trace to carry across.
func BenchmarkMessage(b *testing.B) {
	req := bus.Request{
		Subject:   bus.DefaultSubjects.Call("email", "send_email"),
		RequestID: "req_4bf92f3577b34da6a3ce929d",
		Account:   "acme",
		Deadline:  time.Now().Add(30 * time.Second),
		Data:      []byte(`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`),
	}
	traced := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
		TraceFlags: trace.FlagsSampled,
	}))
	for _, bc := range []struct {
		name string
		ctx  context.Context
	}{
		{"untraced", context.Background()},
		{"traced", traced},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				msg := bus.Message(bc.ctx, req)
				if bus.MessageSize(msg) == 0 {
					b.Fatal("empty message")
				}
			}
		})
	}
}

// BenchmarkReadReply maps a tool's successful JSON reply.
func BenchmarkReadReply(b *testing.B) {
	msg := nats.NewMsg("_INBOX.x")
	msg.Header.Set(bus.HeaderContentType, "application/json")
	msg.Data = []byte(`{"id":"mail_1","queued_at":"2026-01-02T03:04:05Z"}`)

	b.ReportAllocs()
	for b.Loop() {
		r, err := bus.ReadReply(msg)
		if err != nil || r.Status != 200 {
			b.Fatal(r, err)
		}
	}
}
