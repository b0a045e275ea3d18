package calls_test

import (
	"context"
	"errors"
	"testing"
	"time"

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
// since the call ended.
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
}
