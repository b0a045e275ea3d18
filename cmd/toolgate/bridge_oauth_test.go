package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
)

// oauthServer is a remote MCP server that requires OAuth: a go-sdk server behind the
// go-sdk's bearer check, whose authorization server is idp. It checks each token at
// the provider (its userinfo endpoint answers only for a token it issued and has not
// revoked) and its tool whoami answers with the token's subject. refuse makes it
// refuse the tokens of a subject (401), scope makes it require a scope no token has
// (403).
type oauthServer struct {
	url    string
	refuse sync.Map // subject -> true
	scope  atomic.Bool
	mu     sync.Mutex
	tokens map[string]string // subject -> the last token it brought
}

func startOAuthServer(t *testing.T, idp *testidp.Provider) *oauthServer {
	t.Helper()
	o := &oauthServer{tokens: map[string]string{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	o.url = srv.URL + "/mcp"
	server := mcp.NewServer(&mcp.Implementation{Name: "calendar", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "The subject of the caller's token"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	meta := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	plain := auth.RequireBearerToken(o.verifier(idp), &auth.RequireBearerTokenOptions{ResourceMetadataURL: meta})(handler)
	strict := auth.RequireBearerToken(o.verifier(idp), &auth.RequireBearerTokenOptions{ResourceMetadataURL: meta,
		Scopes: []string{"openid", "calendar.write"}})(handler)
	mux.Handle("/mcp", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o.scope.Load() {
			strict.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	}))
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: o.url, AuthorizationServers: []string{idp.Issuer}, ScopesSupported: []string{"openid", "offline_access"}}))
	return o
}

// verifier asks the provider whose token it is.
func (o *oauthServer) verifier(idp *testidp.Provider) auth.TokenVerifier {
	return func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, idp.Issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		var info struct{ Sub string }
		if res.StatusCode != http.StatusOK || json.NewDecoder(res.Body).Decode(&info) != nil || info.Sub == "" {
			return nil, fmt.Errorf("%w: the provider answers %s", auth.ErrInvalidToken, res.Status)
		}
		if _, refused := o.refuse.Load(info.Sub); refused {
			return nil, fmt.Errorf("%w: refused", auth.ErrInvalidToken)
		}
		o.mu.Lock()
		o.tokens[info.Sub] = token
		o.mu.Unlock()
		return &auth.TokenInfo{UserID: info.Sub, Scopes: []string{"openid"}, Expiration: time.Now().Add(time.Minute)}, nil
	}
}

// TestBridgeOAuth: `toolgate worker mcp --url U --oauth` deploys a remote MCP server
// that requires OAuth (the go-sdk's bearer check, zitadel's OpenID provider as its
// authorization server). The bridge finds the provider and declares it as the tool's
// connection; two accounts connect, as two users of the provider; the edge that
// completes a connection has the server's tools listed with the account's token,
// which makes them that account's methods (one that has not connected sees none);
// every account's
// calls (REST and MCP) reach the server with that account's own token (the server
// answers with its subject). An account that has not connected gets
// connection_required with the connect URL; a token the server refuses (401) gets
// the same; a 403 for a scope makes the next authorization ask for it.
func TestBridgeOAuth(t *testing.T) {
	const secret = "client-secret-canary-7d2e"
	s := newSecureCredentialsStack(t)
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: secret, RedirectURI: s.url + edge.OAuthCallbackPath})
	upstream := startOAuthServer(t, idp)
	creds, _ := s.sec.WorkerCreds(t, "calendar")
	startBridge(t, s.natsURL, "calendar", "--nats-creds", creds, "--url", upstream.url, "--oauth",
		"--base-url", s.url, "--oauth-client-id", "toolgate")

	keys := connectAccounts(t, s.url, "calendar", "acme", "globex", "initech")
	var tool edge.ToolInfo
	testenv.Eventually(t, 90*time.Second, "the bridged tool is online", func() bool {
		status, body := call(t, http.MethodGet, s.url+"/tools/calendar", keys["acme"], "")
		return status == http.StatusOK && json.Unmarshal([]byte(body), &tool) == nil && tool.Status == edge.StatusOnline
	})
	if tool.Connection == nil || tool.Connection.ConnectURL != edge.ConnectURL(s.url, "calendar") || len(tool.Methods) != 0 {
		t.Fatalf("the tool before any account connected: %+v, want no methods and a connect URL", tool)
	}

	f := filepath.Join(t.TempDir(), "client.json")
	if err := os.WriteFile(f, []byte(`{"client_secret":"`+secret+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	admin(t, s.url, "tools", "oauth-client", "set", "calendar", "--from-file", f)
	for account, user := range map[string]string{"acme": idp.Username(), "globex": testidp.SecondUsername} {
		var authz edge.Authorization
		if err := json.Unmarshal([]byte(admin(t, s.url, "tools", "authorize", account, "calendar")), &authz); err != nil {
			t.Fatal(err)
		}
		if status, body, err := idp.SignInAs(authz.ConnectURL, user); err != nil || status != http.StatusOK || !strings.Contains(body, "connected") {
			t.Fatalf("%s's sign-in at the provider: %d %s %v", account, status, body, err)
		}
	}

	// The edge that completed a connection asked the tool for its tools with the
	// account's token: they are that account's methods, and no one else's.
	for _, account := range []string{"acme", "globex"} {
		testenv.Eventually(t, 30*time.Second, "the server's tools are "+account+"'s methods", func() bool {
			_, body := call(t, http.MethodGet, s.url+"/get-tools", keys[account], "")
			return strings.Contains(body, `"whoami"`)
		})
	}
	if _, body := call(t, http.MethodGet, s.url+"/get-tools", keys["initech"], ""); strings.Contains(body, `"whoami"`) || !strings.Contains(body, `"needs_credentials"`) {
		t.Fatalf("initech, never connected, lists %s; want no method and needs_credentials", body)
	}
	if got := mcpWhoami(t, s.url, keys["acme"]); got != "id1" {
		t.Errorf("acme over MCP is %q, want the provider's subject id1", got)
	}
	for account, subject := range map[string]string{"acme": "id1", "globex": "id2"} {
		for _, path := range []string{"/tool-call/calendar/whoami", "/tools/calendar/whoami"} {
			if status, body := call(t, http.MethodPost, s.url+path, keys[account], `{}`); status != http.StatusOK || !strings.Contains(body, `"`+subject+`"`) {
				t.Errorf("%s %s: %d %s, want the subject %s", account, path, status, body, subject)
			}
		}
	}
	if got := mcpWhoami(t, s.url, keys["globex"]); got != "id2" {
		t.Errorf("globex over MCP is %q, want id2", got)
	}

	connectURL := `"connect_url":"` + edge.ConnectURL(s.url, "calendar") + `"`
	status, body := call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", keys["initech"], `{}`)
	if status != http.StatusConflict || !strings.Contains(body, `"code":"connection_required"`) || !strings.Contains(body, connectURL) {
		t.Fatalf("initech, never connected: %d %s", status, body)
	}

	// The server refuses globex's token (401): globex connects again.
	upstream.refuse.Store("id2", true)
	status, body = call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", keys["globex"], `{}`)
	if status != http.StatusConflict || !strings.Contains(body, `"code":"connection_required"`) || !strings.Contains(body, connectURL) {
		t.Fatalf("globex, its token refused: %d %s", status, body)
	}
	if status, body := call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", keys["acme"], `{}`); status != http.StatusOK || !strings.Contains(body, `"id1"`) {
		t.Fatalf("acme, after globex's refusal: %d %s", status, body)
	}

	// The server requires a scope acme's token lacks (403): the next authorization
	// asks for it.
	upstream.scope.Store(true)
	status, body = call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", keys["acme"], `{}`)
	if status != http.StatusConflict || !strings.Contains(body, `"code":"connection_required"`) {
		t.Fatalf("acme, its scope short: %d %s", status, body)
	}
	testenv.Eventually(t, 30*time.Second, "the authorization asks for the scope the server requires", func() bool {
		var authz edge.Authorization
		return json.Unmarshal([]byte(admin(t, s.url, "tools", "authorize", "acme", "calendar")), &authz) == nil &&
			strings.Contains(authz.ConnectURL, "calendar.write")
	})

	upstream.mu.Lock()
	tokens := []string{upstream.tokens["id1"], upstream.tokens["id2"]}
	upstream.mu.Unlock()
	for _, token := range tokens {
		if token == "" {
			t.Fatal("the server saw no token of a subject")
		}
		s.assertNowhere(t, token)
	}
}

// mcpWhoami lists the tools over MCP through the link key's account has, and calls
// whoami; it returns the answer's text.
func mcpWhoami(t *testing.T, edgeURL, key string) string {
	t.Helper()
	ctx, cs := mcpSession(t, edgeURL, key, "calendar")
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 1 || list.Tools[0].Name != "whoami" {
		t.Fatalf("tools/list over MCP: %+v %v", list, err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError {
		t.Fatalf("whoami over MCP: %s", testenv.ToolText(res))
	}
	return testenv.ToolText(res)
}

// connectAccounts creates the accounts, connects each to tool and makes a key of
// each; it returns the keys' secrets by account.
func connectAccounts(t *testing.T, url, tool string, accounts ...string) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for _, account := range accounts {
		admin(t, url, "accounts", "create", account)
		admin(t, url, "tools", "connect", account, tool)
		var key edge.NewKey
		if err := json.Unmarshal([]byte(admin(t, url, "keys", "create", account)), &key); err != nil {
			t.Fatal(err)
		}
		keys[account] = key.Secret
	}
	return keys
}
