package bus_test

import (
	"context"
	"errors"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

// echoResponder answers every call of tool with the call's own data, on the reply
// subject the call names.
func echoResponder(t testing.TB, nc *nats.Conn, tool string) {
	t.Helper()
	sub, err := nc.Subscribe(wire.DefaultSubjects.CallAll(tool), func(m *nats.Msg) {
		_ = nc.PublishMsg(wire.JSONReply(m.Reply, m.Data))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
}

// TestDoWithAReplySubject: a call whose reply goes to a subject of its own (an MCP
// call streamed to its client, whose answer any edge may log) gets its reply there,
// tells a tool that nobody serves, and ends when its connection closes, not at its
// deadline.
func TestDoWithAReplySubject(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	echoResponder(t, testenv.Conn(t, srv.ClientURL()), "echo")
	ctx := testenv.Context(t)

	r, err := bus.Do(ctx, nc, wire.DefaultSubjects, &wire.Request{Tool: "echo", Method: "m", CallID: "c1", RequestID: "c1", Data: []byte(`{"n":1}`), MCPContext: wire.MCPContext{ReplyTo: "tg.test.answer.c1"}})
	if err != nil {
		t.Fatal(err)
	}
	if string(r.Data) != `{"n":1}` {
		t.Fatalf("reply %s, want the call's own data", r.Data)
	}

	_, err = bus.Do(ctx, nc, wire.DefaultSubjects, &wire.Request{Tool: "nobody", Method: "m", CallID: "c2", RequestID: "c2", Data: []byte(`{}`), MCPContext: wire.MCPContext{ReplyTo: "tg.test.answer.c2"}})
	if !errors.Is(err, bus.ErrNoResponders) {
		t.Fatalf("a tool nobody serves: %v, want ErrNoResponders", err)
	}

	// A call to a tool that never answers, on a connection that closes while it waits.
	closing := testenv.Conn(t, srv.ClientURL())
	silent, err := nc.Subscribe(wire.DefaultSubjects.CallAll("silent"), func(*nats.Msg) { closing.Close() })
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	_, err = bus.Do(ctx, closing, wire.DefaultSubjects, &wire.Request{Tool: "silent", Method: "m", CallID: "c3", RequestID: "c3", Data: []byte(`{}`), MCPContext: wire.MCPContext{ReplyTo: "tg.test.answer.c3"}})
	if err == nil || ctx.Err() != nil {
		t.Fatalf("a call whose connection closed: %v (the test's context: %v), want an error before the context's end", err, ctx.Err())
	}
}

// BenchmarkDoReplyTo is one call with a reply subject of its own, against one with
// the connection's shared inbox, through an embedded server to a responder.
func BenchmarkDoReplyTo(b *testing.B) {
	srv := testenv.Server(b)
	nc := testenv.Conn(b, srv.ClientURL())
	echoResponder(b, testenv.Conn(b, srv.ClientURL()), "echo")
	for _, replyTo := range []string{"", "tg.test.answer"} {
		name := "inbox"
		if replyTo != "" {
			name = "reply_subject"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bus.Do(context.Background(), nc, wire.DefaultSubjects, &wire.Request{Tool: "echo", Method: "m",
					CallID: "c", RequestID: "c", Data: []byte(`{}`), MCPContext: wire.MCPContext{ReplyTo: replyTo}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
