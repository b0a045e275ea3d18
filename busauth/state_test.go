package busauth_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// stateEnv is a secured server where the admin made the state buckets of tools
// alpha, beta and alpha-2, and a connection with the worker credentials of alpha,
// its inboxes alpha's.
type stateEnv struct {
	*workerEnv
	log   *testenv.ServerLog
	state jetstream.KeyValue // alpha's, through the SDK on the worker's connection
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
	kv, err := workers.New(e.worker, workers.Tool{ID: "alpha"}).State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	return &stateEnv{workerEnv: e, log: log, state: kv}
}

// TestWorkerCredentialsUseTheirToolsState does everything nats.go's KeyValue does
// with tool alpha's state bucket, with alpha's worker credentials: each works, and
// the server logs no refusal.
func TestWorkerCredentialsUseTheirToolsState(t *testing.T) {
	e := newStateEnv(t)
	ctx, kv := e.ctx, e.state

	rev, err := kv.Put(ctx, "k1", []byte("v1"))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := kv.Get(ctx, "k1"); err != nil || string(got.Value()) != "v1" {
		t.Fatalf("get: %v %v", got, err)
	}
	if rev, err = kv.Update(ctx, "k1", []byte("v2"), rev); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Update(ctx, "k1", []byte("stale"), rev-1); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("an update of an old revision: %v", err)
	}
	if got, err := kv.GetRevision(ctx, "k1", rev); err != nil || string(got.Value()) != "v2" {
		t.Fatalf("get revision: %v %v", got, err)
	}
	if _, err := kv.Create(ctx, "k2", []byte("short-lived"), jetstream.KeyTTL(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Create(ctx, "k2", []byte("again")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("creating a key that exists: %v", err)
	}
	if _, err := kv.Put(ctx, "k3", []byte("gone soon")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, "k3"); err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, "k4", []byte("purged soon")); err != nil {
		t.Fatal(err)
	}
	if err := kv.Purge(ctx, "k4"); err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(ctx)
	slices.Sort(keys)
	if err != nil || !slices.Equal(keys, []string{"k1", "k2"}) {
		t.Fatalf("keys %v, %v", keys, err)
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for range lister.Keys() {
		n++
	}
	if n != 2 {
		t.Fatalf("listed %d keys", n)
	}
	if h, err := kv.History(ctx, "k1"); err != nil || len(h) != 1 { // history 1: only the last
		t.Fatalf("history %v, %v", h, err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	seen := map[string]string{}
	for e := range w.Updates() {
		if e == nil {
			break // every current value seen
		}
		seen[e.Key()] = string(e.Value())
	}
	if _, err := kv.Put(ctx, "k5", []byte("live")); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-w.Updates():
		if e.Key() != "k5" || string(e.Value()) != "live" {
			t.Fatalf("watched %s=%s", e.Key(), e.Value())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch saw no change")
	}
	if seen["k1"] != "v2" || seen["k2"] != "short-lived" {
		t.Fatalf("the watch began with %v", seen)
	}
	if err := w.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := kv.PurgeDeletes(ctx, jetstream.DeleteMarkersOlderThan(-1)); err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.Bucket() != "tg-state-alpha" {
		t.Fatalf("status %v, %v", st, err)
	}
	e.errs.none(t)
	if v := e.log.Violations(); len(v) != 0 {
		t.Fatalf("the server refused %v", v)
	}
}

// TestWorkerCredentialsRefuseOtherState tries, with tool alpha's worker credentials,
// what its workers must not do with state: make, change or delete buckets (its own
// too), or touch another tool's, each refused by the server.
func TestWorkerCredentialsRefuseOtherState(t *testing.T) {
	e := newStateEnv(t)
	own := "KV_tg-state-alpha"
	publish := []struct{ name, subject string }{
		{"creating its own bucket", "$JS.API.STREAM.CREATE." + own},
		{"changing its own bucket's settings", "$JS.API.STREAM.UPDATE." + own},
		{"deleting its own bucket", "$JS.API.STREAM.DELETE." + own},
		{"creating another tool's bucket", "$JS.API.STREAM.CREATE.KV_tg-state-gamma"},
		{"creating any bucket", "$JS.API.STREAM.CREATE.KV_scratch"},
		{"listing the buckets", "$JS.API.STREAM.NAMES"},
		{"listing the buckets' settings", "$JS.API.STREAM.LIST"},
		{"a durable consumer on its own bucket", "$JS.API.CONSUMER.DURABLE.CREATE." + own + ".d1"},
	}
	for _, other := range []string{"beta", "alpha-2"} {
		b := "tg-state-" + other
		st := "KV_" + b
		who := "tool " + other + "'s"
		publish = append(publish, []struct{ name, subject string }{
			{"writing " + who + " state", "$KV." + b + ".k"},
			{"reading " + who + " state", "$JS.API.DIRECT.GET." + st + ".$KV." + b + ".k"},
			{"reading " + who + " state by revision", "$JS.API.DIRECT.GET." + st},
			{"reading " + who + " state by sequence", "$JS.API.STREAM.MSG.GET." + st},
			{"opening " + who + " state", "$JS.API.STREAM.INFO." + st},
			{"watching " + who + " state", "$JS.API.CONSUMER.CREATE." + st + ".w1.$KV." + b + ".>"},
			{"answering " + who + " state's flow control", "$JS.FC." + st + ".w1.x"},
			{"purging " + who + " state", "$JS.API.STREAM.PURGE." + st},
			{"deleting " + who + " state", "$JS.API.STREAM.DELETE." + st},
		}...)
	}
	e.refusesPublishing(t, publish)

	t.Run("the SDK opening another tool's state fails", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(e.ctx, 3*time.Second)
		defer cancel()
		if _, err := workers.New(e.worker, workers.Tool{ID: "beta"}).State(ctx); err == nil {
			t.Fatal("alpha's worker opened beta's state")
		}
		e.errs.expect(t, `Publish to "$JS.API.STREAM.INFO.KV_tg-state-beta"`)
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

// TestStateNeedsTheToolsInbox: on a connection with the default inboxes, a tool's
// credentials cannot receive the JetStream client's answers, and State says what to
// connect with.
func TestStateNeedsTheToolsInbox(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	admin := testenv.SecureConn(t, srv.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleAdmin), true))
	ctx := testenv.Context(t)
	if _, err := registry.CreateToolState(ctx, admin, "alpha", registry.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	creds, _ := sec.WorkerCreds(t, "alpha")
	plain := testenv.SecureConn(t, srv.ClientURL(), sec.Client(creds, true), nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := workers.New(plain, workers.Tool{ID: "alpha"}).State(short)
	if err == nil || !strings.Contains(err.Error(), `workers.Inbox("alpha")`) {
		t.Fatalf("got %v, want the hint to connect with workers.Inbox", err)
	}
	withInbox := testenv.SecureConn(t, srv.ClientURL(), sec.Client(creds, true), workers.Inbox("alpha"))
	if _, err := workers.New(withInbox, workers.Tool{ID: "alpha"}).State(ctx); err != nil {
		t.Fatal(err)
	}
}


// TestWorkerStateWatchAnswersFlowControl watches more of alpha's state than the
// server sends before it asks for flow control (1 MiB pending), with alpha's worker
// credentials: the worker answers the server's flow control messages on their reply
// subjects, which its response permission allows, and nothing is refused.
func TestWorkerStateWatchAnswersFlowControl(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	log := testenv.RecordServerLog(srv, true) // the protocol traffic: the flow control answers
	e := newWorkerEnvOn(t, sec, srv)
	if _, err := registry.CreateToolState(e.ctx, e.admin, "alpha", registry.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	kv, err := workers.New(e.worker, workers.Tool{ID: "alpha"}).State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	value := []byte(strings.Repeat("x", 8<<10))
	const keys = 256 // 2 MiB
	for i := range keys {
		if _, err := kv.Put(e.ctx, fmt.Sprintf("k%d", i), value); err != nil {
			t.Fatal(err)
		}
	}
	w, err := kv.WatchAll(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for u := range w.Updates() {
		if u == nil {
			break
		}
		n++
	}
	if n != keys {
		t.Fatalf("watched %d keys of %d", n, keys)
	}
	testenv.Eventually(t, 10*time.Second, "the worker answers flow control", func() bool {
		return len(log.Matching("PUB $JS.FC.KV_tg-state-alpha.")) > 0
	})
	if v := log.Violations(); len(v) != 0 {
		t.Fatalf("the server refused %v", v)
	}
}
