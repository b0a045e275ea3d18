package dashboard_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/registry"
)

// TestAccountChoosesSignInOnLinks: the keys page sets and clears the account's
// require_sign_in, which the registry then holds; a key limited to some tools may
// not change it.
func TestAccountChoosesSignInOnLinks(t *testing.T) {
	e := newEnv(t, nil)
	u, _ := e.signedIn()
	keys := u.get("keys")
	if !strings.Contains(keys.body, `id="require-sign-in"`) {
		t.Fatalf("the keys page has no sign-in setting:\n%s", keys.body)
	}
	p := u.post("sign-in-setting", url.Values{"csrf": {keys.csrf(t)}, "require_sign_in": {"on"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, `id="require-sign-in" name="require_sign_in" checked`) {
		t.Fatalf("after ticking: %d\n%s", p.status, p.body)
	}
	e.waitFor("the account to require sign-in", func(s *registry.Snapshot) bool { return s.Account(testAccount).RequireSignIn })
	if tab := u.get("tools/email/sse"); !strings.Contains(tab.body, `id="signin-clients"`) || !strings.Contains(tab.body, "<strong>require sign-in</strong>") ||
		!strings.Contains(tab.body, "claude mcp add --transport http email") {
		t.Fatalf("the link tab does not say the links require sign-in, nor how clients add them:\n%s", tab.body)
	}
	p = u.post("sign-in-setting", url.Values{"csrf": {p.csrf(t)}})
	if p.status != http.StatusOK || strings.Contains(p.body, `name="require_sign_in" checked`) {
		t.Fatalf("after clearing: %d\n%s", p.status, p.body)
	}
	e.waitFor("the account not to require sign-in", func(s *registry.Snapshot) bool { return !s.Account(testAccount).RequireSignIn })

	_, scoped, err := e.store.CreateKey(t.Context(), registry.NewKeyRequest{Account: testAccount, Name: "email only", Scopes: []string{"email"}})
	if err != nil {
		t.Fatal(err)
	}
	e.waitFor("the scoped key", func(s *registry.Snapshot) bool { return len(s.Keys(testAccount)) == 2 })
	v := e.user()
	v.signIn(scoped)
	form := v.get("keys")
	if p := v.post("sign-in-setting", url.Values{"csrf": {form.csrf(t)}, "require_sign_in": {"on"}}); p.status != http.StatusForbidden {
		t.Fatalf("a scoped key changed the setting: %d", p.status)
	}
}
