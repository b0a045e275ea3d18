package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// TestTheTypeScriptClientSignsIn: the TypeScript SDK's own OAuth flow, from nothing
// but a link that requires sign-in: it discovers, registers (by its client ID
// metadata document, served over TLS; then dynamically), sends the user to sign in,
// which headless Chromium does on the dashboard's sign-in and consent pages (with the
// account's key; then as a user of the account), lists and calls, and refreshes its
// token once it expired. The grant names the user who signed in.
func TestTheTypeScriptClientSignsIn(t *testing.T) {
	app := newClientApp(t)
	doc := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"client_id": "https://" + r.Host + "/client.json", "client_name": "TypeScript SDK client",
			"redirect_uris": []string{app.url + "/callback"}, "token_endpoint_auth_method": "none",
			"grant_types": []string{"authorization_code", "refresh_token"}, "response_types": []string{"code"},
		})
	}))
	t.Cleanup(doc.Close)
	const ttl = 3 * time.Second
	e := newEnv(t, withMCP(), withDashboard(), withTokenTTL(ttl), withDocumentClient(doc.Client()))
	key := e.account("acme", registry.Limits{})
	e.serve(registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{{Name: "echo"}}}, func(method string, m *nats.Msg) { echo(method, m) })
	link := e.url + "/mcp/" + e.signer.Token("acme", "kit", e.connect("acme", "kit").LinkNonce)
	e.do(http.MethodPatch, "/admin/accounts/acme", `{"require_sign_in":true}`, "Authorization", "Bearer "+e.adminKey).expectOK(t)
	ana := addUser(t, e, "acme", `{"name":"ana"}`)
	testenv.WaitFor(t, "acme requires sign-in and has ana", func() bool {
		return e.view.Snapshot().Account("acme").RequireSignIn && e.view.Snapshot().User("acme", "ana") != nil
	})

	for name, metadataURL := range map[string]string{"client ID metadata document": doc.URL + "/client.json", "dynamic registration": ""} {
		t.Run(name, func(t *testing.T) {
			browser := testenv.Chromium(t)
			// With its key on the first run; as ana on the second.
			signIn := chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#key")), chromedp.SetValue(chromedp.CSS("#key"), key), chromedp.Submit(chromedp.CSS("#key")))
			user := ""
			if metadataURL == "" {
				user = "ana"
				signIn = chromedp.Steps(chromedp.WaitVisible(chromedp.CSS("#secret")), chromedp.SetValue(chromedp.CSS("#account"), "acme"),
					chromedp.SetValue(chromedp.CSS("#user"), "ana"), chromedp.SetValue(chromedp.CSS("#secret"), ana.Secret), chromedp.Submit(chromedp.CSS("#secret")))
			}
			authorize := func(u string) string {
				ctx, cancel := context.WithTimeout(browser, testenv.Patience)
				defer cancel()
				if _, err := chromedp.Run(ctx, chromedp.Steps(chromedp.Navigate(u), signIn, chromedp.WaitVisible(chromedp.CSS("#consent-allow")))); err != nil {
					t.Errorf("sign in: %v", err)
					return ""
				}
				names, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#consent-tool")))
				if err != nil || names != "kit" {
					t.Errorf("the consent page names tool %q (%v)", names, err)
				}
				if _, err := chromedp.Run(ctx, chromedp.Click(chromedp.CSS("#consent-allow"))); err != nil {
					t.Errorf("allow: %v", err)
					return ""
				}
				select {
				case got := <-app.responses:
					if got.Get("iss") != e.url {
						t.Errorf("authorization response %v: no iss", got)
					}
					return got.Get("code")
				case <-ctx.Done():
					t.Error("the browser brought no code back")
					return ""
				}
			}
			c := tsclient.OAuth(t, link, metadataURL, app.url+"/callback", authorize)
			ctx := testenv.Context(t)
			tools, err := c.Do(ctx, map[string]any{"op": "tools"})
			if err != nil || !strings.Contains(string(tools), "echo") {
				t.Fatalf("tools: %s %v", tools, err)
			}
			if got, err := c.Do(ctx, map[string]any{"op": "call", "name": "echo", "args": map[string]any{"x": 1}}); err != nil || strings.Contains(string(got), `"isError":true`) {
				t.Fatalf("call: %s %v", got, err)
			}
			time.Sleep(ttl + time.Second) // the access token expires
			if got, err := c.Do(ctx, map[string]any{"op": "call", "name": "echo", "args": map[string]any{}}); err != nil || strings.Contains(string(got), `"isError":true`) {
				t.Fatalf("call after the token expired: %s %v\n%s", got, err, c.Stderr())
			}
			tokens := 0
			for len(c.Events) > 0 {
				if ev := <-c.Events; ev.Event == "tokens" {
					tokens++
				}
			}
			if tokens < 2 {
				t.Fatalf("the client got tokens %d times: want the code's and a refresh's", tokens)
			}
			grants, err := e.authServer.Grants(ctx, "acme")
			if err != nil || len(grants) == 0 {
				t.Fatalf("grants: %v %v", grants, err)
			}
			i := slices.IndexFunc(grants, func(g oauth.Grant) bool { return g.User == user })
			if i < 0 {
				t.Fatalf("grants %+v: none signed in by %q", grants, user)
			}
			if client := grants[i].Client; (metadataURL != "" && client != metadataURL) || (metadataURL == "" && !strings.HasPrefix(client, "tgc_")) {
				t.Fatalf("the grant is the client %q's: want it registered as %q", client, metadataURL)
			}
		})
	}
}
