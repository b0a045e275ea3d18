package approvals_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func open(t *testing.T, edit func(*approvals.Config)) *approvals.Approvals {
	t.Helper()
	srv := testenv.Server(t)
	nc := testenv.Conn(t, srv.ClientURL())
	cfg := approvals.DefaultConfig()
	if edit != nil {
		edit(&cfg)
	}
	a, err := approvals.Open(testenv.Context(t), nc, testenv.Store(t, nc, 1), cfg, nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func sendEmail(account, keyID, args string) *gateway.Call {
	return &gateway.Call{Principal: registry.Principal{Account: account, Key: &registry.Key{ID: keyID, Account: account}},
		Tool: "email", Method: "send_email", Params: []byte(args)}
}

var rule = registry.ApprovalRule{Tool: "email", Method: "send_email"}

// TestApprovedOnce: two edges waiting on one approved record (as two would, were one
// to take over) cannot both run its call: the claim is a compare-and-set, and the
// loser is refused.
func TestApprovedOnce(t *testing.T) {
	a := open(t, nil)
	ctx := testenv.Context(t)
	call := sendEmail("acme", "key_1", `{"to":"ada@example.com","subject":"hi"}`)
	r, err := a.Ask(ctx, call, rule)
	if err != nil {
		t.Fatal(err)
	}
	const waiters = 4
	results := make(chan error, waiters)
	var started sync.WaitGroup
	for range waiters {
		started.Add(1)
		go func() { started.Done(); results <- a.Await(ctx, r.ID, call) }()
	}
	started.Wait()
	if _, err := a.Decide(ctx, approvals.Decider{}, r.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for range waiters {
		err := <-results
		var f *gateway.Error
		switch {
		case err == nil:
			ran++
		case errors.As(err, &f) && f.Kind == gateway.KindConflict:
		default:
			t.Fatalf("a waiter: %v", err)
		}
	}
	if ran != 1 {
		t.Fatalf("%d waiters ran the call, want 1", ran)
	}
}

// TestBoundToTheCall: an approval is of one call: the same account, key, tool,
// method and arguments (in any key order or spacing); another's wait on it fails.
func TestBoundToTheCall(t *testing.T) {
	a := open(t, nil)
	ctx := testenv.Context(t)
	r, err := a.Ask(ctx, sendEmail("acme", "key_1", `{"to":"ada@example.com","subject":"hi"}`), rule)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Decide(ctx, approvals.Decider{Account: "other", KeyID: "key_9"}, r.ID, true, ""); err == nil {
		t.Fatal("another account's key decided the approval")
	}
	if _, err := a.Decide(ctx, approvals.Decider{Account: "acme", KeyID: "key_2"}, r.ID, true, ""); err != nil {
		t.Fatal(err)
	}
	for _, other := range []*gateway.Call{
		sendEmail("acme", "key_1", `{"to":"bob@example.com","subject":"hi"}`),
		sendEmail("acme", "key_2", `{"to":"ada@example.com","subject":"hi"}`),
		sendEmail("beta", "key_1", `{"to":"ada@example.com","subject":"hi"}`),
	} {
		var f *gateway.Error
		if err := a.Await(ctx, r.ID, other); !errors.As(err, &f) || f.Kind != gateway.KindForbidden {
			t.Fatalf("another call waited on the approval: %v", err)
		}
	}
	same := sendEmail("acme", "key_1", `{ "subject": "hi", "to": "ada@example.com" }`)
	if err := a.Await(ctx, r.ID, same); err != nil {
		t.Fatalf("the same call, its keys in another order: %v", err)
	}
}

// TestWebhookAnnounces: each new pending approval is POSTed to the webhook, tried
// again after a failure; a webhook that never answers well is given up after its
// attempts, and never holds the call.
func TestWebhookAnnounces(t *testing.T) {
	var hits atomic.Int64
	got := make(chan approvals.Announcement, 4)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		var a approvals.Announcement
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &a) != nil {
			t.Errorf("announcement %q: %s", r.Header.Get("Content-Type"), b)
		}
		got <- a
	}))
	t.Cleanup(hook.Close)
	a := open(t, func(c *approvals.Config) { c.Webhook.URL, c.Webhook.Timeout = hook.URL, 2*time.Second })
	r, err := a.Ask(testenv.Context(t), sendEmail("acme", "key_1", `{"to":"ada@example.com"}`), rule)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ann := <-got:
		if ann.Type != approvals.AnnouncePending || ann.Approval.ID != r.ID || ann.Approval.ArgsSHA256 != r.ArgsSHA256 || ann.Approval.Arguments != "" {
			t.Fatalf("announcement %+v, want %s", ann, r.ID)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("no announcement")
	}
	if n := hits.Load(); n != 2 {
		t.Fatalf("%d POSTs, want 2 (one failed, one taken)", n)
	}

	var down atomic.Int64
	dead := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		down.Add(1)
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(dead.Close)
	b := open(t, func(c *approvals.Config) {
		c.Webhook.URL, c.Webhook.Attempts, c.Webhook.Timeout = dead.URL, 2, time.Second
	})
	begun := time.Now()
	if _, err := b.Ask(testenv.Context(t), sendEmail("acme", "key_1", `{}`), rule); err != nil {
		t.Fatal(err)
	}
	asked := time.Since(begun)
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	b.Close(ctx)
	if n := down.Load(); n != 2 {
		t.Fatalf("%d POSTs to a webhook that fails, want --approval-webhook-attempts (2)", n)
	}
	if asked >= time.Second {
		t.Fatalf("asking took %v: the webhook held the call", asked)
	}
}

// TestConfigLimits: each limit is checked at its edge.
func TestConfigLimits(t *testing.T) {
	ok := approvals.DefaultConfig()
	for _, bad := range []func(*approvals.Config){
		func(c *approvals.Config) { c.Expiry = 0 },
		func(c *approvals.Config) { c.MaxExpiry = c.Expiry - time.Second },
		func(c *approvals.Config) { c.MaxExpiry = approvals.DefaultMaxExpiry + time.Second },
		func(c *approvals.Config) { c.Webhook.URL = "ftp://example.com" },
		func(c *approvals.Config) { c.Webhook.Timeout = 0 },
		func(c *approvals.Config) { c.Webhook.Attempts = 0 },
	} {
		c := ok
		bad(&c)
		if c.Validate() == nil {
			t.Fatalf("%+v passed", c)
		}
	}
	edge := ok
	edge.MaxExpiry, edge.Webhook.Attempts = approvals.DefaultMaxExpiry, 1
	if err := edge.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := (registry.ApprovalRule{ExpiresIn: 90000}).Expiry(ok.Expiry, time.Hour); d != time.Hour {
		t.Fatalf("a rule's wait past the maximum: %v", d)
	}
	if d := (registry.ApprovalRule{}).Expiry(ok.Expiry, time.Hour); d != ok.Expiry {
		t.Fatalf("a rule naming no wait: %v", d)
	}
}
