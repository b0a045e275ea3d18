package wire_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// BenchmarkMessage builds the request message of a typical tool call, with and
// without a trace to carry across.
func BenchmarkMessage(b *testing.B) {
	req := wire.Request{
		Tool: "email", Method: "send_email",
		CallID:    "2vVhpQ4bq3cQh0U2cT8ZgN",
		RequestID: "req_4bf92f3577b34da6a3ce929d",
		Account:   "acme",
		Deadline:  time.Now().Add(30 * time.Second),
		Data:      []byte(`{"to":"ada@example.com","subject":"Hello","body":"Nice to meet you."}`),
	}
	for _, bc := range []struct {
		name   string
		traced bool
	}{
		{"untraced", false},
		{"traced", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := b.Context()
			if bc.traced {
				ctx = tracedContext()
			}
			b.ReportAllocs()
			for b.Loop() {
				msg := wire.DefaultSubjects.Msg(ctx, &req)
				if wire.MessageSize(msg) == 0 {
					b.Fatal("empty message")
				}
			}
		})
	}
}

// BenchmarkReadReply maps a tool's successful JSON reply.
func BenchmarkReadReply(b *testing.B) {
	msg := nats.NewMsg("_INBOX.x")
	msg.Header.Set(wire.HeaderContentType, "application/json")
	msg.Data = []byte(`{"id":"mail_1","queued_at":"2026-01-02T03:04:05Z"}`)

	b.ReportAllocs()
	for b.Loop() {
		r, err := wire.ReadReply(msg)
		if err != nil || r.Status != 200 {
			b.Fatal(r, err)
		}
	}
}
