package gateway_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func TestTimeoutIsTheShortestOfMethodCallerAndMaximum(t *testing.T) {
	env := testenv.NewRegistry(t)
	cfg := gateway.DefaultConfig()
	cfg.DefaultTimeout, cfg.MaxTimeout = 30*time.Second, time.Minute
	gw, err := gateway.New(env.Conn, env.View, cfg)
	if err != nil {
		t.Fatal(err)
	}
	method := func(d time.Duration) *registry.Method {
		return &registry.Method{Name: "m", Timeout: registry.Duration(d)}
	}
	tests := []struct {
		name   string
		method *registry.Method
		asked  time.Duration
		want   time.Duration
	}{
		{"a method without a timeout gets the default", method(0), 0, 30 * time.Second},
		{"a method's own timeout wins over the default", method(10 * time.Second), 0, 10 * time.Second},
		{"a caller may ask for less", method(10 * time.Second), 2 * time.Second, 2 * time.Second},
		{"a caller may not ask for more", method(10 * time.Second), 20 * time.Second, 10 * time.Second},
		{"no method may exceed the maximum", method(time.Hour), 0, time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := gw.Timeout(tt.method, tt.asked); got != tt.want {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// rateEnv is a registry with an account of the given limits, connected to an echo tool,
// and one of its keys.
func rateEnv(t *testing.T, limits registry.Limits) (*testenv.Registry, registry.Principal) {
	t.Helper()
	env := testenv.NewRegistry(t)
	ctx := env.Ctx
	if _, err := env.Store.CreateAccount(ctx, registry.Account{ID: "acme", Limits: limits}); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.PutTool(ctx, registry.Tool{ID: "echo", Methods: []registry.Method{{Name: "echo"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.Connect(ctx, "acme", "echo", env.Signer); err != nil {
		t.Fatal(err)
	}
	_, secret, err := env.Store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var p registry.Principal
	testenv.WaitFor(t, "key and tool visible", func() bool {
		p, err = env.View.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil && len(env.View.Snapshot().Tools(p)) == 1
	})
	return env, p
}

func TestRateLimitAtItsEdge(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(map[bool]string{false: "this edge's bucket", true: "the shared bucket"}[shared], func(t *testing.T) {
			env, p := rateEnv(t, registry.Limits{Rate: 0.001, Burst: 3})
			ctx := env.Ctx
			var opts []gateway.Option
			if shared {
				opts = append(opts, gateway.WithSharedRates(env.Store, testenv.Logger(t)))
			}
			gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			call := &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)}
			for i := range 3 {
				if _, err := gw.Check(ctx, call); err != nil {
					t.Fatalf("call %d of a burst of 3: %v", i+1, err)
				}
			}
			_, err = gw.Check(ctx, call)
			var rl *gateway.RateLimitedError
			if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
				t.Fatalf("call 4 of a burst of 3: got %v, want a RateLimitedError with a retry time", err)
			}

			t.Run("a refused call does not use up a token", func(t *testing.T) {
				// At 0.001/s the next token is ~1000 s away; a refusal must not push it further.
				_, err := gw.Check(ctx, call)
				var again *gateway.RateLimitedError
				if !errors.As(err, &again) || again.RetryAfter > rl.RetryAfter {
					t.Fatalf("second refusal: %v (first asked to wait %v)", err, rl.RetryAfter)
				}
			})
			t.Run("a bad call is refused before it costs a token", func(t *testing.T) {
				bad := *call
				bad.Params = []byte(`[1]`)
				if _, err := gw.Check(ctx, &bad); !errors.Is(err, gateway.ErrInvalidJSON) {
					t.Fatalf("got %v, want ErrInvalidJSON", err)
				}
			})
		})
	}
}

// TestSharedRateHoldsAcrossEdges: two gateways, as two edges, calling for one key at
// once share its burst instead of each having its own. An edge whose take from the
// shared bucket did not come back within SharedRateTimeout (a loaded machine) limits
// with a bucket of its own, as it is meant to; the bound then counts that bucket too.
func TestSharedRateHoldsAcrossEdges(t *testing.T) {
	t.Run("a rate of less than a token per lease: exactly the burst", func(t *testing.T) {
		env, p := rateEnv(t, registry.Limits{Rate: 0.001, Burst: 5})
		allowed, own := callFromTwoEdges(t, env, p, 40)
		if own == 0 && allowed != 5 || allowed < 5 || allowed > 5+5*own {
			t.Fatalf("%d of 40 calls through two edges allowed (%d on an edge's own bucket), want the burst of 5", allowed, own)
		}
	})
	t.Run("a rate of many tokens per lease: never more than the bucket gives", func(t *testing.T) {
		env, p := rateEnv(t, registry.Limits{Rate: 100, Burst: 20})
		start := time.Now()
		allowed, own := callFromTwoEdges(t, env, p, 200)
		// The bucket gives its burst and then 100 a second; what a lease one edge holds
		// but does not spend goes back only at that edge's next take, so fewer may
		// pass, never more.
		gave := 20 + int(100*time.Since(start).Seconds()) + 1
		if most := gave * (1 + own); allowed > most || allowed < 10 {
			t.Fatalf("%d of 200 calls through two edges allowed (%d on an edge's own bucket); the buckets gave at most %d", allowed, own, most)
		}
	})
}

// callFromTwoEdges makes n calls for p at once, half through each of two gateways that
// share their rate buckets, and returns how many were allowed and how many of the
// gateways fell back to a bucket of their own for some of them.
func callFromTwoEdges(t *testing.T, env *testenv.Registry, p registry.Principal, n int) (allowed, own int) {
	t.Helper()
	var gws [2]*gateway.Gateway
	var logs [2]*testenv.Buffer
	for i := range gws {
		logs[i] = &testenv.Buffer{}
		log := slog.New(slog.NewTextHandler(io.MultiWriter(logs[i], testenv.LogWriter(t)), nil))
		gw, err := gateway.New(testenv.Conn(t, env.Server.ClientURL()), env.View, gateway.DefaultConfig(), gateway.WithSharedRates(env.Store, log))
		if err != nil {
			t.Fatal(err)
		}
		gws[i] = gw
	}
	var passed atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := gws[i%2].Check(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)})
			var rl *gateway.RateLimitedError
			switch {
			case err == nil:
				passed.Add(1)
			case !errors.As(err, &rl):
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for _, l := range logs {
		if strings.Contains(l.String(), "the shared bucket cannot be reached") {
			own++
		}
	}
	if own > 0 {
		t.Logf("%d of the 2 edges could not reach the shared bucket within %v for some calls and used their own", own, gateway.SharedRateTimeout)
	}
	return int(passed.Load()), own
}

// TestSharedRateFallsBackToTheEdgesOwn: when the shared bucket cannot be reached, an
// edge keeps limiting with a bucket of its own rather than refusing or letting all in.
func TestSharedRateFallsBackToTheEdgesOwn(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Rate: 0.001, Burst: 2})
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithSharedRates(env.Store, testenv.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(env.Conn)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteKeyValue(env.Ctx, registry.BucketRates); err != nil {
		t.Fatal(err)
	}
	call := &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)}
	for i := range 2 {
		if _, err := gw.Check(env.Ctx, call); err != nil {
			t.Fatalf("call %d of a burst of 2 without the shared bucket: %v", i+1, err)
		}
	}
	var rl *gateway.RateLimitedError
	if _, err := gw.Check(env.Ctx, call); !errors.As(err, &rl) {
		t.Fatalf("call 3 of a burst of 2 without the shared bucket: %v, want a RateLimitedError", err)
	}
}

// TestCallsDoNotWaitForAnUnreachableSharedBucket: the shared rate buckets stop
// answering (their stream's leader hangs, or its node is cut off: here the edge's
// connection stalls, through a proxy that stops passing bytes). Calls go on at once
// with the edge's own bucket, instead of each waiting, one after the other behind the
// key's lease, for an answer that does not come.
func TestCallsDoNotWaitForAnUnreachableSharedBucket(t *testing.T) {
	srv := testenv.Server(t)
	proxy := testenv.NewStallingProxy(t, srv.Addr().String())
	nc := testenv.Conn(t, "nats://"+proxy.Addr)
	store := testenv.Store(t, nc, 1)
	view := testenv.View(t, store)
	ctx := testenv.Context(t)
	if _, err := store.CreateAccount(ctx, registry.Account{ID: "acme", Limits: registry.Limits{Rate: 10, Burst: 20}}); err != nil {
		t.Fatal(err)
	}
	if err := store.PutTool(ctx, registry.Tool{ID: "echo", Methods: []registry.Method{{Name: "echo"}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Connect(ctx, "acme", "echo", testenv.LinkSigner(t)); err != nil {
		t.Fatal(err)
	}
	_, secret, err := store.CreateKey(ctx, registry.NewKeyRequest{Account: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	var p registry.Principal
	testenv.WaitFor(t, "key and tool visible", func() bool {
		p, err = view.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil && len(view.Snapshot().Tools(p)) == 1
	})
	gw, err := gateway.New(nc, view, gateway.DefaultConfig(), gateway.WithSharedRates(store, testenv.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	call := &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)}
	if _, err := gw.Check(ctx, call); err != nil {
		t.Fatalf("a call with the bucket in reach: %v", err)
	}

	proxy.Stall()
	// At 10 a second a lease is one token: every call asks the shared bucket.
	const calls = 10
	start := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for i := range calls {
		if _, err := gw.Check(cctx, call); err != nil {
			t.Fatalf("call %d while the shared bucket does not answer: %v", i+1, err)
		}
	}
	if took := time.Since(start); took > calls*gateway.SharedRateTimeout+2*time.Second {
		t.Fatalf("%d calls took %v to be let through, more than %v each: they waited for the shared bucket", calls, took, gateway.SharedRateTimeout)
	}
}
