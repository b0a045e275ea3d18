package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/install"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func TestSignIn(t *testing.T) {
	e := newEnv(t, nil)

	t.Run("a visitor without a session is sent to the sign-in page", func(t *testing.T) {
		p := e.user().get("")
		if p.status != http.StatusOK || !strings.HasSuffix(p.url, "/dashboard/signin") {
			t.Fatalf("got %d at %s", p.status, p.url)
		}
		if !strings.Contains(p.body, `<label for="key">API key</label>`) {
			t.Errorf("the sign-in form has no labelled key field:\n%s", p.body)
		}
	})

	bad := []struct{ name, key string }{
		{"an unknown key", registry.NewKey()},
		{"an empty key", ""},
		{"a key of the right shape but one character off", oneOff(e.key)},
	}
	for _, tc := range bad {
		t.Run("sign-in with "+tc.name+" fails", func(t *testing.T) {
			u := e.user()
			p := u.signIn(tc.key)
			if p.status != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", p.status)
			}
			if !strings.Contains(p.body, "That API key is not valid") {
				t.Errorf("no explanation on the page:\n%s", p.body)
			}
			if tc.key != "" && strings.Contains(p.body, tc.key) {
				t.Errorf("the page echoes the key it refused")
			}
			if got := u.get(""); !strings.HasSuffix(got.url, "/signin") {
				t.Errorf("after a failed sign-in the dashboard opens at %s", got.url)
			}
		})
	}

	t.Run("a revoked key cannot sign in", func(t *testing.T) {
		k, secret, err := e.store.CreateKey(testenv.Context(t), registry.NewKeyRequest{Account: testAccount, Name: "old"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.RevokeKey(testenv.Context(t), registry.Hash(secret)); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the revocation", func(s *registry.Snapshot) bool { _, r := s.KeyByID(k.ID); return r != nil && r.RevokedAt != nil })
		if p := e.user().signIn(secret); p.status != http.StatusUnauthorized {
			t.Fatalf("status %d, want 401", p.status)
		}
	})

	t.Run("the right key opens the account's tools", func(t *testing.T) {
		_, p := e.signedIn()
		if !strings.Contains(p.body, "Acme Corp") || !strings.Contains(p.body, `href="/dashboard/tools/email"`) {
			t.Fatalf("the tools page does not show the account and its tools:\n%s", p.body)
		}
	})
}

func TestSessionCookie(t *testing.T) {
	for _, tc := range []struct {
		name   string
		secure bool
	}{
		{"over plain HTTP the session cookie is HttpOnly and SameSite=Strict", false},
		{"with secure cookies configured it is Secure too", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, func(c *dashboard.Config) { c.SecureCookie = tc.secure })
			u := e.user()
			form := u.get("signin")
			// Follow no redirect, to read the sign-in response's own cookies.
			u.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
			resp, err := u.client.PostForm(e.url("signin"), url.Values{"csrf": {form.csrf(t)}, "key": {e.key}})
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d, want 303", resp.StatusCode)
			}
			var session *http.Cookie
			for _, c := range resp.Cookies() {
				if c.Name == e.cfg.CookieName {
					session = c
				}
			}
			if session == nil {
				t.Fatalf("no session cookie in %v", resp.Header.Values("Set-Cookie"))
			}
			if !session.HttpOnly || session.SameSite != http.SameSiteStrictMode || session.Path != "/dashboard/" || session.Secure != tc.secure {
				t.Errorf("cookie %q: HttpOnly=%v SameSite=%v Path=%q Secure=%v", session.Raw, session.HttpOnly, session.SameSite, session.Path, session.Secure)
			}
			if strings.Contains(session.Value, e.key) || strings.Contains(session.Value, registry.Hash(e.key)) {
				t.Errorf("the cookie carries the key")
			}

			// The server keeps the session under the hash of its id, never the id, and
			// never the key.
			kv, err := jetstream.New(e.nc)
			if err != nil {
				t.Fatal(err)
			}
			bucket, err := kv.KeyValue(testenv.Context(t), dashboard.SessionBucket)
			if err != nil {
				t.Fatal(err)
			}
			entry, err := bucket.Get(testenv.Context(t), registry.Hash(session.Value))
			if err != nil {
				t.Fatalf("no session filed under the hash of the cookie: %v", err)
			}
			if _, err := bucket.Get(testenv.Context(t), session.Value); err == nil {
				t.Errorf("a session is filed under the plain id")
			}
			if strings.Contains(string(entry.Value()), e.key) || strings.Contains(string(entry.Value()), session.Value) {
				t.Errorf("the stored session holds the key or the session id: %s", entry.Value())
			}
		})
	}
}

func TestCSRF(t *testing.T) {
	e := newEnv(t, nil)
	u, home := e.signedIn()
	token := home.csrf(t)
	_, otherHome := e.signedIn()
	otherToken := otherHome.csrf(t)
	if token == otherToken {
		t.Fatal("two sessions share a CSRF token")
	}

	forms := []struct {
		name string
		path string
		form url.Values
	}{
		{"creating a key", "keys", url.Values{"name": {"forged"}}},
		{"revoking a key", "keys/" + e.keyRec.ID + "/revoke", nil},
		{"rotating a link", "tools/email/sse/rotate", nil},
		{"running a call", "tools/email/api/send", url.Values{"params": {`{"to":"a@example.com","subject":"s","body":"b"}`}}},
		{"signing out", "signout", nil},
	}
	tokens := []struct{ name, token string }{
		{"no token", ""},
		{"a wrong token", "not-the-token"},
		{"another session's token", otherToken},
	}
	linkBefore := e.link("email")
	for _, f := range forms {
		for _, tok := range tokens {
			t.Run(f.name+" with "+tok.name+" is refused", func(t *testing.T) {
				form := url.Values{}
				for k, v := range f.form {
					form[k] = v
				}
				if tok.token != "" {
					form.Set("csrf", tok.token)
				}
				p := u.post(f.path, form)
				if p.status != http.StatusForbidden {
					t.Fatalf("status %d, want 403:\n%s", p.status, p.body)
				}
			})
		}
	}
	t.Run("nothing the forged forms asked for happened", func(t *testing.T) {
		if n := len(e.view.Snapshot().Keys(testAccount)); n != 1 {
			t.Errorf("the account has %d keys, want 1", n)
		}
		if e.link("email") != linkBefore {
			t.Errorf("the link was rotated")
		}
		if n := e.calls.Load(); n != 0 {
			t.Errorf("the tool was called %d times", n)
		}
		if p := u.get(""); !strings.Contains(p.body, "Acme Corp") {
			t.Errorf("the session was signed out")
		}
	})
	t.Run("the sign-in form without its cookie's token is refused", func(t *testing.T) {
		p := e.user().post("signin", url.Values{"csrf": {"made-up"}, "key": {e.key}})
		if p.status != http.StatusForbidden {
			t.Fatalf("status %d, want 403", p.status)
		}
	})
	t.Run("a cross-site POST is refused even with the right token", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, e.url("keys"), strings.NewReader(url.Values{"csrf": {token}, "name": {"x"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		if p := u.do(req); p.status != http.StatusForbidden {
			t.Fatalf("status %d, want 403", p.status)
		}
	})
}

func TestToolsPage(t *testing.T) {
	e := newEnv(t, nil)
	_, p := e.signedIn()
	cards := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)<li class="card tool-card">.*?</li>`).FindAllString(p.body, -1) {
		id := regexp.MustCompile(`href="/dashboard/tools/([^"]+)"`).FindStringSubmatch(m)[1]
		cards[id] = m
	}
	tests := []struct {
		tool, status, instances, methods string
	}{
		{"email", "online", "1", "2"},
		{"clock", "offline", "0", "1"},
	}
	for _, tc := range tests {
		t.Run(tc.tool+" shows as "+tc.status+" with its instances and methods", func(t *testing.T) {
			c, ok := cards[tc.tool]
			if !ok {
				t.Fatalf("no card for %s", tc.tool)
			}
			for _, want := range []string{
				`class="badge ` + tc.status + `"`,
				"<dt>Instances</dt><dd>" + tc.instances + "</dd>",
				"<dt>Methods</dt><dd>" + tc.methods + "</dd>",
			} {
				if !strings.Contains(c, want) {
					t.Errorf("card lacks %q:\n%s", want, c)
				}
			}
		})
	}
	t.Run("a tool not connected to the account is neither listed nor shown", func(t *testing.T) {
		if _, ok := cards["payroll"]; ok {
			t.Error("payroll is listed")
		}
		u, _ := e.signedIn()
		if p := u.get("tools/payroll"); p.status != http.StatusNotFound {
			t.Errorf("status %d, want 404", p.status)
		}
	})
}

func TestInstallTab(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	p := u.get("tools/email")
	if p.status != http.StatusOK {
		t.Fatalf("status %d", p.status)
	}
	text := p.text()
	for _, c := range install.Clients() {
		want := "toolgate install email <API_KEY> --client " + c.Name() + " --base-url " + e.base
		if !strings.Contains(text, want) {
			t.Errorf("no command for %s: want %q", c.Title(), want)
		}
	}
	if !strings.Contains(p.body, `aria-current="page">Install</a>`) {
		t.Errorf("the Install tab is not marked current")
	}
	if strings.Contains(p.body, e.key) {
		t.Errorf("the install tab shows the key the user signed in with")
	}
}

func TestSSETab(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	p := u.get("tools/email/sse")
	if p.status != http.StatusOK {
		t.Fatalf("status %d", p.status)
	}
	link := e.link("email")
	t.Run("shows the tool's SSE link", func(t *testing.T) {
		if !strings.Contains(p.body, `<code id="sse-link" aria-labelledby="sse-link-label">`+link+`</code>`) {
			t.Fatalf("no SSE link %s on the page:\n%s", link, p.body)
		}
	})
	t.Run("shows each client's configuration as the installer writes it", func(t *testing.T) {
		streamable := strings.TrimSuffix(link, "/sse")
		entry := install.Entry{Name: "email", URL: streamable, Description: emailTool.Description,
			Command: "toolgate", Args: []string{"connect", streamable}}
		for _, c := range []install.Client{install.Cursor, install.VSCode, install.ClaudeCode, install.ClaudeDesktop} {
			want, err := c.Add(nil, entry)
			if err != nil {
				t.Fatal(err)
			}
			m := regexp.MustCompile(`(?s)<code id="config-` + c.Name() + `">(.*?)</code>`).FindStringSubmatch(p.body)
			if m == nil {
				t.Errorf("no configuration for %s", c.Title())
				continue
			}
			got := page{body: m[1]}.text()
			if got != string(want) {
				t.Errorf("%s configuration:\n%s\nwant:\n%s", c.Title(), got, want)
			}
			if !json.Valid([]byte(got)) {
				t.Errorf("%s configuration is not JSON", c.Title())
			}
		}
	})
	t.Run("rotating the link shows a new one and kills the old", func(t *testing.T) {
		r := u.post("tools/email/sse/rotate", url.Values{"csrf": {p.csrf(t)}})
		if r.status != http.StatusOK || !strings.HasSuffix(r.url, "/tools/email/sse?rotated=1") {
			t.Fatalf("got %d at %s", r.status, r.url)
		}
		fresh := e.link("email")
		if fresh == link {
			t.Fatal("the link did not change")
		}
		if !strings.Contains(r.body, fresh) || strings.Contains(r.body, link) {
			t.Errorf("the page does not show the new link (and only it)")
		}
		oldToken := strings.TrimSuffix(strings.TrimPrefix(link, e.base+"/mcp/"), "/sse")
		e.waitFor("the old link to stop working", func(s *registry.Snapshot) bool {
			_, err := s.AuthenticateLink(oldToken)
			return err != nil
		})
	})
}

func TestAPITab(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	p := u.get("tools/email/api")
	if p.status != http.StatusOK {
		t.Fatalf("status %d", p.status)
	}
	t.Run("lists every method with its description", func(t *testing.T) {
		for _, m := range emailTool.Methods {
			if !strings.Contains(p.body, `id="method-`+m.Name+`"`) || !strings.Contains(p.body, m.Description) {
				t.Errorf("method %s is missing", m.Name)
			}
		}
	})
	t.Run("shows the input schema as a table", func(t *testing.T) {
		section := regexp.MustCompile(`(?s)<section class="card method" id="method-send".*?</section>`).FindString(p.body)
		rows := paramRows(section)
		want := map[string][]string{
			"to":       {"string", "yes", "Recipient address", "email"},
			"subject":  {"string", "yes", "Subject line", "at most 200 characters"},
			"body":     {"string", "yes", "Plain-text body", ""},
			"priority": {"string", "no", "", `one of "low", "normal", "high"`},
		}
		if !reflect.DeepEqual(rows, want) {
			t.Errorf("rows %q\nwant %q", rows, want)
		}
	})
	t.Run("shows a curl example for the tool-call route", func(t *testing.T) {
		want := "curl -X POST " + e.base + "/tool-call/email/send \\\n  -H 'SERVICE_API_KEY: <API_KEY>'"
		if !strings.Contains(p.text(), want) {
			t.Errorf("no curl example %q", want)
		}
	})

	run := func(t *testing.T, method, params string) page {
		t.Helper()
		return u.post("tools/email/api/"+method, url.Values{"csrf": {p.csrf(t)}, "params": {params}})
	}
	t.Run("the prefilled example runs and shows the tool's answer", func(t *testing.T) {
		example := page{body: regexp.MustCompile(`(?s)<textarea id="params-send"[^>]*>(.*?)</textarea>`).FindStringSubmatch(p.body)[1]}.text()
		r := run(t, "send", example)
		if r.status != http.StatusOK {
			t.Fatalf("status %d", r.status)
		}
		if !strings.Contains(r.body, `<span class="status" id="status-send">200 OK</span>`) {
			t.Errorf("no 200 status shown:\n%s", r.body)
		}
		if !strings.Contains(r.text(), `"to": "user@example.com"`) || !strings.Contains(r.text(), `"status": "queued"`) {
			t.Errorf("the tool's answer is not shown:\n%s", r.body)
		}
		if e.calls.Load() != 1 {
			t.Errorf("the tool answered %d calls, want 1", e.calls.Load())
		}
	})
	t.Run("a text answer is shown as text", func(t *testing.T) {
		r := run(t, "status", "{}")
		if !strings.Contains(r.body, `<code id="response-status">mail service up</code>`) {
			t.Errorf("no text answer:\n%s", r.body)
		}
	})

	errorCases := []struct {
		name, tool, method, params string
		status                     string
		code                       string
		detail                     string
	}{
		{"parameters that break the schema get invalid_params with pointers", "email", "send",
			`{"to":"not an address","subject":"s"}`, "400 Bad Request", "invalid_params", `"pointer": "/body"`},
		{"parameters that are not an object get invalid_json", "email", "send", `[1,2]`, "400 Bad Request", "invalid_json", ""},
		{"a tool's own failure gets tool_error with its code and message", "email", "send",
			`{"to":"bounce@example.com","subject":"s","body":"b"}`, "502 Bad Gateway", "tool_error", `"message": "mailbox unavailable"`},
		{"a tool with no worker gets tool_unavailable", "clock", "now", `{}`, "503 Service Unavailable", "tool_unavailable", ""},
	}
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			r := u.post("tools/"+tc.tool+"/api/"+tc.method, url.Values{"csrf": {p.csrf(t)}, "params": {tc.params}})
			if r.status != http.StatusOK {
				t.Fatalf("status %d", r.status)
			}
			body := r.text()
			if !strings.Contains(body, `id="status-`+tc.method+`">`+tc.status+`<`) {
				t.Errorf("status %q not shown:\n%s", tc.status, r.body)
			}
			if !strings.Contains(body, `"code": "`+tc.code+`"`) || !strings.Contains(body, `"request_id": "req_`) {
				t.Errorf("no %s envelope:\n%s", tc.code, body)
			}
			if tc.detail != "" && !strings.Contains(body, tc.detail) {
				t.Errorf("no detail %s:\n%s", tc.detail, body)
			}
			if !strings.Contains(body, tc.params) {
				t.Errorf("the form does not keep the parameters sent")
			}
		})
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t, nil)
	u, home := e.signedIn()
	token := home.csrf(t)

	created := u.post("keys", url.Values{"csrf": {token}, "name": {"laptop"}, "expires": {"30"}, "scope": {"email"}})
	if created.status != http.StatusOK {
		t.Fatalf("status %d:\n%s", created.status, created.body)
	}
	m := regexp.MustCompile(`<code id="new-key">(tg_[0-9A-Za-z]+)</code>`).FindStringSubmatch(created.body)
	if m == nil {
		t.Fatalf("the new key is not shown:\n%s", created.body)
	}
	secret := m[1]
	p, err := e.view.Snapshot().AuthenticateKey(secret, time.Now())
	if err != nil {
		t.Fatalf("the key shown does not authenticate: %v", err)
	}

	t.Run("the new key has the name, scope and expiry asked for", func(t *testing.T) {
		k := p.Key
		if k.Name != "laptop" || len(k.Scopes) != 1 || k.Scopes[0] != "email" || k.ExpiresAt == nil {
			t.Fatalf("key %+v", k)
		}
		if d := time.Until(*k.ExpiresAt); d < 29*24*time.Hour || d > 31*24*time.Hour {
			t.Errorf("expires in %v", d)
		}
		if !strings.Contains(created.body, `<code>`+k.Prefix+`…</code>`) {
			t.Errorf("the list does not show the new key's prefix")
		}
	})
	t.Run("the key appears on no page after the one that created it", func(t *testing.T) {
		for _, rel := range []string{"", "keys", "tools/email", "tools/email/sse", "tools/email/api", "tools/clock/api"} {
			if got := u.get(rel); strings.Contains(got.body, secret) {
				t.Errorf("%s shows the key", rel)
			}
		}
		if got := u.post("tools/email/api/status", url.Values{"csrf": {token}, "params": {"{}"}}); strings.Contains(got.body, secret) {
			t.Errorf("the try-it answer shows the key")
		}
	})
	t.Run("a key limited to some tools cannot manage keys", func(t *testing.T) {
		scoped := e.user()
		if r := scoped.signIn(secret); r.status != http.StatusOK {
			t.Fatalf("sign-in with the new key: %d", r.status)
		}
		keys := scoped.get("keys")
		if strings.Contains(keys.body, `action="/dashboard/keys"`) {
			t.Errorf("the keys page offers a scoped key the create form")
		}
		r := scoped.post("keys", url.Values{"csrf": {keys.csrf(t)}, "name": {"wider"}})
		if r.status != http.StatusForbidden {
			t.Errorf("creating a key with a scoped key: %d, want 403", r.status)
		}
		if tools := scoped.get(""); strings.Contains(tools.body, "tools/clock") {
			t.Errorf("a key scoped to email sees clock")
		}
	})
	t.Run("revoking a key marks it revoked and it stops working", func(t *testing.T) {
		r := u.post("keys/"+p.Key.ID+"/revoke", url.Values{"csrf": {token}})
		if r.status != http.StatusOK || !strings.Contains(r.url, "keys?revoked=") {
			t.Fatalf("got %d at %s", r.status, r.url)
		}
		row := regexp.MustCompile(`(?s)<tr id="key-` + p.Key.ID + `">.*?</tr>`).FindString(r.body)
		if !strings.Contains(row, `<span class="badge offline">revoked</span>`) {
			t.Errorf("the row does not say revoked:\n%s", row)
		}
		if _, err := e.view.Snapshot().AuthenticateKey(secret, time.Now()); err == nil {
			t.Errorf("the revoked key still authenticates")
		}
	})
	t.Run("a key of another account cannot be revoked", func(t *testing.T) {
		ctx := testenv.Context(t)
		if _, err := e.store.CreateAccount(ctx, registry.Account{ID: "other"}); err != nil {
			t.Fatal(err)
		}
		k, _, err := e.store.CreateKey(ctx, registry.NewKeyRequest{Account: "other"})
		if err != nil {
			t.Fatal(err)
		}
		e.waitFor("the other key", func(s *registry.Snapshot) bool { _, got := s.KeyByID(k.ID); return got != nil })
		if r := u.post("keys/"+k.ID+"/revoke", url.Values{"csrf": {token}}); r.status != http.StatusNotFound {
			t.Errorf("status %d, want 404", r.status)
		}
		if _, got := e.view.Snapshot().KeyByID(k.ID); got.RevokedAt != nil {
			t.Errorf("the other account's key was revoked")
		}
	})
}

func TestSessionEnds(t *testing.T) {
	t.Run("when its key is revoked elsewhere", func(t *testing.T) {
		e := newEnv(t, nil)
		u, _ := e.signedIn()
		if _, err := e.store.RevokeKey(testenv.Context(t), registry.Hash(e.key)); err != nil {
			t.Fatal(err)
		}
		e.waitFor("the revocation", func(s *registry.Snapshot) bool { _, k := s.KeyByID(e.keyRec.ID); return k.RevokedAt != nil })
		p := u.get("tools/email")
		if !strings.HasSuffix(p.url, "/signin?ended=1") || !strings.Contains(p.body, "Your session has ended") {
			t.Fatalf("got %d at %s:\n%s", p.status, p.url, p.body)
		}
		if p := u.get(""); !strings.HasSuffix(p.url, "/signin") {
			t.Errorf("the ended session opens %s", p.url)
		}
	})
	t.Run("when the user revokes the key of the session", func(t *testing.T) {
		e := newEnv(t, nil)
		u, home := e.signedIn()
		p := u.post("keys/"+e.keyRec.ID+"/revoke", url.Values{"csrf": {home.csrf(t)}})
		if !strings.HasSuffix(p.url, "/signin?ended=1") {
			t.Fatalf("got %d at %s", p.status, p.url)
		}
	})
	t.Run("when the user signs out, and its cookie is worthless after", func(t *testing.T) {
		e := newEnv(t, nil)
		u, home := e.signedIn()
		cookies := u.client.Jar.Cookies(mustURL(t, e.url("")))
		p := u.post("signout", url.Values{"csrf": {home.csrf(t)}})
		if !strings.HasSuffix(p.url, "/signin?signedout=1") {
			t.Fatalf("got %d at %s", p.status, p.url)
		}
		replay := e.user()
		replay.client.Jar.SetCookies(mustURL(t, e.url("")), cookies)
		if p := replay.get(""); !strings.HasSuffix(p.url, "/signin") {
			t.Errorf("the old session cookie still opens %s", p.url)
		}
	})
}

func TestPagesAreNotCachedAndFramed(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	p := u.get("keys")
	if got := p.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
	if got := p.header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") || !strings.Contains(got, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q", got)
	}
	css := u.get("static/style.css")
	if css.status != http.StatusOK || !strings.HasPrefix(css.header.Get("Content-Type"), "text/css") {
		t.Errorf("style.css: %d %s", css.status, css.header.Get("Content-Type"))
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	cfg := dashboard.DefaultConfig()
	cfg.BaseURL = "ftp://example.com"
	if _, err := dashboard.New(cfg, nil, nil, nil, nil); err == nil || !strings.Contains(err.Error(), "base-url") {
		t.Fatalf("err %v, want one naming base-url", err)
	}
}

// paramRows reads a parameter table: field -> type, required, description, format.
func paramRows(html string) map[string][]string {
	rows := map[string][]string{}
	row := regexp.MustCompile(`(?s)<tr><th scope="row"><code>(.*?)</code></th>(.*?)</tr>`)
	cell := regexp.MustCompile(`(?s)<td[^>]*>(.*?)</td>`)
	for _, m := range row.FindAllStringSubmatch(html, -1) {
		var cells []string
		for _, c := range cell.FindAllStringSubmatch(m[2], -1) {
			cells = append(cells, page{body: c[1]}.text())
		}
		rows[m[1]] = cells
	}
	return rows
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// oneOff changes a key's last character to another base62 one, so the result is
// never the key itself.
func oneOff(key string) string {
	last := "0"
	if key[len(key)-1] == '0' {
		last = "1"
	}
	return key[:len(key)-1] + last
}
