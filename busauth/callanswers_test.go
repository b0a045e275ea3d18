package busauth_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestLargeAnswersOnTheEdgesCredentials: on a secured server, an edge on its own
// credentials keeps an answer past one message in the answers' object store, reads it
// back, and brings the store's TTL along when it changes the calls bucket's.
func TestLargeAnswersOnTheEdgesCredentials(t *testing.T) {
	e := newWorkerEnv(t)
	store, err := registry.Open(e.ctx, e.edge, registry.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	open := func(cfg calls.Config) *calls.Calls {
		t.Helper()
		cfg.Subjects = wire.DefaultSubjects
		cs, err := calls.Open(e.ctx, e.edge, store, cfg, testenv.Logger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Drain(context.Background(), errors.New("test over")) })
		return cs
	}
	cs := open(calls.Config{})
	p := registry.Principal{Account: "acme", Key: &registry.Key{ID: "key_1"}}
	large := bytes.Repeat([]byte("y"), 3<<20)
	rec, err := cs.Start(e.ctx, p, calls.Record{Tool: "beta", Method: "m", Deadline: time.Now().Add(time.Minute)},
		func(context.Context, calls.Record) calls.Outcome {
			return calls.Outcome{Status: calls.Completed, Answer: calls.Answer{Status: 200}, Body: large}
		})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the large answer is kept and read", func() bool {
		got, body, err := cs.Get(e.ctx, p, rec.ID)
		return err == nil && got.Status == calls.Completed && got.Answer.InStore && bytes.Equal(body, large)
	})
	open(calls.Config{TTL: 48 * time.Hour, Update: true})
	obj, err := store.JetStream().ObjectStore(e.ctx, calls.AnswerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := obj.Status(e.ctx); err != nil || st.TTL() != 48*time.Hour+time.Minute {
		t.Fatalf("the answers' TTL after the calls bucket's changed: %v", err)
	}
	e.edgeErrs.none(t)
}
