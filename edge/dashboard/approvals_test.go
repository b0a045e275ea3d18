package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestApprovalsPage: the page lists the signed-in account's pending calls only; a
// key limited to some tools sees and decides those tools' calls only; another
// account's approval, or one the key may not decide, is not found; a decision needs
// the session's form token and is taken once.
func TestApprovalsPage(t *testing.T) {
	// The approvals' bucket may live on any NATS server: the page only asks it.
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	apr, err := approvals.Open(testenv.Context(t), nc, testenv.Store(t, nc, 1), approvals.DefaultConfig(), nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *dashboard.Config) { c.Approvals = apr })
	ask := func(account, tool, method, args string) *approvals.Record {
		r, err := apr.Ask(testenv.Context(t), &gateway.Call{Principal: registry.Principal{Account: account, Key: &registry.Key{ID: "key_x"}},
			Tool: tool, Method: method, Params: []byte(args)}, registry.ApprovalRule{Tool: tool, Method: method})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	mail := ask(testAccount, "email", "send", `{"to":"ada@example.com"}`)
	clock := ask(testAccount, "clock", "now", `{"zone":"UTC"}`)
	theirs := ask("beta", "email", "send", `{"to":"mallory@example.com"}`)

	u, _ := e.signedIn()
	p := u.get("approvals")
	if p.status != http.StatusOK || !strings.Contains(p.body, mail.ID) || !strings.Contains(p.body, clock.ID) ||
		strings.Contains(p.body, theirs.ID) || strings.Contains(p.text(), "mallory") || !strings.Contains(p.text(), `{"to":"ada@example.com"}`) {
		t.Fatalf("the approvals page: %d\n%s", p.status, p.body)
	}
	decide := func(u *user, csrf, id, decision string) page {
		return u.post("approvals/"+id, url.Values{"csrf": {csrf}, "decision": {decision}})
	}
	if got := decide(u, p.csrf(t), theirs.ID, "approve"); got.status != http.StatusNotFound {
		t.Fatalf("deciding another account's approval: %d", got.status)
	}
	if got := decide(u, "forged", mail.ID, "approve"); got.status != http.StatusForbidden {
		t.Fatalf("a decision without the form token: %d", got.status)
	}

	_, scopedKey, err := e.store.CreateKey(testenv.Context(t), registry.NewKeyRequest{Account: testAccount, Scopes: []string{"clock"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the scoped key", func(s *registry.Snapshot) bool { _, err := s.AuthenticateKey(scopedKey, time.Now()); return err == nil })
	scoped := e.user()
	scoped.signIn(scopedKey)
	sp := scoped.get("approvals")
	if strings.Contains(sp.body, mail.ID) || !strings.Contains(sp.body, clock.ID) {
		t.Fatalf("a key limited to clock sees:\n%s", sp.body)
	}
	if got := decide(scoped, sp.csrf(t), mail.ID, "approve"); got.status != http.StatusNotFound {
		t.Fatalf("a key limited to clock decided an email call: %d", got.status)
	}
	if got := decide(scoped, sp.csrf(t), clock.ID, "deny"); got.status != http.StatusOK || !strings.Contains(got.text(), "was denied") {
		t.Fatalf("deny: %d\n%s", got.status, got.body)
	}
	if got := decide(u, p.csrf(t), mail.ID, "approve"); got.status != http.StatusOK || strings.Contains(got.body, `id="approval-`+mail.ID) {
		t.Fatalf("approve: %d\n%s", got.status, got.body)
	}
	if got := decide(u, p.csrf(t), mail.ID, "deny"); got.status != http.StatusConflict {
		t.Fatalf("a second decision: %d", got.status)
	}
	if r, err := apr.Get(testenv.Context(t), approvals.Decider{}, theirs.ID); err != nil || r.Decision != approvals.Pending {
		t.Fatalf("another account's approval: %+v %v", r, err)
	}
}

// TestTryItHeldCall: the try-it form on a method the account's rule holds answers at
// once that the call awaits approval, linking the approvals page, instead of waiting
// for the decision; approved on that page, the call runs once.
func TestTryItHeldCall(t *testing.T) {
	nc := testenv.Conn(t, testenv.Server(t).ClientURL())
	apr, err := approvals.Open(testenv.Context(t), nc, testenv.Store(t, nc, 1), approvals.DefaultConfig(), nil, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *dashboard.Config) { c.Approvals = apr }, func(*env) gateway.Option { return gateway.WithApprovals(apr) })
	if _, err := e.store.UpdateAccount(testenv.Context(t), testAccount, func(a *registry.Account) error {
		a.Limits.Approvals = []registry.ApprovalRule{{Tool: "email", Method: "send"}}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	e.waitFor("the rule", func(s *registry.Snapshot) bool { return len(s.Account(testAccount).Limits.Approvals) == 1 })

	u, _ := e.signedIn()
	p := u.get("tools/email/api")
	r := u.post("tools/email/api/send", url.Values{"csrf": {p.csrf(t)}, "params": {`{"to":"ada@example.com","subject":"s","body":"b"}`}})
	if r.status != http.StatusOK || !strings.Contains(r.text(), "202") || !strings.Contains(r.text(), "Awaiting approval") ||
		!strings.Contains(r.body, `href="`+e.cfg.Prefix+`approvals"`) {
		t.Fatalf("the held try-it call: %d\n%s", r.status, r.body)
	}
	if n := e.calls.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls before the approval", n)
	}
	list := u.get("approvals")
	pending, err := apr.Pending(testenv.Context(t), approvals.Decider{}, testAccount)
	if err != nil || len(pending) != 1 || !strings.Contains(r.body, pending[0].ID) {
		t.Fatalf("pending approvals: %+v %v", pending, err)
	}
	if got := u.post("approvals/"+pending[0].ID, url.Values{"csrf": {list.csrf(t)}, "decision": {"approve"}}); got.status != http.StatusOK {
		t.Fatalf("approve: %d\n%s", got.status, got.body)
	}
	testenv.WaitFor(t, "the approved call runs", func() bool { return e.calls.Load() == 1 })
	time.Sleep(200 * time.Millisecond) // a second run, were there one, would come now
	if n := e.calls.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1", n)
	}
}
