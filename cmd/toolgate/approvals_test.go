package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/workers/demo"
)

// approvalStack is `toolgate edge` with an approval webhook and `toolgate worker
// demo` on one NATS server, set up with the admin commands.
type approvalStack struct {
	t   *testing.T
	url string

	mu        sync.Mutex
	announced []approvals.Announcement // what the webhook was POSTed
}

func newApprovalStack(t *testing.T) *approvalStack {
	s := &approvalStack{t: t}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var a approvals.Announcement
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			t.Errorf("webhook: %v", err)
		}
		s.mu.Lock()
		s.announced = append(s.announced, a)
		s.mu.Unlock()
	}))
	t.Cleanup(hook.Close)
	srv := testenv.Server(t)
	s.url, _ = startEdge(t, srv.ClientURL(), "--approval-webhook", hook.URL)
	startWorkerDemo(t, srv.ClientURL())
	return s
}

// account makes an account connected to the email tool, whose rule holds send_email
// for approval (expiresIn seconds: 0 for the edge's default), and returns a key and
// the MCP link.
func (s *approvalStack) account(id string, expiresIn string) (key, link string) {
	t := s.t
	admin(t, s.url, "accounts", "create", id)
	var conn edge.Connection
	if err := json.Unmarshal([]byte(admin(t, s.url, "tools", "connect", id, "email")), &conn); err != nil {
		t.Fatal(err)
	}
	var k edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, s.url, "keys", "create", id)), &k); err != nil {
		t.Fatal(err)
	}
	rule := "tool=email,method=send_email"
	if expiresIn != "" {
		rule += ",expires_in=" + expiresIn
	}
	admin(t, s.url, "accounts", "update", id, "--approval", rule)
	if got := admin(t, s.url, "accounts", "show", id); !strings.Contains(got, `"approvals"`) || !strings.Contains(got, `"send_email"`) {
		t.Fatalf("accounts show %s:\n%s", id, got)
	}
	return k.Secret, conn.MCPURL
}

// do makes one request with key and returns its status, headers and body.
func (s *approvalStack) do(key, method, path, body string) (int, http.Header, []byte) {
	s.t.Helper()
	req, _ := http.NewRequest(method, s.url+path, strings.NewReader(body))
	req.Header.Set("SERVICE_API_KEY", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// held sends send_email over REST and checks that it waits for approval.
func (s *approvalStack) held(key, args string) edge.CallStatus {
	s.t.Helper()
	status, h, body := s.do(key, http.MethodPost, "/tool-call/email/send_email", args)
	var st edge.CallStatus
	if status != http.StatusAccepted || json.Unmarshal(body, &st) != nil || st.Status != calls.AwaitingApproval ||
		h.Get("Location") != "/calls/"+st.ID || st.Approval == "" {
		s.t.Fatalf("send_email over REST: %d %s %s", status, h.Get("Location"), body)
	}
	return st
}

// outbox is what the demo email tool has sent.
func (s *approvalStack) outbox(key string) []demo.Mail {
	s.t.Helper()
	status, _, body := s.do(key, http.MethodPost, "/tool-call/email/list_sent", `{}`)
	var out struct{ Messages []demo.Mail }
	if status != http.StatusOK || json.Unmarshal(body, &out) != nil {
		s.t.Fatalf("list_sent: %d %s", status, body)
	}
	return out.Messages
}

func (s *approvalStack) pending(account string) []approvals.Record {
	s.t.Helper()
	var list edge.ApprovalList
	if err := json.Unmarshal([]byte(admin(s.t, s.url, "approvals", "list", "--account", account)), &list); err != nil {
		s.t.Fatal(err)
	}
	return list.Approvals
}

// TestApprovalOfASendEmail: the demo email tool's send_email, held by the account's
// rule, called over REST and from the TypeScript SDK's MCP client: both wait, the
// webhook hears of both, another account's key holder neither sees nor decides them,
// the account's key holder approves both on the dashboard in Chromium, and each
// message is sent once. The same call with other arguments waits for its own
// approval; a denied one fails with approval_denied; a second decision is refused; a
// call nobody approves fails with approval_expired when its approval expires.
func TestApprovalOfASendEmail(t *testing.T) {
	bin, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("no Chromium on PATH")
	}
	s := newApprovalStack(t)
	key, link := s.account("acme", "")
	otherKey, _ := s.account("beta", "")
	testenv.WaitFor(t, "the email tool is online", func() bool {
		status, _, _ := s.do(key, http.MethodPost, "/tool-call/email/list_sent", `{}`)
		return status == http.StatusOK
	})

	rest := s.held(key, `{"to":"ada@example.com","subject":"Invoice","body":"Attached."}`)
	ts := tsclient.HTTP(t, link, "")
	type answer struct {
		Text    string `json:"text"`
		IsError bool   `json:"isError"`
	}
	tsDone := make(chan answer, 1)
	go func() {
		raw, err := ts.Do(context.Background(), map[string]any{"op": "call", "name": "send_email", "progress": true,
			"args": map[string]any{"to": "bob@example.com", "subject": "Invoice", "body": "Attached."}})
		var a answer
		if err != nil || json.Unmarshal(raw, &a) != nil {
			t.Errorf("the TypeScript client's call: %v %s\n%s", err, raw, ts.Stderr())
		}
		tsDone <- a
	}()
	var waiting []approvals.Record
	testenv.WaitFor(t, "both calls wait for approval", func() bool {
		waiting = s.pending("acme")
		return len(waiting) == 2
	})
	if _, ok := ts.WaitEvent("progress", testenv.Patience); !ok {
		t.Error("the TypeScript client heard no progress while its call waited")
	}
	if got := s.outbox(key); len(got) != 0 {
		t.Fatalf("sent before approval: %+v", got)
	}
	testenv.WaitFor(t, "the webhook announced both", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.announced) == 2
	})

	b := newApprovalBrowser(t, bin, s.url)
	b.signIn(otherKey)
	b.do("open beta's approvals", chromedp.Navigate(s.url+"/dashboard/approvals"), chromedp.WaitVisible(chromedp.CSS("#no-approvals")))
	b.forge(waiting[0].ID)
	if len(s.pending("acme")) != 2 {
		t.Fatal("another account's key holder decided an approval")
	}
	b.signOut()
	b.signIn(key)
	b.do("open acme's approvals", chromedp.Navigate(s.url+"/dashboard/approvals"), chromedp.WaitVisible(chromedp.CSS(".approval")))
	for _, a := range waiting {
		b.do("approve "+a.ID,
			chromedp.Click(chromedp.CSS("#approval-"+a.ID+` button[value="approve"]`)),
			chromedp.WaitVisible(chromedp.CSS("#decided")))
	}

	var restAnswer []byte
	testenv.WaitFor(t, "the REST call ran", func() bool {
		status, _, body := s.do(key, http.MethodGet, "/calls/"+rest.ID, "")
		restAnswer = body
		return status == http.StatusOK
	})
	select {
	case a := <-tsDone:
		if a.IsError || !strings.Contains(a.Text, "msg_") {
			t.Fatalf("the TypeScript client's call answered %+v", a)
		}
	case <-time.After(testenv.Patience):
		t.Fatal("the TypeScript client's call did not end")
	}
	sent := s.outbox(key)
	if len(sent) != 2 || !sentTo(sent, "ada@example.com", "bob@example.com") {
		t.Fatalf("the outbox holds %+v, want one message to each", sent)
	}
	for _, m := range sent {
		if m.To == "ada@example.com" && !strings.Contains(string(restAnswer), m.ID) {
			t.Fatalf("GET /calls/%s answered %s, not the message sent (%s)", rest.ID, restAnswer, m.ID)
		}
	}

	// Another call, with the arguments the approved one had or others, waits anew.
	again := s.held(key, `{"to":"ada@example.com","subject":"Invoice","body":"Attached."}`)
	other := s.held(key, `{"to":"carol@example.com","subject":"Invoice","body":"Attached."}`)
	if again.Approval == rest.Approval || other.Approval == rest.Approval || again.Approval == other.Approval {
		t.Fatal("a new call shares an approval")
	}
	admin(t, s.url, "approvals", "deny", other.Approval, "--reason", "not this one")
	admin(t, s.url, "approvals", "deny", again.Approval)
	testenv.WaitFor(t, "the denied call fails", func() bool {
		status, h, body := s.do(key, http.MethodGet, "/calls/"+other.ID, "")
		return status == http.StatusForbidden && h.Get(edge.HeaderCallStatus) == "failed" && strings.Contains(string(body), `"approval_denied"`) &&
			strings.Contains(string(body), "not this one")
	})
	if _, err := run(t, context.Background(), "approvals", "approve", rest.Approval, "--url", s.url); err == nil || !strings.Contains(err.Error(), "conflict") {
		t.Fatalf("a second decision: %v", err)
	}
	if got := s.outbox(key); len(got) != 2 {
		t.Fatalf("the outbox holds %d messages after denials, want 2", len(got))
	}

	// An approval nobody decides on expires, and the waiting MCP call fails.
	_, slowLink := s.account("slow", "2")
	slow := tsclient.HTTP(t, slowLink, "")
	raw, err := slow.Do(context.Background(), map[string]any{"op": "call", "name": "send_email",
		"args": map[string]any{"to": "dan@example.com", "subject": "Late", "body": "x"}})
	var late answer
	if err != nil || json.Unmarshal(raw, &late) != nil || !late.IsError || !strings.Contains(late.Text, "expired") {
		t.Fatalf("a call whose approval expired: %v %s", err, raw)
	}
}

func sentTo(mail []demo.Mail, to ...string) bool {
	for _, addr := range to {
		n := 0
		for _, m := range mail {
			if m.To == addr {
				n++
			}
		}
		if n != 1 {
			return false
		}
	}
	return true
}

// approvalBrowser is headless Chromium on the dashboard.
type approvalBrowser struct {
	t   *testing.T
	ctx context.Context
	url string
}

func newApprovalBrowser(t *testing.T, bin, url string) *approvalBrowser {
	ctx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return &approvalBrowser{t: t, ctx: ctx, url: url}
}

func (b *approvalBrowser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Steps(steps...)); err != nil {
		loc, _ := chromedp.Run(b.ctx, chromedp.Location())
		b.t.Fatalf("%s (at %s): %v", what, loc, err)
	}
}

func (b *approvalBrowser) signIn(key string) {
	b.do("sign in", chromedp.Navigate(b.url+"/dashboard/signin"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SetValue(chromedp.CSS("#key"), key), chromedp.Submit(chromedp.CSS("#key")),
		chromedp.WaitVisible(chromedp.CSS(`a[href="/dashboard/approvals"]`)))
}

func (b *approvalBrowser) signOut() {
	b.do("sign out", chromedp.Submit(chromedp.CSS(`form[action="/dashboard/signout"] button`)), chromedp.WaitVisible(chromedp.CSS("#key")))
}

// forge posts a decision on id from this session's own form token, as a page of the
// dashboard could: another account's approval is not found.
func (b *approvalBrowser) forge(id string) {
	b.do("decide another account's approval",
		chromedp.Evaluate[chromedp.Void](`(() => {
			const f = document.createElement('form');
			f.method = 'post';
			f.action = '/dashboard/approvals/`+id+`';
			for (const [n, v] of [['csrf', document.querySelector('input[name=csrf]').value], ['decision', 'approve']]) {
				const i = document.createElement('input');
				i.type = 'hidden'; i.name = n; i.value = v; f.appendChild(i);
			}
			document.body.appendChild(f);
			f.submit();
		})()`),
		chromedp.WaitVisible(chromedp.CSS("main")))
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](`document.body.innerText.includes('no such approval')`)); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
		b.t.Fatalf("deciding another account's approval: %v\n%s", err, text)
	}
}
