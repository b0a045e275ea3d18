package edge_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"golang.org/x/oauth2"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// dashboardBrowser is a person's browser on the dashboard of edge e: it signs in
// with form, and reports where each page led.
type dashboardBrowser struct {
	t *testing.T
	c *http.Client
}

func newDashboardBrowser(t *testing.T) *dashboardBrowser {
	jar, _ := cookiejar.New(nil)
	return &dashboardBrowser{t: t, c: &http.Client{Jar: jar, Timeout: 30 * time.Second}}
}

// get reads u and returns the status, the URL it led to and the page.
func (b *dashboardBrowser) get(u string) (int, string, string) {
	b.t.Helper()
	resp, err := b.c.Get(u)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Request.URL.String(), string(body)
}

// signIn posts the sign-in form of e with creds and returns the answer's status and
// page.
func (b *dashboardBrowser) signIn(e *env, creds url.Values) (int, string) {
	b.t.Helper()
	_, _, form := b.get(e.url + "/dashboard/signin")
	creds.Set("csrf", html.UnescapeString(csrfInput.FindStringSubmatch(form)[1]))
	resp, err := b.c.PostForm(e.url+"/dashboard/signin", creds)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// addUser makes a user of account through e's admin API and returns its secret.
func addUser(t *testing.T, e *env, account, body string) edge.NewUser {
	t.Helper()
	r := e.admin(http.MethodPost, "/accounts/"+account+"/users", body)
	if r.status != http.StatusCreated {
		t.Fatalf("POST /admin/accounts/%s/users %s: %d %s", account, body, r.status, r.body)
	}
	return decode[edge.NewUser](t, r)
}

func sessionCount(t *testing.T, e *env) uint64 {
	t.Helper()
	kv, err := e.store.JetStream().KeyValue(testenv.Context(t), dashboard.SessionBucket)
	if err != nil {
		t.Fatal(err)
	}
	st, err := kv.Status(testenv.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	return st.Values()
}

// TestAUserSignsInAndIsNamedInTheAudit: a user the admin made signs in at the
// consent page, and the call made with the token it got has an audit record naming
// the user and the client (an API key's call names neither); a wrong secret, or a
// user's name and secret tried at another account, signs in nowhere and writes no
// session. Deleted through edge a, the user's token is refused by a at once and by b
// within 2 s of the DELETE's answer, its refresh token at either edge's token
// endpoint, and its dashboard session on both edges.
func TestAUserSignsInAndIsNamedInTheAudit(t *testing.T) {
	exp := spans()
	a := newEnv(t, withMCP(), withDashboard(), withSignIn(), withAudit())
	b := newEnv(t, withMCP(), withDashboard(), withSignIn(), onServer(a.srv.ClientURL()), asEdgeOf(a.url))
	key := a.account("acme", registry.Limits{Sessions: 100000})
	a.account("globex", registry.Limits{})
	a.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	a.connect("acme", "kit")
	a.connect("globex", "kit")
	ana := addUser(t, a, "acme", `{"name":"ana"}`)
	bo := addUser(t, a, "globex", `{"name":"bo"}`)
	testenv.WaitFor(t, "b's view has ana", func() bool { return b.view.Snapshot().User("acme", "ana") != nil })
	time.Sleep(3 * time.Second) // past oauth's margin around when b's view began hearing

	t.Run("refused sign-ins write nothing", func(t *testing.T) {
		before := sessionCount(t, a)
		for name, creds := range map[string]url.Values{
			"a wrong secret":                   {"account": {"acme"}, "user": {"ana"}, "secret": {ana.Secret + "x"}},
			"another account's user":           {"account": {"acme"}, "user": {"bo"}, "secret": {bo.Secret}},
			"a user tried at another account":  {"account": {"globex"}, "user": {"ana"}, "secret": {ana.Secret}},
			"a user's secret in the key field": {"key": {ana.Secret}},
		} {
			status, page := newDashboardBrowser(t).signIn(a, creds)
			if status != http.StatusUnauthorized || !strings.Contains(page, `id="signin-error"`) {
				t.Errorf("%s: %d, want 401 with the form's error", name, status)
			}
		}
		if after := sessionCount(t, a); after != before {
			t.Fatalf("refused sign-ins left %d sessions, before %d", after, before)
		}
	})

	browser := newDashboardBrowser(t)
	anaCreds := url.Values{"account": {"acme"}, "user": {"ana"}, "secret": {ana.Secret}}
	if status, page := browser.signIn(a, url.Values{"account": {"acme"}, "user": {"ana"}, "secret": {ana.Secret}}); status != http.StatusOK || !strings.Contains(page, `class="user"`) {
		t.Fatalf("ana's dashboard sign-in: %d\n%s", status, page)
	}
	if _, _, page := browser.get(a.url + "/dashboard/keys"); !strings.Contains(page, `id="user-ana"`) || !strings.Contains(page, "a sign-in secret") ||
		strings.Contains(page, ana.Secret) || strings.Contains(page, registry.Hash(ana.Secret)) {
		t.Fatalf("the keys page, signed in as ana:\n%s", page)
	}
	// A user makes no keys: an API key that reaches every tool does.
	_, _, keysPage := browser.get(a.url + "/dashboard/keys")
	resp, err := browser.c.PostForm(a.url+"/dashboard/keys", url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(keysPage)[1])}, "name": {"mine"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || len(a.view.Snapshot().Keys("acme")) != 1 {
		t.Fatalf("ana making a key: %d, want 403 and no key made", resp.StatusCode)
	}
	tok, clientID := toolTokenWith(t, a, anaCreds, "kit")
	ctx := testenv.Context(t)
	grants, err := a.authServer.Grants(ctx, "acme")
	if err != nil || len(grants) != 1 || grants[0].User != "ana" {
		t.Fatalf("grants %+v %v: want one, ana's", grants, err)
	}
	_, _, keysPage = browser.get(a.url + "/dashboard/keys")
	if !strings.Contains(keysPage, "signed in by <strong>ana</strong>") {
		t.Fatalf("the keys page does not say ana signed the client in:\n%s", keysPage)
	}
	// Nor does a user revoke grants.
	resp, err = browser.c.PostForm(a.url+"/dashboard/grants/"+grants[0].ID+"/revoke", url.Values{"csrf": {html.UnescapeString(csrfInput.FindStringSubmatch(keysPage)[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if still, _ := a.authServer.Grants(ctx, "acme"); resp.StatusCode != http.StatusForbidden || len(still) != 1 {
		t.Fatalf("ana revoking a grant: %d, %d grants left; want 403 and the grant kept", resp.StatusCode, len(still))
	}

	cs, err := goSDKSession(t, a.url+"/tools/kit/mcp", tok.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err != nil || res.IsError {
		t.Fatalf("ana's call: %v %+v", err, res)
	}
	_ = cs.Close()
	if !strings.Contains(a.logs.String(), `"account":"acme","oauth_client":"`+clientID+`","user":"ana"`) {
		t.Fatal("no access log line names ana and the client")
	}
	const traceID = "6bf92f3577b34da6a3ce929d0e0e4736"
	mcpPost(t, a.url+"/tools/kit/mcp", map[string]string{"Authorization": "Bearer " + tok.AccessToken,
		"traceparent": "00-" + traceID + "-00f067aa0ba902b7-01"}, initialize)
	testenv.WaitFor(t, "the request's span names ana and the client", func() bool {
		for _, sp := range exp.GetSpans() {
			if sp.SpanContext.TraceID().String() != traceID {
				continue
			}
			attrs := map[string]string{}
			for _, kv := range sp.Attributes {
				attrs[string(kv.Key)] = kv.Value.String()
			}
			if attrs["toolgate.user"] == "ana" && attrs["toolgate.oauth_client"] == clientID {
				return true
			}
		}
		return false
	})
	if r := a.do(http.MethodPost, "/tools/kit/echo", `{}`, "Authorization", "Bearer "+key); r.status != http.StatusOK {
		t.Fatalf("the key's call: %d %s", r.status, r.body)
	}
	records := a.awaitRecords(url.Values{"kind": {audit.KindCall}, "account": {"acme"}, "tool": {"kit"}}, 2)
	for _, r := range records {
		switch r.Transport {
		case audit.TransportDirect:
			if r.User != "" || r.Client != "" {
				t.Errorf("the key's call names user %q, client %q: want neither", r.User, r.Client)
			}
		default:
			if r.User != "ana" || r.Client != clientID {
				t.Errorf("ana's call (%s) names user %q, client %q: want ana, %s", r.Transport, r.User, r.Client, clientID)
			}
		}
	}

	// Her consent is on the trail too, made on the dashboard by her.
	granted := a.awaitRecords(url.Values{"kind": {audit.KindAdmin}, "account": {"acme"}, "method": {audit.ActionGrantAccess}}, 1)
	if g := granted[0]; g.By != "user:ana" || g.User != "ana" || g.Client != clientID || g.Tool != "kit" || g.Transport != audit.TransportDashboard {
		t.Errorf("the grant's record: %+v, want made by user:ana for %s on kit", g, clientID)
	}

	// The trail read for her, or for her client, holds only what names them.
	for name, q := range map[string]url.Values{"ana": {"user": {"ana"}}, "the client": {"client": {clientID}}} {
		q.Set("account", "acme")
		recs := a.auditPage(q).Records
		kinds := map[string]bool{}
		for _, r := range recs {
			if (q.Get("user") != "" && r.User != "ana") || (q.Get("client") != "" && r.Client != clientID) {
				t.Errorf("GET /admin/audit?%s holds %+v", q.Encode(), r)
			}
			kinds[r.Kind+" "+r.Method] = true
		}
		if !kinds[audit.KindCall+" echo"] || !kinds[audit.KindAdmin+" "+audit.ActionGrantAccess] {
			t.Errorf("the records of %s: %v, want her call and her grant", name, kinds)
		}
	}

	bearer := map[string]string{"Authorization": "Bearer " + tok.AccessToken}
	status := func(e *env) int {
		resp, _ := mcpPost(t, e.url+"/tools/kit/mcp", bearer, initialize)
		return resp.StatusCode
	}
	for name, e := range map[string]*env{"a": a, "b": b} {
		if s := status(e); s != http.StatusOK {
			t.Fatalf("edge %s, before the deletion: %d, want 200", name, s)
		}
	}
	if r := a.admin(http.MethodDelete, "/accounts/acme/users/ana", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE ana: %d %s", r.status, r.body)
	}
	answered := time.Now()
	if s := status(a); s != http.StatusUnauthorized {
		t.Fatalf("edge a, right after the deletion's answer: %d, want 401", s)
	}
	var lastAccepted time.Time
	testenv.WaitFor(t, "edge b refuses ana's token", func() bool {
		sent := time.Now()
		if status(b) == http.StatusOK {
			lastAccepted = sent
			return false
		}
		return true
	})
	if lastAccepted.Sub(answered) >= 2*time.Second {
		t.Fatalf("edge b accepted ana's token %s after the deletion's answer", lastAccepted.Sub(answered))
	}
	for name, e := range map[string]*env{"a": a, "b": b} {
		cfg := oauth2.Config{ClientID: clientID, Endpoint: oauth2.Endpoint{TokenURL: e.url + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
		if _, err := cfg.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token(); err == nil {
			t.Errorf("edge %s refreshed a deleted user's token", name)
		}
		if _, at, _ := browser.get(e.url + "/dashboard/"); !strings.Contains(at, "/dashboard/signin") {
			t.Errorf("edge %s: ana's dashboard session led to %s, not the sign-in page", name, at)
		}
	}
	keyHolder := newDashboardBrowser(t)
	keyHolder.signIn(a, url.Values{"key": {key}})
	if _, _, page := keyHolder.get(a.url + "/dashboard/keys"); !strings.Contains(page, `id="users-title"`) || strings.Contains(page, `id="user-ana"`) {
		t.Errorf("the keys page after the deletion:\n%s", page)
	}
	for _, action := range []string{audit.ActionAddUser, audit.ActionDeleteUser} {
		if rs := a.awaitRecords(url.Values{"kind": {audit.KindAdmin}, "account": {"acme"}, "method": {action}}, 1); rs[0].User != "ana" {
			t.Errorf("the %s record names user %q, want ana", action, rs[0].User)
		}
	}
	if got, _ := a.authServer.Grants(ctx, "acme"); len(got) != 0 {
		t.Errorf("grants after the deletion: %+v", got)
	}
	if status, _ := newDashboardBrowser(t).signIn(a, anaCreds); status != http.StatusUnauthorized {
		t.Errorf("a deleted user's sign-in: %d, want 401", status)
	}
}

// TestIdPSubjectsOfAnAccountWithUsers: behind an identity provider, an account that
// lists no users takes every subject the provider names for it, as before users
// existed; once it lists users with subjects it takes only theirs, and the call names
// the user, not the subject; a listed user deleted is refused from the DELETE's
// answer on; and once it lists none again, every subject is taken again.
func TestIdPSubjectsOfAnAccountWithUsers(t *testing.T) {
	s := newIdPSetup(t, testidp.Options{ResourceAudience: true, AccessTokenLifetime: time.Minute, Claims: map[string]map[string]any{
		testidp.Subject: {"toolgate_account": "acme"}, testidp.SecondSubject: {"toolgate_account": "acme"}}},
		oauth.ExternalConfig{KeysMinRefetch: time.Second})
	full := oauth.ToolScopes("kit")
	first, second := s.token(t, s.idp.Username(), s.link, full...), s.token(t, testidp.SecondUsername, s.link, full...)
	expectTaken(t, "the first subject, no users listed", s.link, first)
	expectTaken(t, "the second subject, no users listed", s.link, second)

	addUser(t, s.e, "acme", `{"name":"ana","subject":"`+testidp.Subject+`"}`)
	addUser(t, s.e, "acme", `{"name":"carl","subject":"someone-else"}`)
	testenv.WaitFor(t, "the view has acme's users", func() bool { return s.e.view.Snapshot().User("acme", "carl") != nil })
	expectTaken(t, "ana's subject, listed", s.link, first)
	if !strings.Contains(s.e.logs.String(), `"account":"acme","oauth_client":"`+idpClient+`","user":"ana"`) {
		t.Fatal("no access log line names ana")
	}
	expectRefused(t, "a subject not listed", s.link, second, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	_, anaStream := openSessionStream(t, s.link, first)

	if r := s.e.admin(http.MethodDelete, "/accounts/acme/users/ana", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE ana: %d %s", r.status, r.body)
	}
	expectRefused(t, "ana deleted", s.link, first, initialize, 401, gateway.CodeInvalidToken, "invalid_token")
	select { // her session, opened before, ends too
	case <-anaStream:
	case <-time.After(testenv.Patience):
		t.Fatal("ana's session stream is still open after she was deleted")
	}

	// The last user with a subject deleted, the account takes every subject again.
	if r := s.e.admin(http.MethodDelete, "/accounts/acme/users/carl", ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE carl: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the view has no user of acme", func() bool { return !s.e.view.Snapshot().HasSubjectUsers("acme") })
	expectTaken(t, "the second subject, no users listed again", s.link, second)
}
