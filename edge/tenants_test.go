package edge_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// TestARequestIDNamesNothingOnTheBus: a caller's X-Request-Id is its own label. An
// account that sends another account's request id, and then gives up on its call,
// cancels only its own call: the other's runs on and answers, and both ids come back
// as each caller sent them.
func TestARequestIDNamesNothingOnTheBus(t *testing.T) {
	e := newEnv(t)
	victim := e.account("acme", registry.Limits{})
	attacker := e.account("mallory", registry.Limits{})

	started := make(chan string, 2)
	ended := make(chan string, 2)
	release := make(chan struct{})
	hold := workers.Method{Name: "hold", Handler: func(ctx context.Context, c *workers.Call) (any, error) {
		started <- c.Account
		select {
		case <-release:
			return map[string]string{"account": c.Account, "request_id": c.RequestID}, nil
		case <-ctx.Done():
			ended <- c.Account
			return nil, context.Cause(ctx)
		}
	}}
	w := workers.New(testenv.Conn(t, e.nc.ConnectedUrl()), workers.Tool{ID: "ledger"}, workers.WithLogger(testenv.Logger(t)))
	w.Handle(hold)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-w.Ready():
	case err := <-done:
		t.Fatalf("worker: %v", err)
	}
	testenv.WaitFor(t, "the edge sees the tool", func() bool { return e.view.Snapshot().RawTool("ledger") != nil })
	e.connect("acme", "ledger")
	e.connect("mallory", "ledger")

	const shared = "req-the-same-for-both"
	victimDone := e.callInBackground(victim, "ledger", "hold", `{}`, "X-Request-Id", shared)
	if got := <-started; got != "acme" {
		t.Fatalf("the first call to start is %s's", got)
	}

	// The attacker sends the victim's request id, and hangs up once its call runs: its
	// edge cancels the call it made.
	actx, hangUp := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(actx, http.MethodPost, e.url+"/tool-call/ledger/hold", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("SERVICE_API_KEY", attacker)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", shared)
	attackerDone := make(chan error, 1)
	go func() {
		resp, err := e.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		attackerDone <- err
	}()
	if got := <-started; got != "mallory" {
		t.Fatalf("the second call to start is %s's", got)
	}
	hangUp()
	if err := <-attackerDone; !errors.Is(err, context.Canceled) {
		t.Fatalf("the attacker's call: %v, want its own cancellation", err)
	}
	// The worker has handled the cancel the attacker's edge sent once the attacker's
	// call has ended; a cancel that named the victim's call too would have ended it by
	// then, in the same step.
	select {
	case got := <-ended:
		if got != "mallory" {
			t.Fatalf("the cancel ended %s's call", got)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the attacker's call was never cancelled")
	}
	select {
	case got := <-ended:
		t.Fatalf("%s's call was cancelled too", got)
	default:
	}

	close(release)
	r := <-victimDone
	if r.status != http.StatusOK || r.header.Get("X-Request-Id") != shared {
		t.Fatalf("the victim's call: status %d, X-Request-Id %q, body %s; want 200 with its own id", r.status, r.header.Get("X-Request-Id"), r.body)
	}
	var body map[string]string
	if err := json.Unmarshal(r.body, &body); err != nil || body["account"] != "acme" || body["request_id"] != shared {
		t.Fatalf("the victim's answer %s: want its own call's, with its request id as the tool saw it", r.body)
	}
}
