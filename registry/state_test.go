package registry_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestToolStateHoldsAtMostMaxBytes fills a tool's state bucket to its bound: the
// writes that fit are kept, the first that does not is refused by the server and
// stores nothing, and what was written stays readable.
func TestToolStateHoldsAtMostMaxBytes(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	ctx := testenv.Context(t)
	const maxBytes = 4096
	if made, err := registry.CreateToolState(ctx, nc, "filler", registry.StateOptions{MaxBytes: maxBytes}); err != nil || !made {
		t.Fatalf("made %v, %v", made, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "tg-state-filler")
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("v", 500))
	var kept int
	var refused error
	for i := range 100 {
		if _, err := kv.Put(ctx, fmt.Sprintf("k%02d", i), value); err != nil {
			refused = err
			break
		}
		kept++
	}
	if refused == nil || !strings.Contains(refused.Error(), "maximum bytes exceeded") {
		t.Fatalf("after %d writes: %v, want the server's maximum bytes refusal", kept, refused)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	perWrite := st.Bytes() / uint64(kept)
	if st.Values() != uint64(kept) || st.Bytes() > maxBytes || st.Bytes()+perWrite <= maxBytes {
		t.Fatalf("%d values in %d bytes (%d a write) after %d writes: the bound is %d", st.Values(), st.Bytes(), perWrite, kept, maxBytes)
	}
	if e, err := kv.Get(ctx, fmt.Sprintf("k%02d", kept-1)); err != nil || len(e.Value()) != len(value) {
		t.Fatalf("the last write kept: %v %v", e, err)
	}
}

// TestCreateToolStateKeepsWhatExists: a bucket made before, with other settings, is
// kept as it is; bad settings and tool ids are refused and make nothing.
func TestCreateToolStateKeepsWhatExists(t *testing.T) {
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	ctx := testenv.Context(t)
	if made, err := registry.CreateToolState(ctx, nc, "mail", registry.StateOptions{MaxBytes: 1 << 20}); err != nil || !made {
		t.Fatalf("made %v, %v", made, err)
	}
	if made, err := registry.CreateToolState(ctx, nc, "mail", registry.StateOptions{}); err != nil || made {
		t.Fatalf("the second time: made %v, %v", made, err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "tg-state-mail")
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cfg := st.Config(); cfg.MaxBytes != 1<<20 || cfg.LimitMarkerTTL != time.Minute || cfg.History != 1 {
		t.Fatalf("settings %+v", cfg)
	}
	// A key may carry a TTL of its own.
	if _, err := kv.Create(ctx, "brief", []byte("x"), jetstream.KeyTTL(time.Second)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the key expires", func() bool {
		_, err := kv.Get(ctx, "brief")
		return err != nil
	})

	for _, c := range []struct {
		tool string
		o    registry.StateOptions
		want string
	}{
		{"Bad.Tool", registry.StateOptions{}, "tool id"},
		{"fine", registry.StateOptions{MaxBytes: -1}, "max bytes"},
		{"fine", registry.StateOptions{MaxBytes: registry.MaxStateMaxBytes + 1}, "max bytes"},
		{"fine", registry.StateOptions{Replicas: 6}, "replicas"},
	} {
		if _, err := registry.CreateToolState(ctx, nc, c.tool, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want an error naming %s", c.tool, c.o, err, c.want)
		}
	}
	if _, err := js.KeyValue(ctx, "tg-state-fine"); err == nil {
		t.Error("refused settings made a bucket")
	}
	if made, err := registry.CreateToolState(ctx, nc, "fine", registry.StateOptions{MaxBytes: registry.MaxStateMaxBytes}); err != nil || !made {
		t.Errorf("the largest bound: made %v, %v", made, err)
	}
}

// TestBucketsMadeAtOnceCanBeOpened: processes that make the same bucket at once (two
// demo workers their state bucket, two edges the registry) may each open it, from
// any node, as soon as making it returned: a cluster answers a second maker when the
// bucket is assigned, before its stream exists, and opening it then said "not found".
func TestBucketsMadeAtOnceCanBeOpened(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := testenv.NewCluster(t)
	c.WaitJetStream(t)
	var js []jetstream.JetStream
	var conns []*nats.Conn
	for i := range c.Servers {
		nc := testenv.Conn(t, c.Servers[i].ClientURL())
		j, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		js, conns = append(js, j), append(conns, nc)
	}
	ctx := testenv.Context(t)
	for i := range 12 {
		tool := fmt.Sprintf("t%d", i)
		var wg sync.WaitGroup
		for k := range 2 {
			wg.Go(func() {
				if _, err := registry.CreateToolState(ctx, conns[k], tool, registry.StateOptions{Replicas: 3}); err != nil {
					t.Errorf("maker %d of %s: %v", k, tool, err)
					return
				}
				for n := range js {
					if _, err := js[n].KeyValue(ctx, wire.StateBucket(tool)); err != nil {
						t.Errorf("%s made by %d, opened on node %d: %v", wire.StateBucket(tool), k, n+1, err)
					}
				}
			})
		}
		wg.Wait()
	}
}
