package dashboard_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge/dashboard"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// mailTool's connection needs a secret token and a user name.
var mailTool = registry.Tool{ID: "mail", Title: "Mail", Methods: []registry.Method{{Name: "send"}},
	Connection: &wire.Connection{Fields: []wire.Field{
		{Name: "token", Secret: true, Description: "The mail service's API token"},
		{Name: "user", Description: "The mailbox to send from"},
	}}}

// TestCredentialsInBrowser: in a real Chromium, the account's key holder opens a
// tool whose connection needs fields: the page shows needs_credentials and the
// fields missing, with a form whose inputs start empty (the token's a password
// input). Setting the token alone leaves the user missing; setting the user makes the
// connection ready, each field shown as set with a fingerprint, and no value
// anywhere in the page. The vault holds the values.
func TestCredentialsInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin, ok := chromium()
	if !ok {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	var vault *credentials.Vault
	e := newEnvWith(t, func(e *env, cfg *dashboard.Config) {
		keys, err := credentials.ParseKeyring(credentials.NewKeyLine())
		if err != nil {
			t.Fatal(err)
		}
		if vault, err = credentials.Open(testenv.Context(t), e.store, keys, true); err != nil {
			t.Fatal(err)
		}
		cfg.Connector = vault
		if err := e.store.PutTool(testenv.Context(t), mailTool); err != nil {
			t.Fatal(err)
		}
		if _, err := e.store.Connect(testenv.Context(t), testAccount, "mail", e.signer); err != nil {
			t.Fatal(err)
		}
	})
	e.waitFor("the mail tool and its connection", func(s *registry.Snapshot) bool { return s.Connection(testAccount, "mail") != nil })
	const token, user = "tok-canary-5f1e9a", "ops@example.com"

	b := newBrowser(t, bin, viewports[0])
	b.do("sign in and open the mail tool",
		chromedp.Navigate(e.url("")),
		chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), e.key),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css(".tool-list")),
		chromedp.Navigate(e.url("tools/mail")),
		chromedp.WaitVisible(css("#credentials")))
	if st, missing := b.text("#connection-state"), b.text("#connection-missing"); st != "needs_credentials" || missing != "token, user" {
		t.Fatalf("before any value: state %q, missing %q", st, missing)
	}
	if typ := run(b, "read the token input's type", chromedp.Evaluate[string](`document.querySelector("#field-token").type`)); typ != "password" {
		t.Errorf("the secret field's input is of type %q, want password", typ)
	}
	b.screenshot("credentials-empty")

	b.do("set the token",
		chromedp.SendKeys(css("#field-token"), token),
		chromedp.Submit(css("#field-token")),
		chromedp.WaitVisible(css(`#credentials-saved[data-fields="token"]`)))
	if missing := b.text("#connection-missing"); missing != "user" {
		t.Fatalf("with the token set, missing %q; want user", missing)
	}
	b.do("set the user",
		chromedp.SendKeys(css("#field-user"), user),
		chromedp.Submit(css("#field-user")),
		// The page being left also shows a notice: wait for the one naming the user.
		chromedp.WaitVisible(css(`#credentials-saved[data-fields="user"]`)))
	if st := b.text("#connection-state"); st != "ready" {
		t.Fatalf("with both fields set, the state is %q", st)
	}
	r, _, err := vault.Read(testenv.Context(t), testAccount, "mail")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"token", "user"} {
		state := b.text("#field-" + name + "-state")
		if !strings.HasPrefix(state, "set ") || !strings.Contains(state, r.Fields[name].Fingerprint) {
			t.Errorf("the %s field's state reads %q; want set, with the fingerprint %s", name, state, r.Fields[name].Fingerprint)
		}
	}
	page := run(b, "read the page", chromedp.Evaluate[string](`document.documentElement.outerHTML`))
	inputs := run(b, "read the inputs", chromedp.Evaluate[string](`[...document.querySelectorAll("#credentials input:not([type=hidden])")].map(i => i.value).join("")`))
	if strings.Contains(page, token) || strings.Contains(page, user) || inputs != "" {
		t.Fatalf("the page holds a value (inputs %q):\n%s", inputs, page)
	}
	b.screenshot("credentials-ready")
}
