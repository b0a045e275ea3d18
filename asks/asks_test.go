package asks_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

type env struct {
	admin  *nats.Conn // the edge's connection: answers asks (testenv.Store)
	worker *nats.Conn // a connection with the inboxes of tool alpha
	js     jetstream.JetStream
	ctx    context.Context
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	testenv.Store(t, nc, 1)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "tg-mcp-events", Subjects: wire.DefaultSubjects.EventLog()}); err != nil {
		t.Fatal(err)
	}
	worker, err := nats.Connect(srv.ClientURL(), nats.CustomInboxPrefix("_INBOX.tool.alpha"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Close)
	return &env{admin: nc, worker: worker, js: js, ctx: ctx}
}

func (e *env) ask(t *testing.T, m *nats.Msg) ([]byte, uint64, error) {
	t.Helper()
	answer, err := e.worker.RequestMsg(m, 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", m.Subject, err)
	}
	return wire.ReadAskReply(answer)
}

func TestRecord(t *testing.T) {
	e := newEnv(t)
	s := wire.DefaultSubjects
	rec := &wire.Tool{ID: "alpha", Version: "1.0.0", Methods: []wire.Method{{Name: "m"}}}
	m, _ := s.AskRecordMsg(rec)
	_, first, err := e.ask(t, m)
	if err != nil || first == 0 {
		t.Fatalf("first write: %d %v", first, err)
	}
	t.Run("an unchanged record is left alone", func(t *testing.T) {
		m, _ := s.AskRecordMsg(rec)
		if _, rev, err := e.ask(t, m); err != nil || rev != first {
			t.Fatalf("got revision %d (first %d), %v", rev, first, err)
		}
	})
	t.Run("another tool's record, asked for as alpha's, is refused", func(t *testing.T) {
		m, _ := s.AskRecordMsg(&wire.Tool{ID: "beta", Version: "1.0.0", Methods: []wire.Method{}})
		m.Subject = s.AskRecord("alpha")
		var ae *wire.AskError
		if _, _, err := e.ask(t, m); !errors.As(err, &ae) || ae.Code != wire.AskBadRequest {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a record that breaks the rules is refused", func(t *testing.T) {
		m, _ := s.AskRecordMsg(&wire.Tool{ID: "alpha", Version: "1.0.0", Methods: []wire.Method{{Name: "bad.name"}}})
		var ae *wire.AskError
		if _, _, err := e.ask(t, m); !errors.As(err, &ae) || ae.Code != wire.AskBadRequest {
			t.Fatalf("got %v", err)
		}
	})
	kv, _ := e.js.KeyValue(e.ctx, wire.BucketTools)
	if st, _ := kv.Status(e.ctx); st.Values() != 1 {
		t.Fatalf("tg-tools holds %d values, want alpha's only", st.Values())
	}
}

func TestPresenceNeedsItsTTLAndItsName(t *testing.T) {
	e := newEnv(t)
	s := wire.DefaultSubjects
	m, _ := s.AskPresenceMsg(&wire.Presence{Tool: "alpha", Instance: "i1"}, 3*time.Second)
	if _, _, err := e.ask(t, m); err != nil {
		t.Fatal(err)
	}
	m, _ = s.AskPresenceMsg(&wire.Presence{Tool: "alpha", Instance: "i2"}, 3*time.Second)
	m.Subject = s.AskPresence("alpha", "i1")
	if _, _, err := e.ask(t, m); err == nil {
		t.Fatal("a presence of another instance was taken")
	}
	m, _ = s.AskPresenceMsg(&wire.Presence{Tool: "alpha", Instance: "i1"}, 3*time.Second)
	m.Header.Del(wire.HeaderTTL)
	if _, _, err := e.ask(t, m); err == nil {
		t.Fatal("a presence without a time to live was taken")
	}
	if _, _, err := e.ask(t, s.AskPresenceDeleteMsg("alpha", "i1")); err != nil {
		t.Fatal(err)
	}
	kv, _ := e.js.KeyValue(e.ctx, wire.BucketPresence)
	if _, err := kv.Get(e.ctx, "alpha.i1"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the presence is still there: %v", err)
	}
}

// TestStreamAnswerIsLoggedWithTheReplyHeadersOnly: a tool's answer on a stream answer
// subject is kept in the event log beside the stream, with the wire contract's reply
// headers and none of JetStream's.
func TestStreamAnswerIsLoggedWithTheReplyHeadersOnly(t *testing.T) {
	e := newEnv(t)
	s := wire.DefaultSubjects
	m := nats.NewMsg(s.StreamAnswer("alpha", "S1", "P1"))
	m.Data = []byte(`{"ok":true}`)
	m.Header.Set(wire.HeaderStatus, "200")
	m.Header.Set(wire.HeaderContentType, "application/json")
	m.Header.Set("Nats-Msg-Id", "steer")
	m.Header.Set("Nats-Rollup", "all")
	m.Reply = "$KV.tg-keys.x"
	if err := e.worker.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	st, err := e.js.Stream(e.ctx, "tg-mcp-events")
	if err != nil {
		t.Fatal(err)
	}
	var got *jetstream.RawStreamMsg
	testenv.WaitFor(t, "the answer in the log", func() bool {
		got, err = st.GetLastMsgForSubject(e.ctx, s.StreamAnswerLogged("alpha", "S1", "P1"))
		return err == nil
	})
	if string(got.Data) != `{"ok":true}` || got.Header.Get(wire.HeaderStatus) != "200" || got.Header.Get(wire.HeaderContentType) != "application/json" {
		t.Fatalf("logged %q %v", got.Data, got.Header)
	}
	if got.Header.Get("Nats-Msg-Id") != "" || got.Header.Get("Nats-Rollup") != "" {
		t.Fatalf("a JetStream header passed: %v", got.Header)
	}
	keys, _ := e.js.KeyValue(e.ctx, "tg-keys")
	if st, _ := keys.Status(e.ctx); st.Values() != 0 {
		t.Fatal("something was written to tg-keys")
	}
}

// TestKeysAnswerIsBoundedByMaxPayload: the keys of a state bucket go in one answer;
// past what a message carries (the server's max_payload, less 1 KiB for headers) the
// edge says too_large rather than send an answer the server would refuse.
func TestKeysAnswerIsBoundedByMaxPayload(t *testing.T) {
	srv := testenv.ServerWith(t, func(cfg *bus.ServerConfig) { cfg.MaxPayload = 4096 })
	nc := testenv.Conn(t, srv.ClientURL())
	testenv.Store(t, nc, 1)
	ctx := testenv.Context(t)
	if _, err := registry.CreateToolState(ctx, nc, "alpha", registry.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	js, _ := jetstream.New(nc)
	kv, err := js.KeyValue(ctx, wire.StateBucket("alpha"))
	if err != nil {
		t.Fatal(err)
	}
	worker, err := nats.Connect(srv.ClientURL(), nats.CustomInboxPrefix("_INBOX.tool.alpha"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Close)
	keys := func() ([]byte, error) {
		answer, err := worker.RequestMsg(wire.DefaultSubjects.AskStateMsg("alpha", wire.StateKeys, "", nil, 0, 0), 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		body, _, err := wire.ReadAskReply(answer)
		return body, err
	}
	// Each key is 20 bytes, 23 in the answer's JSON ("...",): 133 fit in 3072 bytes.
	put := func(from, to int) {
		for i := from; i < to; i++ {
			if _, err := kv.Put(ctx, fmt.Sprintf("key-%016d", i), []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(0, 133)
	if body, err := keys(); err != nil || len(body) > 3072 {
		t.Fatalf("133 keys: %d bytes, %v", len(body), err)
	}
	put(133, 134)
	var ae *wire.AskError
	if _, err := keys(); !errors.As(err, &ae) || ae.Code != wire.AskTooLarge {
		t.Fatalf("134 keys: got %v, want too_large", err)
	}
}

// TestConcurrencyBound: at its bound an edge takes no more asks until one it works on
// ends; the others wait in its subscriptions, and none is lost. 64 asks sent at once
// to an edge taking one at a time: each is answered, and it never worked on two.
func TestConcurrencyBound(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	if _, err := registry.Open(testenv.Context(t), nc, registry.DefaultOptions()); err != nil {
		t.Fatal(err)
	}
	a, err := asks.Serve(nc, wire.DefaultSubjects, 1, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	worker, err := nats.Connect(srv.ClientURL(), nats.CustomInboxPrefix("_INBOX.tool.alpha"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(worker.Close)
	const sent = 64
	answers := make(chan error, sent)
	for i := range sent {
		p := &wire.Presence{Tool: "alpha", Instance: fmt.Sprintf("i%d", i)}
		m, _ := wire.DefaultSubjects.AskPresenceMsg(p, 10*time.Second)
		go func() {
			answer, err := worker.RequestMsg(m, testenv.Patience)
			if err == nil {
				_, _, err = wire.ReadAskReply(answer)
			}
			answers <- err
		}()
	}
	for range sent {
		if err := <-answers; err != nil {
			t.Fatalf("an ask sent with %d others to an edge taking one at a time: %v", sent-1, err)
		}
	}
	if peak := a.Peak(); peak != 1 {
		t.Fatalf("the edge worked on %d asks at once, its bound is 1", peak)
	}
}
