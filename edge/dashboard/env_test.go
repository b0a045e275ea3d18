package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"html"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// env is a dashboard served over real TCP, on a real registry in embedded NATS, with
// an account, its key, and tools: email (online, answered by a responder in this
// process; mail to bounce@example.com fails with the tool's own error), clock
// (connected but offline) and payroll (deployed, not connected).
type env struct {
	t       *testing.T
	nc      *nats.Conn
	store   *registry.Store
	view    *registry.View
	signer  *registry.LinkSigner
	cfg     dashboard.Config
	base    string
	account string
	key     string // the account's first key, unscoped
	keyRec  *registry.Key
	calls   atomic.Int64 // calls the email tool answered
}

const testAccount = "acme"

var emailTool = registry.Tool{
	ID:          "email",
	Title:       "Email",
	Description: "Send e-mail from the account's domain.",
	Version:     "1.2.0",
	Methods: []registry.Method{
		{
			Name:        "send",
			Description: "Send one message.",
			InputSchema: json.RawMessage(`{
				"type": "object",
				"properties": {
					"to": {"type": "string", "format": "email", "description": "Recipient address"},
					"subject": {"type": "string", "description": "Subject line", "maxLength": 200},
					"body": {"type": "string", "description": "Plain-text body"},
					"priority": {"type": "string", "enum": ["low", "normal", "high"]}
				},
				"required": ["to", "subject", "body"]
			}`),
		},
		{Name: "status", Description: "Report whether the mail service is up."},
	},
}

func newEnv(t *testing.T, edit func(*dashboard.Config), with ...func(*env) gateway.Option) *env {
	t.Helper()
	return newEnvWith(t, func(_ *env, cfg *dashboard.Config) {
		if edit != nil {
			edit(cfg)
		}
	}, with...)
}

// newEnvWith is newEnv whose edit of the dashboard's configuration has the env, its
// registry ready.
func newEnvWith(t *testing.T, edit func(*env, *dashboard.Config), with ...func(*env) gateway.Option) *env {
	t.Helper()
	ns := testenv.Server(t)
	e := &env{t: t, account: testAccount}
	e.nc = testenv.Conn(t, ns.ClientURL())
	e.store = testenv.Store(t, e.nc, 1)
	e.view = testenv.View(t, e.store)
	e.signer = testenv.LinkSigner(t)
	ctx := testenv.Context(t)

	if _, err := e.store.CreateAccount(ctx, registry.Account{ID: testAccount, Name: "Acme Corp"}); err != nil {
		t.Fatal(err)
	}
	var err error
	if e.keyRec, e.key, err = e.store.CreateKey(ctx, registry.NewKeyRequest{Account: testAccount, Name: "admin"}); err != nil {
		t.Fatal(err)
	}
	clock := registry.Tool{ID: "clock", Title: "Clock", Methods: []registry.Method{{Name: "now", Description: "The time."}}}
	payroll := registry.Tool{ID: "payroll", Methods: []registry.Method{{Name: "pay"}}}
	for _, tool := range []registry.Tool{emailTool, clock, payroll} {
		if err := e.store.PutTool(ctx, tool); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"email", "clock"} {
		if _, err := e.store.Connect(ctx, testAccount, id, e.signer); err != nil {
			t.Fatal(err)
		}
	}
	e.serveEmail()

	var opts []gateway.Option
	for _, w := range with {
		opts = append(opts, w(e))
	}
	gw, err := gateway.New(e.nc, e.view, gateway.DefaultConfig(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e.base = "http://" + ln.Addr().String()
	e.cfg = dashboard.DefaultConfig()
	e.cfg.BaseURL = e.base
	edit(e, &e.cfg)
	d, err := dashboard.New(e.cfg, gw, e.store, e.signer, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	// Mounted as the edge mounts it: everything under the prefix, full paths.
	mux := http.NewServeMux()
	mux.Handle(e.cfg.Prefix, d)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	}()
	t.Cleanup(func() { srv.Close() })

	e.waitFor("the registry view to hold the tools and presence", func(s *registry.Snapshot) bool {
		_, k := s.KeyByID(e.keyRec.ID)
		return k != nil && s.Connection(testAccount, "clock") != nil && s.Instances("email") == 1 && s.RawTool("payroll") != nil
	})
	return e
}

// serveEmail answers the email tool's methods and keeps one instance present.
func (e *env) serveEmail() {
	t := e.t
	testenv.KeepPresent(t, e.store, registry.Presence{Tool: "email", Instance: "i1", Host: "test", StartedAt: time.Now()})
	subjects := wire.DefaultSubjects
	sub, err := e.nc.QueueSubscribe(subjects.Call("email", "send"), subjects.QueueGroup("email"), func(m *nats.Msg) {
		var p struct{ To, Subject string }
		_ = json.Unmarshal(m.Data, &p)
		e.calls.Add(1)
		if p.To == "bounce@example.com" {
			_ = m.RespondMsg(wire.ErrorReply(m.Reply, &wire.ToolError{Code: "550", Message: "mailbox unavailable"}))
			return
		}
		body, _ := json.Marshal(map[string]string{"id": "msg_0001", "to": p.To, "status": "queued"})
		_ = m.RespondMsg(wire.JSONReply(m.Reply, body))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	sub2, err := e.nc.QueueSubscribe(subjects.Call("email", "status"), subjects.QueueGroup("email"), func(m *nats.Msg) {
		_ = m.RespondMsg(wire.RawReply(m.Reply, 0, "text/plain; charset=utf-8", []byte("mail service up")))
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub2.Unsubscribe() })
}

func (e *env) waitFor(what string, cond func(*registry.Snapshot) bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	if err := e.view.WaitFor(ctx, cond); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// url is the address of a dashboard path (relative to the prefix).
func (e *env) url(rel string) string { return e.base + e.cfg.Prefix + rel }

// link is a tool's current SSE link, as the registry derives it.
func (e *env) link(tool string) string {
	c := e.view.Snapshot().Connection(testAccount, tool)
	return e.base + "/mcp/" + e.signer.Token(testAccount, tool, c.LinkNonce) + "/sse"
}

// user is one browser: a client with its own cookie jar.
type user struct {
	e      *env
	client *http.Client
}

func (e *env) user() *user {
	jar, err := cookiejar.New(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	return &user{e: e, client: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// page is a response with its body read.
type page struct {
	status int
	url    string
	body   string
	header http.Header
}

func (u *user) do(req *http.Request) page {
	u.e.t.Helper()
	resp, err := u.client.Do(req)
	if err != nil {
		u.e.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		u.e.t.Fatal(err)
	}
	return page{status: resp.StatusCode, url: resp.Request.URL.String(), body: string(b), header: resp.Header}
}

func (u *user) get(rel string) page {
	u.e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, u.e.url(rel), nil)
	if err != nil {
		u.e.t.Fatal(err)
	}
	return u.do(req)
}

func (u *user) post(rel string, form url.Values) page {
	u.e.t.Helper()
	req, err := http.NewRequest(http.MethodPost, u.e.url(rel), strings.NewReader(form.Encode()))
	if err != nil {
		u.e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return u.do(req)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the form token a page carries.
func (p page) csrf(t *testing.T) string {
	t.Helper()
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		t.Fatalf("no CSRF token on %s:\n%s", p.url, p.body)
	}
	return html.UnescapeString(m[1])
}

// text is the page's body with entities decoded, for comparing with plain strings.
func (p page) text() string { return html.UnescapeString(p.body) }

func (u *user) signIn(key string) page {
	u.e.t.Helper()
	form := u.get("signin")
	return u.post("signin", url.Values{"csrf": {form.csrf(u.e.t)}, "key": {key}})
}

// signedIn signs in with the env's key and returns the tools page.
func (e *env) signedIn() (*user, page) {
	e.t.Helper()
	u := e.user()
	p := u.signIn(e.key)
	if p.status != http.StatusOK || !strings.HasSuffix(p.url, e.cfg.Prefix) {
		e.t.Fatalf("sign-in: %d at %s:\n%s", p.status, p.url, p.body)
	}
	return u, p
}
