package calls_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func open(t *testing.T, store *registry.Store, cfg calls.Config) (*calls.Calls, error) {
	t.Helper()
	cfg.Subjects = wire.DefaultSubjects
	cs, err := calls.Open(testenv.Context(t), store.JetStream().Conn(), store, cfg, testenv.Logger(t))
	if err == nil {
		t.Cleanup(func() { cs.Drain(context.Background(), errors.New("test over")) })
	}
	return cs, err
}

func bucketTTL(t *testing.T, store *registry.Store) time.Duration {
	t.Helper()
	kv, err := store.JetStream().KeyValue(testenv.Context(t), calls.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.TTL()
}

// TestTheBucketKeepsOneTTL: the first edge makes the bucket with its TTL (DefaultTTL
// unless it asks for one); an edge that asks for none takes the bucket's, one that asks
// for another is refused unless it updates the bucket on purpose.
func TestTheBucketKeepsOneTTL(t *testing.T) {
	t.Run("made with the default", func(t *testing.T) {
		store := testenv.Store(t, testenv.Conn(t, testenv.Server(t).ClientURL()), 1)
		if _, err := open(t, store, calls.Config{}); err != nil {
			t.Fatal(err)
		}
		if got := bucketTTL(t, store); got != calls.DefaultTTL {
			t.Fatalf("TTL %v, want %v", got, calls.DefaultTTL)
		}
	})
	t.Run("made with a TTL, kept, refused, changed", func(t *testing.T) {
		store := testenv.Store(t, testenv.Conn(t, testenv.Server(t).ClientURL()), 1)
		if _, err := open(t, store, calls.Config{TTL: 48 * time.Hour}); err != nil {
			t.Fatal(err)
		}
		if _, err := open(t, store, calls.Config{}); err != nil || bucketTTL(t, store) != 48*time.Hour {
			t.Fatalf("an edge asking for no TTL: %v, TTL %v", err, bucketTTL(t, store))
		}
		if _, err := open(t, store, calls.Config{TTL: 72 * time.Hour}); !errors.Is(err, registry.ErrSettingsDiffer) {
			t.Fatalf("an edge asking for another TTL: %v, want it refused", err)
		}
		if _, err := open(t, store, calls.Config{TTL: 72 * time.Hour, Update: true}); err != nil || bucketTTL(t, store) != 72*time.Hour {
			t.Fatalf("an edge updating the TTL: %v, TTL %v", err, bucketTTL(t, store))
		}
	})
	t.Run("a negative TTL is refused", func(t *testing.T) {
		if err := (calls.Config{TTL: -time.Second}).Validate(); err == nil {
			t.Fatal("accepted")
		}
	})
}

// TestRecordsExpire: a call's record, and its answer, are gone once the TTL passed
// since the call ended; so is an answer past one message, kept in the answers' object
// store with the same TTL.
func TestRecordsExpire(t *testing.T) {
	store := testenv.Store(t, testenv.Conn(t, testenv.Server(t).ClientURL()), 1)
	cs, err := open(t, store, calls.Config{TTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	p := registry.Principal{Account: "acme", Key: &registry.Key{ID: "key_1"}}
	rec, err := cs.Start(testenv.Context(t), p, calls.Record{Tool: "echo", Method: "echo", Deadline: time.Now().Add(time.Minute)},
		func(context.Context, calls.Record) calls.Outcome {
			return calls.Outcome{Status: calls.Completed, Answer: calls.Answer{Status: 200}, Body: []byte("{}")}
		})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the call ends", func() bool {
		got, body, err := cs.Get(testenv.Context(t), p, rec.ID)
		return err == nil && got.Status == calls.Completed && string(body) == "{}"
	})
	if _, _, err := cs.Get(testenv.Context(t), registry.Principal{Account: "acme", Key: &registry.Key{ID: "key_2"}}, rec.ID); !errors.Is(err, calls.ErrNotFound) {
		t.Fatalf("another key's read: %v, want ErrNotFound", err)
	}
	testenv.WaitFor(t, "the record expires", func() bool {
		_, _, err := cs.Get(testenv.Context(t), p, rec.ID)
		return errors.Is(err, calls.ErrNotFound)
	})

	large := bytes.Repeat([]byte("x"), 3<<20)
	rec, err = cs.Start(testenv.Context(t), p, calls.Record{Tool: "echo", Method: "echo", Deadline: time.Now().Add(time.Minute)},
		func(context.Context, calls.Record) calls.Outcome {
			return calls.Outcome{Status: calls.Completed, Answer: calls.Answer{Status: 200}, Body: large}
		})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.JetStream().ObjectStore(testenv.Context(t), calls.AnswerBucket)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := obj.Status(testenv.Context(t)); err != nil || st.TTL() != 2*time.Second {
		t.Fatalf("the answers' bucket: %v, want the records' TTL and as much again", err)
	}
	testenv.WaitFor(t, "the large answer is kept and read", func() bool {
		got, body, err := cs.Get(testenv.Context(t), p, rec.ID)
		return err == nil && got.Status == calls.Completed && got.Answer.InStore && bytes.Equal(body, large)
	})
	testenv.WaitFor(t, "the large answer expires with its record", func() bool {
		_, _, err := cs.Get(testenv.Context(t), p, rec.ID)
		_, gerr := obj.GetInfo(testenv.Context(t), rec.ID)
		return errors.Is(err, calls.ErrNotFound) && errors.Is(gerr, jetstream.ErrObjectNotFound)
	})
}

// TestCancelledCallsKeepNoAnswer: a call cancelled while it runs keeps no answer, not
// even one past a message that its run stored before it learned of the cancel.
func TestCancelledCallsKeepNoAnswer(t *testing.T) {
	store := testenv.Store(t, testenv.Conn(t, testenv.Server(t).ClientURL()), 1)
	cs, err := open(t, store, calls.Config{})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := store.JetStream().ObjectStore(testenv.Context(t), calls.AnswerBucket)
	if err != nil {
		t.Fatal(err)
	}
	p := registry.Principal{Account: "acme", Key: &registry.Key{ID: "key_1"}}
	stored := make(chan struct{})
	rec, err := cs.Start(testenv.Context(t), p, calls.Record{Tool: "echo", Method: "echo", Deadline: time.Now().Add(time.Minute)},
		func(ctx context.Context, rec calls.Record) calls.Outcome {
			<-ctx.Done()
			// As a run that ended at the moment of the cancel: its answer is stored first.
			if _, err := obj.PutBytes(context.Background(), rec.ID, []byte("stale")); err == nil {
				close(stored)
			}
			return calls.Outcome{Status: calls.Completed, Answer: calls.Answer{Status: 200}, Body: bytes.Repeat([]byte("z"), 2<<20)}
		})
	if err != nil {
		t.Fatal(err)
	}
	id := rec.ID
	if _, err := cs.Cancel(testenv.Context(t), p, id); err != nil {
		t.Fatal(err)
	}
	<-stored
	testenv.WaitFor(t, "the cancelled call's answer is removed", func() bool {
		_, err := obj.GetInfo(testenv.Context(t), id)
		return errors.Is(err, jetstream.ErrObjectNotFound)
	})
	if got, body, err := cs.Get(testenv.Context(t), p, id); err != nil || got.Status != calls.Cancelled || body != nil {
		t.Fatalf("the cancelled call: %+v, %d bytes, %v", got, len(body), err)
	}
}
