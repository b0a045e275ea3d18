package gateway_test

import (
	"errors"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestAForwardedRequestSpendsTheQuota: an MCP request a link forwards counts against
// the quotas of its tool as a tool call does; one over them is refused before the
// bus with a *QuotaExceededError, which MCP answers as JSON-RPC error -32030 with
// the rule and its reset in its data, and a tools/call as an isError result.
func TestAForwardedRequestSpendsTheQuota(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Quotas: []registry.Quota{{Scope: registry.QuotaAccount, Tool: "echo", PerDay: 1}}})
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithQuotas(env.Store))
	if err != nil {
		t.Fatal(err)
	}
	var qe *gateway.QuotaExceededError
	if _, err := gw.Forward(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "resources/read"}); errors.As(err, &qe) {
		t.Fatalf("the first request of a day's quota of 1: %v", err)
	}
	_, err = gw.Forward(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "resources/read"})
	if !errors.As(err, &qe) || qe.Window != "day" || qe.Limit != 1 || qe.Index != 0 {
		t.Fatalf("the second request of a day's quota of 1: %v", err)
	}
	f := gateway.Classify(err)
	d, ok := f.Data.(gateway.QuotaDetail)
	if f.Code != gateway.CodeQuotaExceeded || f.HTTP != 429 || f.RPC != -32030 || !f.InResult ||
		!ok || d.ResetsAt == nil || !d.ResetsAt.Equal(qe.ResetsAt) || d.RetryAfterMs < 1 || f.RetryAfter != qe.RetryAfter {
		t.Fatalf("classified as %+v", f)
	}
	if text := f.ResultText("echo"); text != "echo: over a quota of the account: "+qe.Error() {
		t.Fatalf("the isError result reads %q", text)
	}
}

// TestALaterRuleGivesBackWhatAnEarlierTook: a call refused by one rule spends nothing
// of the others it passed.
func TestALaterRuleGivesBackWhatAnEarlierTook(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Quotas: []registry.Quota{
		{Scope: registry.QuotaAccount, PerDay: 3},
		{Scope: registry.QuotaAccount, Tool: "echo", Concurrent: 1},
	}})
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithQuotas(env.Store))
	if err != nil {
		t.Fatal(err)
	}
	check := func() (*gateway.Call, error) {
		c := &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)}
		_, err := gw.Check(env.Ctx, c)
		return c, err
	}
	running, err := check()
	if err != nil {
		t.Fatal(err)
	}
	var qe *gateway.QuotaExceededError
	for range 5 {
		if _, err := check(); !errors.As(err, &qe) || qe.Window != gateway.WindowConcurrent || qe.Index != 1 {
			t.Fatalf("a second call at once of 1: %v", err)
		}
	}
	gw.Answered(env.Ctx, running, nil, nil, nil)
	for i := range 2 {
		c, err := check()
		if err != nil {
			t.Fatalf("call %d of the day's 3, the refused ones given back: %v", i+2, err)
		}
		gw.Answered(env.Ctx, c, nil, nil, nil)
	}
	if _, err := check(); !errors.As(err, &qe) || qe.Window != "day" || qe.Index != 0 {
		t.Fatalf("a fourth call of the day's 3: %v", err)
	}
}

// TestAQuotaWithoutItsBucket: an edge that cannot reach the quota bucket admits at
// most a lease of each window on its own, then refuses.
func TestAQuotaWithoutItsBucket(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Quotas: []registry.Quota{{Scope: registry.QuotaAccount, PerDay: 400}}})
	nc := testenv.Conn(t, env.Server.ClientURL())
	store := testenv.Store(t, nc, 1)
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithQuotas(store), gateway.WithLogger(testenv.Logger(t)))
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	admitted := 0
	for range 10 {
		_, err := gw.Check(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`)})
		var qe *gateway.QuotaExceededError
		switch {
		case err == nil:
			admitted++
		case !errors.As(err, &qe) || !qe.ResetsAt.IsZero() || qe.RetryAfter != gateway.QuotaBusyRetry:
			t.Fatalf("refused with %v", err)
		}
	}
	if want := int(gateway.QuotaLease(400)); admitted != want {
		t.Fatalf("admitted %d calls without the bucket, want a lease, %d", admitted, want)
	}
}

// TestAQuotaRefusalIsRecorded: a call over a quota is in the audit trail with the
// outcome quota_exceeded and the status 429.
func TestAQuotaRefusalIsRecorded(t *testing.T) {
	env, p := rateEnv(t, registry.Limits{Quotas: []registry.Quota{{Scope: registry.QuotaKey, Tool: "echo", PerDay: 1}}})
	trail, err := audit.Open(env.Ctx, env.Conn, audit.Options{Edge: "e1"}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := gateway.New(env.Conn, env.View, gateway.DefaultConfig(), gateway.WithAudit(trail), gateway.WithQuotas(env.Store))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		_, _ = gw.Call(env.Ctx, &gateway.Call{Principal: p, Tool: "echo", Method: "echo", Params: []byte(`{}`), Transport: audit.TransportREST})
	}
	var page audit.Page
	testenv.WaitFor(t, "the refusal's record", func() bool {
		page, err = trail.Read(env.Ctx, audit.Filter{Account: "acme", Outcome: gateway.CodeQuotaExceeded})
		return err == nil && len(page.Records) >= 1
	})
	if r := page.Records[0]; len(page.Records) != 1 || r.Status != 429 || r.Key != p.Key.ID || r.Tool != "echo" {
		t.Fatalf("records %+v", page.Records)
	}
	if err := trail.Close(env.Ctx); err != nil {
		t.Fatal(err)
	}
}
