package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/demo"
)

type stack struct {
	nc    *nats.Conn
	store *registry.Store
	view  *registry.View
	call  func(t testing.TB, tool, method, params string) (*wire.Reply, error)
}

// start serves the demo tools on an embedded server until the test ends.
func start(t testing.TB) *stack {
	t.Helper()
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	store := testenv.Store(t, nc, 1)
	view := testenv.View(t, store)
	makeState(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- demo.Run(ctx, nc, workers.WithLogger(testenv.Logger(t))) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo.Run: %v", err)
		}
	})
	testenv.Eventually(t, 5*time.Second, "the demo tools are live", func() bool {
		s := view.Snapshot()
		return s.Instances("email") == 1 && s.Instances("echo") == 1 && s.Instances("clock") == 1
	})
	return &stack{nc: nc, store: store, view: view, call: func(t testing.TB, tool, method, params string) (*wire.Reply, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return bus.Do(ctx, nc, wire.DefaultSubjects, &wire.Request{Tool: tool, Method: method, CallID: registry.NewID("req_"), RequestID: registry.NewID("req_"), Account: "dev", Data: []byte(params)})
	}}
}

// makeState makes the demo tools' state buckets, as the admin does.
func makeState(t testing.TB, nc *nats.Conn) {
	t.Helper()
	for _, tool := range demo.StateTools {
		if _, err := registry.CreateToolState(testenv.Context(t), nc, tool, registry.StateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func wantToolError(t *testing.T, err error, code string, status int) {
	t.Helper()
	var te *wire.ToolError
	if !errors.As(err, &te) {
		t.Fatalf("got %v, want a tool error %s", err, code)
	}
	if te.Code != code || te.Status != status {
		t.Errorf("tool error %q status %d (%s), want %q %d", te.Code, te.Status, te.Message, code, status)
	}
}

func decode[T any](t *testing.T, r *wire.Reply, err error) T {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != 200 || r.ContentType != "application/json" {
		t.Errorf("reply status %d, content type %q", r.Status, r.ContentType)
	}
	var v T
	if err := json.Unmarshal(r.Data, &v); err != nil {
		t.Fatalf("reply %s: %v", r.Data, err)
	}
	return v
}

func TestEmail(t *testing.T) {
	s := start(t)

	var sent []string
	t.Run("send_email queues a message in the outbox", func(t *testing.T) {
		for _, subject := range []string{"first", "second"} {
			r, err := s.call(t, "email", "send_email", `{"to":"ada@example.com","subject":"`+subject+`","body":"hello"}`)
			out := decode[struct {
				ID       string    `json:"id"`
				QueuedAt time.Time `json:"queued_at"`
			}](t, r, err)
			if out.ID == "" || time.Since(out.QueuedAt) > time.Minute {
				t.Fatalf("reply %s", r.Data)
			}
			sent = append(sent, out.ID)
		}
		kv, err := s.store.JetStream().KeyValue(context.Background(), wire.StateBucket("email"))
		if err != nil {
			t.Fatal(err)
		}
		e, err := kv.Get(context.Background(), sent[0])
		if err != nil {
			t.Fatalf("message %s not in the outbox: %v", sent[0], err)
		}
		var m demo.Mail
		if err := json.Unmarshal(e.Value(), &m); err != nil || m.To != "ada@example.com" || m.Subject != "first" || m.Body != "hello" {
			t.Errorf("outbox holds %s (%v)", e.Value(), err)
		}
		// Each message expires a day after it was sent.
		st, err := s.store.JetStream().Stream(context.Background(), "KV_"+wire.StateBucket("email"))
		if err != nil {
			t.Fatal(err)
		}
		raw, err := st.GetLastMsgForSubject(context.Background(), "$KV."+wire.StateBucket("email")+"."+sent[0])
		if err != nil {
			t.Fatal(err)
		}
		if raw.Header.Get("Nats-TTL") != demo.OutboxTTL.String() {
			t.Errorf("message %s: TTL %q, want %s", sent[0], raw.Header.Get("Nats-TTL"), demo.OutboxTTL)
		}
	})
	t.Run("send_email refuses an address that is not one", func(t *testing.T) {
		_, err := s.call(t, "email", "send_email", `{"to":"Ada <ada@example.com>","subject":"s","body":"b"}`)
		wantToolError(t, err, "invalid_params", 400)
	})
	t.Run("the gateway's schema check refuses the same address before the tool sees it", func(t *testing.T) {
		m := s.view.Snapshot().RawTool("email").Method("send_email")
		var verr *registry.ValidationError
		if err := m.Validate([]byte(`{"to":"not-an-address","subject":"s","body":"b"}`)); !errors.As(err, &verr) || verr.Violations[0].Pointer != "/to" {
			t.Errorf("validation: %v", err)
		}
		if err := m.Validate([]byte(`{"to":"ada@example.com","subject":"s","body":"b"}`)); err != nil {
			t.Errorf("a valid message fails validation: %v", err)
		}
	})
	t.Run("list_sent lists the outbox newest first", func(t *testing.T) {
		r, err := s.call(t, "email", "list_sent", `{}`)
		out := decode[struct{ Messages []demo.Mail }](t, r, err)
		if len(out.Messages) != 2 || out.Messages[0].ID != sent[1] || out.Messages[1].ID != sent[0] {
			t.Fatalf("outbox %s, want %v newest first", r.Data, sent)
		}
		r, err = s.call(t, "email", "list_sent", `{"limit":1}`)
		out = decode[struct{ Messages []demo.Mail }](t, r, err)
		if len(out.Messages) != 1 || out.Messages[0].Subject != "second" {
			t.Errorf("limit 1: %s", r.Data)
		}
	})
	t.Run("list_sent refuses a limit out of range", func(t *testing.T) {
		_, err := s.call(t, "email", "list_sent", `{"limit":5000}`)
		wantToolError(t, err, "invalid_params", 400)
	})
}

func TestEcho(t *testing.T) {
	s := start(t)
	t.Run("echo answers with the object it gets", func(t *testing.T) {
		in := `{"a":1,"nested":{"b":[true,null,"x"]}}`
		r, err := s.call(t, "echo", "echo", in)
		if err != nil {
			t.Fatal(err)
		}
		if string(r.Data) != in || r.ContentType != "application/json" {
			t.Errorf("reply %q %s", r.ContentType, r.Data)
		}
		if err := s.view.Snapshot().RawTool("echo").Method("echo").Validate([]byte(in)); err != nil {
			t.Errorf("the schema refuses an arbitrary object: %v", err)
		}
	})
	t.Run("echo refuses what is not an object", func(t *testing.T) {
		_, err := s.call(t, "echo", "echo", `[1,2]`)
		wantToolError(t, err, "invalid_params", 400)
	})
}

func TestClock(t *testing.T) {
	s := start(t)
	type nowOut struct {
		Time     string `json:"time"`
		Timezone string `json:"timezone"`
	}
	tests := []struct {
		name, params, zone, offset string
	}{
		{"now tells the time in a named zone", `{"timezone":"Asia/Tokyo"}`, "Asia/Tokyo", "+09:00"},
		{"now tells UTC without a zone", `{}`, "UTC", "Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := s.call(t, "clock", "now", tt.params)
			out := decode[nowOut](t, r, err)
			at, perr := time.Parse(time.RFC3339, out.Time)
			if perr != nil || out.Timezone != tt.zone || out.Time[len(out.Time)-len(tt.offset):] != tt.offset {
				t.Fatalf("reply %s (%v)", r.Data, perr)
			}
			if d := time.Since(at); d < -time.Second || d > 5*time.Second {
				t.Errorf("time %s is %v away from now", out.Time, d)
			}
		})
	}
	for _, zone := range []string{"Mars/Olympus_Mons", "Local"} {
		t.Run("now refuses the zone "+zone, func(t *testing.T) {
			_, err := s.call(t, "clock", "now", `{"timezone":"`+zone+`"}`)
			wantToolError(t, err, "invalid_timezone", 400)
		})
	}
	t.Run("wait tells the time after the wait", func(t *testing.T) {
		start := time.Now()
		r, err := s.call(t, "clock", "wait", `{"ms":300,"timezone":"Asia/Tokyo"}`)
		out := decode[nowOut](t, r, err)
		if took := time.Since(start); took < 300*time.Millisecond || out.Timezone != "Asia/Tokyo" {
			t.Fatalf("reply %s after %v, want Tokyo's time after 300ms at least", r.Data, took)
		}
	})
	t.Run("wait refuses a wait over a minute", func(t *testing.T) {
		_, err := s.call(t, "clock", "wait", `{"ms":60001}`)
		wantToolError(t, err, "invalid_params", 400)
	})
}

func TestRunDrainsEveryTool(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	store := testenv.Store(t, nc, 1)
	view := testenv.View(t, store)
	makeState(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- demo.Run(ctx, nc, workers.WithLogger(testenv.Logger(t))) }()
	testenv.Eventually(t, 5*time.Second, "the demo tools are live", func() bool {
		return view.Snapshot().Instances("email")+view.Snapshot().Instances("echo")+view.Snapshot().Instances("clock") == 3
	})
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	testenv.Eventually(t, 500*time.Millisecond, "presence removed", func() bool {
		return view.Snapshot().Instances("email")+view.Snapshot().Instances("echo")+view.Snapshot().Instances("clock") == 0
	})
}

// BenchmarkEcho is one call of the echo tool over a real NATS server, as the edge
// makes it: the worker SDK's intake, call and reply, and the bus's request-reply, the
// part of every tool call behind the edge.
func BenchmarkEcho(b *testing.B) {
	s := start(b)
	req := &wire.Request{Tool: "echo", Method: "echo", CallID: "req_bench", RequestID: "req_bench", Account: "dev",
		Data: []byte(`{"message":"hello, gateway","n":42}`),
	}
	b.ReportAllocs()
	for b.Loop() {
		req.Deadline = time.Now().Add(5 * time.Second)
		r, err := bus.Do(context.Background(), s.nc, wire.DefaultSubjects, req)
		if err != nil || r.Status != 200 {
			b.Fatal(r, err)
		}
	}
}
