package dashboard_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// withTrail keeps the audit trail, as toolgate edge does.
func withTrail(e *env) gateway.Option {
	trail, err := audit.Open(testenv.Context(e.t), e.nc, audit.Options{}, testenv.Logger(e.t))
	if err != nil {
		e.t.Fatal(err)
	}
	return gateway.WithAudit(trail)
}

// withQuotas counts quotas, as toolgate edge does.
func withQuotas(e *env) gateway.Option { return gateway.WithQuotas(e.store) }

// TestActivityPages: the account's key holder, signed in to the dashboard in a real
// browser, sees the account's own calls newest first, a page at a time, filtered by
// outcome, and its quota's use; another account's calls are on none of its pages.
// Bad filters are a clear error, and a key limited to some tools sees neither page.
func TestActivityPages(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin, ok := chromium()
	if !ok {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	e := newEnv(t, nil, withTrail, withQuotas)
	ctx := testenv.Context(t)
	if _, err := e.store.UpdateAccount(ctx, testAccount, func(a *registry.Account) error {
		a.Limits.Quotas = []registry.Quota{{Scope: registry.QuotaAccount, Tool: "email", PerDay: 100}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.CreateAccount(ctx, registry.Account{ID: "other"}); err != nil {
		t.Fatal(err)
	}
	_, otherKey, err := e.store.CreateKey(ctx, registry.NewKeyRequest{Account: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.Connect(ctx, "other", "email", e.signer); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the quota and the other account", func(s *registry.Snapshot) bool {
		a := s.Account(testAccount)
		return a != nil && len(a.Limits.Quotas) == 1 && s.Connection("other", "email") != nil
	})

	send := func(u *user, to string, want int) {
		t.Helper()
		p := u.get("tools/email/api")
		r := u.post("tools/email/api/send", url.Values{"csrf": {p.csrf(t)}, "params": {`{"to":"` + to + `","subject":"s","body":"b"}`}})
		if !strings.Contains(r.text(), fmt.Sprint(want)) {
			t.Fatalf("a call to %s: %d\n%s", to, r.status, r.body)
		}
	}
	other := e.user()
	other.signIn(otherKey)
	send(other, "bounce@example.com", http.StatusBadGateway)
	u, _ := e.signedIn()
	for range 55 {
		send(u, "ada@example.com", http.StatusOK)
	}
	send(u, "bounce@example.com", http.StatusBadGateway) // the newest

	if p := u.get("calls?before=x"); p.status != http.StatusBadRequest || !strings.Contains(p.text(), "not valid") {
		t.Errorf("a bad cursor: %d\n%s", p.status, p.body)
	}
	if p := u.get("calls?outcome=nope"); p.status != http.StatusBadRequest || !strings.Contains(p.text(), "no such outcome") {
		t.Errorf("a bad outcome: %d\n%s", p.status, p.body)
	}
	_, scoped, err := e.store.CreateKey(ctx, registry.NewKeyRequest{Account: testAccount, Scopes: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the scoped key", func(s *registry.Snapshot) bool { _, err := s.AuthenticateKey(scoped, time.Now()); return err == nil })
	limited := e.user()
	limited.signIn(scoped)
	for _, rel := range []string{"calls", "usage"} {
		if p := limited.get(rel); p.status != http.StatusForbidden {
			t.Errorf("%s with a key limited to some tools: %d", rel, p.status)
		}
	}

	b := newBrowser(t, bin, viewports[0])
	b.do("sign in",
		chromedp.Navigate(e.url("signin")),
		chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), e.key),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css(".tool-list")))
	b.do("open the calls",
		chromedp.Click(css(`a[href="/dashboard/calls"]`)),
		chromedp.WaitVisible(css("table.calls")))
	rows := func() []string {
		return run(b, "read the rows", chromedp.Evaluate[[]string](
			`[...document.querySelectorAll("tr.call td.outcome")].map(td => td.textContent.trim())`))
	}
	got := rows()
	if len(got) != 50 || got[0] != "tool_error 502" || got[1] != "ok 200" {
		t.Fatalf("the first page: %d rows, the newest %q", len(got), got[:min(len(got), 2)])
	}
	if door := b.text("tr.call td[data-label=Door]"); door != audit.TransportDashboard {
		t.Errorf("the door reads %q", door)
	}
	b.screenshot("calls")
	b.do("open the older calls",
		chromedp.Click(css("#older")),
		chromedp.WaitVisible(css("#newest")))
	if got := rows(); len(got) != 6 || got[5] != "ok 200" {
		t.Fatalf("the second page: %q", got)
	}
	if n := run(b, "look for more", chromedp.Evaluate[int](`document.querySelectorAll("#older").length`)); n != 0 {
		t.Error("the last page links to older calls")
	}
	b.do("filter by outcome",
		chromedp.Click(css("#newest")),
		// The older page has the filter too: wait until it is gone.
		chromedp.WaitNotPresent(css("#newest")),
		chromedp.WaitVisible(css("#f-outcome")),
		chromedp.SetValue(css("#f-outcome"), gateway.CodeToolError),
		chromedp.Click(css("#f-apply")),
		// The page the filter answers with marks it chosen.
		chromedp.WaitReady(css(`#f-outcome option[value="tool_error"][selected]`)))
	if got := rows(); len(got) != 1 || got[0] != "tool_error 502" {
		t.Fatalf("the tool's failures: %q (the other account's must not show)", got)
	}
	b.screenshot("calls-filtered")
	b.do("open the usage",
		chromedp.Click(css(`a[href="/dashboard/usage"]`)),
		chromedp.WaitVisible(css("table.usage")))
	if used := b.text(`tr.quota[data-window=day] td.used`); used != "56 of 100" {
		t.Errorf("the day's quota reads %q, want 56 of 100", used)
	}
	b.screenshot("usage")
}

// TestActivityWithoutTrailOrQuotas: on an edge that keeps no audit trail, the calls
// page says so; an account without quotas reads that it has none.
func TestActivityWithoutTrailOrQuotas(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	if p := u.get("calls"); p.status != http.StatusOK || !strings.Contains(p.text(), "keeps no audit trail") {
		t.Errorf("calls without a trail: %d\n%s", p.status, p.body)
	}
	if p := u.get("usage"); p.status != http.StatusOK || !strings.Contains(p.text(), "has no quotas") {
		t.Errorf("usage without quotas: %d\n%s", p.status, p.body)
	}
}
