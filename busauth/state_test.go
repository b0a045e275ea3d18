package busauth_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// stateEnv is a secured server where the admin made the state buckets of tools
// alpha, beta and alpha-2, an edge answering asks, and a connection with the worker
// credentials of alpha.
type stateEnv struct {
	*workerEnv
	log   *testenv.ServerLog
	state *workers.State // alpha's, through the SDK on the worker's connection
}

func newStateEnv(t *testing.T) *stateEnv {
	t.Helper()
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	log := testenv.RecordServerLog(srv, false)
	e := newWorkerEnvOn(t, sec, srv)
	for _, tool := range []string{"alpha", "beta", "alpha-2"} {
		if made, err := registry.CreateToolState(e.ctx, e.admin, tool, registry.StateOptions{}); err != nil || !made {
			t.Fatalf("state of %s: made %v, %v", tool, made, err)
		}
	}
	st, err := workers.New(e.worker, workers.Tool{ID: "alpha"}).State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	return &stateEnv{workerEnv: e, log: log, state: st}
}

// TestWorkerCredentialsUseTheirToolsState does everything Worker.State does with
// tool alpha's state, with alpha's worker credentials and an edge's: each works, and
// the server refuses neither anything.
func TestWorkerCredentialsUseTheirToolsState(t *testing.T) {
	e := newStateEnv(t)
	ctx, st := e.ctx, e.state

	rev, err := st.Put(ctx, "k1", []byte("v1"), 0)
	if err != nil {
		t.Fatal(err)
	}
	if v, r, err := st.Get(ctx, "k1"); err != nil || string(v) != "v1" || r != rev {
		t.Fatalf("get: %q at %d (put at %d), %v", v, r, rev, err)
	}
	if rev, err = st.Update(ctx, "k1", []byte("v2"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(ctx, "k1", []byte("stale"), rev-1); !errors.Is(err, workers.ErrKeyExists) {
		t.Fatalf("an update of an old revision: %v", err)
	}
	if _, err := st.Create(ctx, "k2", []byte("short-lived"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Create(ctx, "k2", []byte("again"), 0); !errors.Is(err, workers.ErrKeyExists) {
		t.Fatalf("creating a key that exists: %v", err)
	}
	if _, err := st.Put(ctx, "k3", []byte("gone soon"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "k3"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Get(ctx, "k3"); !errors.Is(err, workers.ErrKeyNotFound) {
		t.Fatalf("a deleted key: %v", err)
	}
	keys, err := st.Keys(ctx)
	slices.Sort(keys)
	if err != nil || !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("keys %v, %v", keys, err)
	}
	if _, _, err := st.Get(ctx, "a key*"); err == nil || !strings.Contains(err.Error(), "state key") {
		t.Fatalf("a bad key: %v", err)
	}
	// What alpha's worker stored is in alpha's bucket, as the admin sees it.
	js, _ := jetstream.New(e.admin)
	kv, err := js.KeyValue(ctx, "tg-state-alpha")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kv.Get(ctx, "k1"); err != nil || string(got.Value()) != "v2" {
		t.Fatalf("the bucket holds %v, %v", got, err)
	}
	e.errs.none(t)
	e.edgeErrs.none(t)
	if v := e.log.Violations(); len(v) != 0 {
		t.Fatalf("the server refused %v", v)
	}
}

// TestWorkerCredentialsRefuseOtherState tries, with tool alpha's worker credentials,
// what its workers must not do with state: reach any bucket through JetStream (its
// own too), or ask for another tool's, each refused by the server; and an ask with a
// reply subject outside alpha's inbox goes unanswered.
func TestWorkerCredentialsRefuseOtherState(t *testing.T) {
	e := newStateEnv(t)
	own := "KV_tg-state-alpha"
	publish := []struct{ name, subject string }{
		{"creating its own bucket", "$JS.API.STREAM.CREATE." + own},
		{"changing its own bucket's settings", "$JS.API.STREAM.UPDATE." + own},
		{"deleting its own bucket", "$JS.API.STREAM.DELETE." + own},
		{"purging its own bucket", "$JS.API.STREAM.PURGE." + own},
		{"creating any bucket", "$JS.API.STREAM.CREATE.KV_scratch"},
		{"listing the buckets", "$JS.API.STREAM.NAMES"},
		{"a consumer on its own bucket", "$JS.API.CONSUMER.CREATE." + own + ".c1.$KV.tg-state-alpha.>"},
		{"a durable consumer on its own bucket", "$JS.API.CONSUMER.DURABLE.CREATE." + own + ".d1"},
	}
	for _, other := range []string{"beta", "alpha-2"} {
		b := "tg-state-" + other
		st := "KV_" + b
		who := "tool " + other + "'s"
		publish = append(publish, []struct{ name, subject string }{
			{"asking for " + who + " state", "tg.state." + other + ".get"},
			{"writing " + who + " state", "$KV." + b + ".k"},
			{"reading " + who + " state", "$JS.API.DIRECT.GET." + st + ".$KV." + b + ".k"},
			{"opening " + who + " state", "$JS.API.STREAM.INFO." + st},
			{"answering " + who + " state's flow control", "$JS.FC." + st + ".w1.x"},
		}...)
	}
	e.refusesPublishing(t, publish)

	t.Run("the SDK opening another tool's state fails", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		defer cancel()
		if _, err := workers.New(e.worker, workers.Tool{ID: "beta"}).State(ctx); err == nil {
			t.Fatal("alpha's worker opened beta's state")
		}
		e.errs.expect(t, `Publish to "tg.state.beta.info"`)
	})
	t.Run("an ask answered anywhere but its tool's inbox goes unanswered and does nothing", func(t *testing.T) {
		probe, err := e.admin.SubscribeSync("probe.>")
		if err != nil {
			t.Fatal(err)
		}
		for _, reply := range []string{"probe.x", "_INBOX.tool.beta.x", "_INBOX.tool.alpha.*"} {
			m := wire.DefaultSubjects.AskStateMsg("alpha", wire.StatePut, "forged", []byte("x"), 0, 0)
			m.Reply = reply
			if err := e.worker.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		// An ask sent after them, answered, says the edge has taken them.
		if _, err := e.state.Put(e.ctx, "after", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		if m, err := probe.NextMsg(200 * time.Millisecond); err == nil {
			t.Fatalf("the edge answered on %s", m.Subject)
		}
		if _, _, err := e.state.Get(e.ctx, "forged"); !errors.Is(err, workers.ErrKeyNotFound) {
			t.Fatalf("an ask with a foreign reply subject was acted on: %v", err)
		}
	})
	t.Run("making a state bucket as the admin does fails", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		defer cancel()
		if _, err := registry.CreateToolState(ctx, e.worker, "gamma", registry.StateOptions{}); err == nil {
			t.Fatal("alpha's worker made a bucket")
		}
	})
	t.Run("nothing it was refused was stored or made", func(t *testing.T) {
		js, err := jetstream.New(e.admin)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []string{"tg-state-beta", "tg-state-alpha-2"} {
			kv, err := js.KeyValue(e.ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			st, err := kv.Status(e.ctx)
			if err != nil || st.Values() != 0 {
				t.Errorf("%s: %v values, %v", b, st.Values(), err)
			}
		}
		names := js.StreamNames(e.ctx)
		var streams []string
		for n := range names.Name() {
			streams = append(streams, n)
		}
		for _, n := range []string{"KV_tg-state-gamma", "KV_scratch"} {
			if slices.Contains(streams, n) {
				t.Errorf("%s was made", n)
			}
		}
	})
}

// TestStateWithoutBucket: a tool whose bucket no admin made gets ErrNoState.
func TestStateWithoutBucket(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	e := newWorkerEnvOn(t, sec, srv)
	_, err := workers.New(e.worker, workers.Tool{ID: "alpha"}).State(e.ctx)
	if !errors.Is(err, workers.ErrNoState) {
		t.Fatalf("got %v, want ErrNoState", err)
	}
}
