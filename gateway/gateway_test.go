package gateway_test

import (
	"errors"
	"testing"
	"time"

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

func TestRateLimitAtItsEdge(t *testing.T) {
	env := testenv.NewRegistry(t)
	ctx := env.Ctx
	if _, err := env.Store.CreateAccount(ctx, registry.Account{ID: "acme", Limits: registry.Limits{Rate: 0.001, Burst: 3}}); err != nil {
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
	testenv.Eventually(t, time.Second, "key and tool visible", func() bool {
		p, err = env.View.Snapshot().AuthenticateKey(secret, time.Now())
		return err == nil && len(env.View.Snapshot().Tools(p)) == 1
	})
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	call := &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)}
	for i := range 3 {
		if _, err := gw.Check(call); err != nil {
			t.Fatalf("call %d of a burst of 3: %v", i+1, err)
		}
	}
	_, err = gw.Check(call)
	var rl *gateway.RateLimitedError
	if !errors.As(err, &rl) || rl.RetryAfter <= 0 {
		t.Fatalf("call 4 of a burst of 3: got %v, want a RateLimitedError with a retry time", err)
	}

	t.Run("a refused call does not use up a token", func(t *testing.T) {
		// At 0.001/s the next token is ~1000 s away; a refusal must not push it further.
		_, err := gw.Check(call)
		var again *gateway.RateLimitedError
		if !errors.As(err, &again) || again.RetryAfter > rl.RetryAfter {
			t.Fatalf("second refusal: %v (first asked to wait %v)", err, rl.RetryAfter)
		}
	})
	t.Run("a bad call is refused before it costs a token", func(t *testing.T) {
		bad := *call
		bad.Params = []byte(`[1]`)
		if _, err := gw.Check(&bad); !errors.Is(err, gateway.ErrInvalidJSON) {
			t.Fatalf("got %v, want ErrInvalidJSON", err)
		}
	})
}
