package edge_test

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/registry"
)

// TestOAuthConnectInBrowser: in headless Chromium, an account holder signs in to the
// dashboard, presses the tool's Connect button, signs in at the provider (zitadel's
// OpenID provider, its own login page) and comes back to the tool's page, connected;
// the tool's calls then carry the account's access token.
func TestOAuthConnectInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin := os.Getenv("TOOLGATE_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if bin == "" {
			bin, _ = exec.LookPath(name)
		}
	}
	if bin == "" {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	e := newEnv(t, withCredentials(testKeyring(t)), withDashboard())
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: "s3cret", RedirectURI: e.url + edge.OAuthCallbackPath})
	if err := e.vault.EnableOAuth(testenv.Context(t), credentials.DefaultOAuthConfig(e.url+edge.OAuthCallbackPath), false); err != nil {
		t.Fatal(err)
	}
	toolKey, _ := nkeys.CreateCurveKeys()
	tool := oauthTool(toolKey, idp.Issuer)
	serveAsAccount(e, tool, toolKey, idp)
	key := e.accountKey("acme", registry.Limits{}, nil)
	e.connect("acme", "calendar")
	if r := e.admin(http.MethodPut, "/tools/calendar/oauth-client", `{"client_secret":"s3cret"}`); r.status != http.StatusNoContent {
		t.Fatalf("PUT oauth-client: %d %s", r.status, r.body)
	}

	ctx, cancel := chromedp.NewExecAllocator(context.Background(), chromedp.ExecPath(bin), chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-dev-shm-usage", true))
	t.Cleanup(cancel)
	ctx, cancel = chromedp.NewContext(ctx)
	t.Cleanup(cancel)
	// The first action starts the browser, which lives as long as ctx.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, testenv.Patience)
		defer cancel()
		if _, err := chromedp.Run(c, chromedp.Steps(actions...)); err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("%s (at %s): %v", what, loc, err)
		}
	}
	read := func(a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	run("sign in to the dashboard",
		chromedp.Navigate(e.url+edge.DashboardPath+"signin"),
		chromedp.SendKeys(css("#key"), key),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css(`a[href$="/tools/calendar"]`)),
	)
	run("open the tool's page", chromedp.Navigate(e.url+edge.DashboardPath+"tools/calendar"), chromedp.WaitVisible(css("#connect")))
	if got := read(chromedp.Text(css("#authorization"))); got != "not connected" {
		t.Fatalf("before connecting, the page says %q", got)
	}
	run("press Connect",
		chromedp.Click(css("#connect")),
		chromedp.WaitVisible(css("#username")),
	)
	if location := read(chromedp.Location()); !strings.HasPrefix(location, idp.Issuer) {
		t.Fatalf("Connect led to %s, not the provider", location)
	}
	run("sign in at the provider",
		chromedp.SendKeys(css("#username"), idp.Username()),
		chromedp.SendKeys(css("#password"), testidp.Password),
		chromedp.Submit(css("#password")),
		chromedp.WaitVisible(css(`p.notice[role="status"]`)),
	)
	notice, location := read(chromedp.Text(css(`p.notice[role="status"]`))), read(chromedp.Location())
	if got := read(chromedp.Text(css("#authorization"))); !strings.HasPrefix(location, e.url+edge.DashboardPath+"tools/calendar") ||
		!strings.Contains(notice, "Connected") || got != "connected" {
		t.Fatalf("back at %s with %q, the state %q; want the tool's page, connected", location, notice, got)
	}
	got := decode[whoami](t, e.call(key, "calendar", "whoami", "{}"))
	if got.Sub == "" {
		t.Fatalf("call after connecting: %+v; want the provider's subject", got)
	}
	if st := decode[edge.ToolInfo](t, e.do(http.MethodGet, "/tools/calendar", "", "SERVICE_API_KEY", key)).Connection; st.State != edge.ConnectionReady {
		t.Fatalf("after connecting: %+v", st)
	}
}
