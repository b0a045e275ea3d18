package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/toolgate/toolgate/registry"
)

// TestInstallTabMintsAKey: in a browser, the install tab's button makes a key for
// one client (scoped to the tool, named for the client) and shows its command with
// the key once; the key authenticates, is on the keys page, and is revoked there.
func TestInstallTabMintsAKey(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are slow; they run without -short")
	}
	bin, ok := chromium()
	if !ok {
		t.Skip("no Chromium found (set TOOLGATE_CHROMIUM or install Debian's chromium: `make test-deps`)")
	}
	e := newEnv(t, nil)
	b := newBrowser(t, bin, viewports[0])
	b.do("sign in",
		chromedp.Navigate(e.url("")),
		chromedp.WaitVisible(css("#key")),
		chromedp.SetValue(css("#key"), e.key),
		chromedp.Submit(css("#key")),
		chromedp.WaitVisible(css(".tool-list")))
	b.do("open the email tool's install tab",
		chromedp.Navigate(e.url("tools/email/install")),
		chromedp.WaitVisible(css("#mint-claude-code")))
	if cmd := b.text("#install-claude-code"); !strings.Contains(cmd, "<API_KEY>") {
		t.Fatalf("before minting the command reads %q", cmd)
	}
	b.do("make a key for Claude Code",
		chromedp.Click(css("#mint-claude-code")),
		chromedp.WaitVisible(css("#minted")))
	b.screenshot("install-key-minted")
	cmd := b.text("#install-claude-code")
	fields := strings.Fields(cmd)
	if len(fields) < 4 || fields[0] != "toolgate" || fields[1] != "install" || fields[2] != "email" || strings.Contains(cmd, "<API_KEY>") {
		t.Fatalf("the minted command reads %q", cmd)
	}
	secret := strings.Trim(fields[3], "'")
	p, err := e.view.Snapshot().AuthenticateKey(secret, time.Now())
	if err != nil {
		t.Fatalf("the key in the command does not authenticate: %v", err)
	}
	if p.Key.Name != "Claude Code · email" || len(p.Key.Scopes) != 1 || p.Key.Scopes[0] != "email" {
		t.Fatalf("the minted key is %+v: want one named for the client, scoped to email", p.Key)
	}
	if other := b.text("#install-cursor"); !strings.Contains(other, "<API_KEY>") {
		t.Fatalf("another client's command got the key: %q", other)
	}
	b.do("reload the tab", chromedp.Navigate(e.url("tools/email/install")), chromedp.WaitVisible(css("#mint-claude-code")))
	if again := b.text("#install-claude-code"); strings.Contains(again, secret) {
		t.Fatal("the key is shown a second time")
	}
	b.do("revoke it on the keys page",
		chromedp.Navigate(e.url("keys")),
		chromedp.WaitVisible(css("#key-"+p.Key.ID)),
		chromedp.Click(css("#key-"+p.Key.ID+" button")),
		chromedp.WaitVisible(css(".notice")))
	e.waitFor("the key to be revoked", func(s *registry.Snapshot) bool {
		_, err := s.AuthenticateKey(secret, time.Now())
		return err != nil
	})
}

// TestInstallKeysNeedAKeyThatMakesKeys: a key limited to some tools, which may not
// make keys, sees no button and is refused the mint.
func TestInstallKeysNeedAKeyThatMakesKeys(t *testing.T) {
	e := newEnv(t, nil)
	_, scoped, err := e.store.CreateKey(t.Context(), registry.NewKeyRequest{Account: testAccount, Name: "email only", Scopes: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the scoped key", func(s *registry.Snapshot) bool { return len(s.Keys(testAccount)) == 2 })
	u := e.user()
	u.signIn(scoped)
	tab := u.get("tools/email/install")
	if tab.status != 200 || strings.Contains(tab.body, `id="mint-`) {
		t.Fatalf("a scoped key's install tab: %d, with a mint button: %v", tab.status, strings.Contains(tab.body, `id="mint-`))
	}
	if p := u.post("tools/email/install/claude-code", map[string][]string{"csrf": {tab.csrf(t)}}); p.status != 403 {
		t.Fatalf("a scoped key minted: %d", p.status)
	}
	if n := len(e.view.Snapshot().Keys(testAccount)); n != 2 {
		t.Fatalf("%d keys after a refused mint, want 2", n)
	}
}
