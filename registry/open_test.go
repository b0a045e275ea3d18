package registry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestOpenKeepsTheBucketsAsTheyAre: a process opening an existing registry takes
// the settings it leaves unset from the buckets, refuses settings that differ from
// theirs without touching the buckets, and changes them only when told to.
func TestOpenKeepsTheBucketsAsTheyAre(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	ctx := testenv.Context(t)
	ttlOf := func(bucket string) time.Duration {
		t.Helper()
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := js.KeyValue(ctx, bucket)
		if err != nil {
			t.Fatal(err)
		}
		st, err := kv.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return st.TTL()
	}

	first, err := registry.Open(ctx, nc, registry.Options{PresenceTTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if o := first.Options(); o.Replicas != 1 || o.PresenceTTL != 3*time.Second || o.SessionTTL != registry.DefaultOptions().SessionTTL {
		t.Fatalf("creating with PresenceTTL 3s: options %+v, want it and the defaults", o)
	}

	t.Run("unset settings are the buckets' own", func(t *testing.T) {
		s, err := registry.Open(ctx, nc, registry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if o := s.Options(); o.Replicas != 1 || o.PresenceTTL != 3*time.Second {
			t.Fatalf("options %+v, want the buckets' replicas 1 and presence TTL 3s", o)
		}
	})

	t.Run("a setting that differs is refused and changes nothing", func(t *testing.T) {
		for _, tc := range []struct {
			opts            registry.Options
			bucket, setting string
		}{
			{registry.Options{PresenceTTL: 10 * time.Second}, registry.BucketPresence, "TTL"},
			{registry.Options{Replicas: 3}, registry.BucketTools, "replicas"},
			{registry.Options{SessionTTL: time.Hour}, registry.BucketSessions, "TTL"},
		} {
			_, err := registry.Open(ctx, nc, tc.opts)
			var mm *registry.MismatchError
			if !errors.As(err, &mm) || !errors.Is(err, registry.ErrSettingsDiffer) {
				t.Fatalf("Open(%+v): %v, want a MismatchError", tc.opts, err)
			}
			if mm.Bucket != tc.bucket || mm.Setting != tc.setting || !strings.Contains(err.Error(), tc.bucket) {
				t.Fatalf("Open(%+v): %v, want bucket %s and setting %s named", tc.opts, err, tc.bucket, tc.setting)
			}
		}
		if ttl := ttlOf(registry.BucketPresence); ttl != 3*time.Second {
			t.Fatalf("presence TTL %v after refused opens, want the 3s it had", ttl)
		}
	})

	t.Run("Update changes them on purpose", func(t *testing.T) {
		s, err := registry.Open(ctx, nc, registry.Options{PresenceTTL: 5 * time.Second, Update: true})
		if err != nil {
			t.Fatal(err)
		}
		if ttl := ttlOf(registry.BucketPresence); ttl != 5*time.Second || s.Options().PresenceTTL != 5*time.Second {
			t.Fatalf("presence TTL %v (options %v) after Update, want 5s", ttl, s.Options().PresenceTTL)
		}
	})
}
