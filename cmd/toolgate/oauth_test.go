package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/testidp"
	"github.com/toolgate/toolgate/workers"
)

// TestOAuthConnectionFromTheCLI: on a secured bus, a tool built with the SDK
// declares an OAuth provider (zitadel's OpenID provider); the deployment sets the
// client's secret and an administrator gets a connect URL with the CLI; once the
// account holder signs in there, the tool's worker gets the account's access token
// (the provider answers for it), and neither the client secret nor the token is on
// the bus or in the bucket in plaintext.
func TestOAuthConnectionFromTheCLI(t *testing.T) {
	const secret = "client-secret-canary-41c9"
	s := newSecureCredentialsStack(t)
	idp := testidp.Start(t, testidp.Options{ClientID: "toolgate", ClientSecret: secret, RedirectURI: s.url + edge.OAuthCallbackPath})

	nc, creds := s.workerConn(t, "calendar")
	sealKey, err := workers.SealKeyFromCreds(creds, "calendar")
	if err != nil {
		t.Fatal(err)
	}
	tokens := make(chan string, 1)
	w := workers.New(nc, workers.Tool{ID: "calendar", OAuth: &workers.OAuthProvider{Issuer: idp.Issuer, ClientID: "toolgate",
		Scopes: []string{"openid", "offline_access"}}}, workers.WithSealKey(sealKey), workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Func("whoami", "Who the account is at the provider", func(ctx context.Context, c *workers.Call, _ struct{}) (string, error) {
		values, err := c.Credentials()
		if err != nil {
			return "", err
		}
		select {
		case tokens <- values["access_token"]:
		default:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, idp.Issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+values["access_token"])
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		var info struct{ Sub string }
		if err := json.NewDecoder(res.Body).Decode(&info); err != nil || res.StatusCode != http.StatusOK {
			return "", fmt.Errorf("the provider refused the token: %s", res.Status)
		}
		return info.Sub, nil
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	admin(t, s.url, "accounts", "create", "acme")
	admin(t, s.url, "tools", "connect", "acme", "calendar")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, s.url, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "calendar online", func() bool {
		status, body := call(t, http.MethodGet, s.url+"/get-tools", key.Secret, "")
		return status == http.StatusOK && strings.Contains(body, `"status":"online"`)
	})
	if status, body := call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", key.Secret, `{}`); status != http.StatusConflict ||
		!strings.Contains(body, `"missing":["oauth"]`) || !strings.Contains(body, `"connect_url":"`+edge.ConnectURL(s.url, "calendar")) {
		t.Fatalf("a call before connecting: %d %s", status, body)
	}

	// Over MCP, the same refusal is the tool's error, naming where to connect.
	_, toolBody := call(t, http.MethodGet, s.url+"/tools/calendar", key.Secret, "")
	var info edge.ToolInfo
	if err := json.Unmarshal([]byte(toolBody), &info); err != nil || info.MCPURL == "" || info.Connection == nil || info.Connection.ConnectURL == "" {
		t.Fatalf("the tool: %s", toolBody)
	}
	mctx, mcancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer mcancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(mctx, &mcp.StreamableClientTransport{Endpoint: info.MCPURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(mctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.Content); !res.IsError || !strings.Contains(string(b), info.Connection.ConnectURL) {
		t.Fatalf("an MCP call before connecting: %s; want a tool error naming %s", b, info.Connection.ConnectURL)
	}

	f := filepath.Join(t.TempDir(), "client.json")
	if err := os.WriteFile(f, []byte(`{"client_secret":"`+secret+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	admin(t, s.url, "tools", "oauth-client", "set", "calendar", "--from-file", f)
	var auth edge.Authorization
	if err := json.Unmarshal([]byte(admin(t, s.url, "tools", "authorize", "acme", "calendar")), &auth); err != nil {
		t.Fatal(err)
	}
	if status, body, err := idp.SignIn(auth.ConnectURL); err != nil || status != http.StatusOK || !strings.Contains(body, "connected") {
		t.Fatalf("sign-in at the provider: %d %s %v", status, body, err)
	}
	status, body := call(t, http.MethodPost, s.url+"/tool-call/calendar/whoami", key.Secret, `{}`)
	if status != http.StatusOK || body == `""` {
		t.Fatalf("a call once connected: %d %s; want the provider's subject", status, body)
	}
	token := <-tokens
	if token == "" {
		t.Fatal("the worker got no access token")
	}
	s.assertNowhere(t, secret)
	s.assertNowhere(t, token)
}
