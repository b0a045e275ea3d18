package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// identityOf reads env_identity's answer out of a tool call's body (a bridged
// server's CallToolResult).
func identityOf(t *testing.T, body string) mcpfixture.Identity {
	t.Helper()
	var res struct {
		StructuredContent mcpfixture.Identity `json:"structuredContent"`
		IsError           bool                `json:"isError"`
	}
	if err := json.Unmarshal([]byte(body), &res); err != nil || res.IsError {
		t.Fatalf("env_identity answered %s (%v)", body, err)
	}
	return res.StructuredContent
}

// TestBridgeActsAsEachAccount: one bridged stdio server, whose environment's token
// says whom it acts as (`--env FIXTURE_TOKEN={token}`), acts for two accounts as two
// identities, over the HTTP tool call, the direct tool API and MCP; an account that
// set no token sees needs_credentials and its calls get connection_required naming
// the field; no token is found in plaintext on the bus or in the credentials bucket.
func TestBridgeActsAsEachAccount(t *testing.T) {
	const tokenA, tokenB = "canary-acme-token-5b1e", "canary-globex-token-9c7d"
	s := newSecureCredentialsStack(t)
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	creds, _ := s.sec.WorkerCreds(t, "fixture")
	health := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	startBridge(t, s.natsURL, "fixture", "--nats-creds", creds, "--sessions", "1", "--health-listen", health,
		"--env", mcpfixture.EnvTokenVar+"={token}", "--account-idle", "1m", "--", os.Args[0], "-test.run=^$")

	keys := connectAccounts(t, s.url, "fixture", "acme", "globex", "initech")
	var tool edge.ToolInfo
	testenv.Eventually(t, 90*time.Second, "the bridged tool is online", func() bool {
		status, body := call(t, http.MethodGet, s.url+"/tools/fixture", keys["initech"], "")
		return status == http.StatusOK && json.Unmarshal([]byte(body), &tool) == nil && tool.Status == edge.StatusOnline
	})
	if tool.Connection == nil || tool.Connection.State != edge.ConnectionNeedsCredentials || strings.Join(tool.Connection.Missing, ",") != "token" {
		t.Fatalf("initech's connection: %+v, want needs_credentials missing token", tool.Connection)
	}
	s.setCredentials(t, "acme", "fixture", `{"token":"`+tokenA+`"}`)
	s.setCredentials(t, "globex", "fixture", `{"token":"`+tokenB+`"}`)

	want := map[string]string{"acme": mcpfixture.IdentityOf(tokenA, 0).Identity, "globex": mcpfixture.IdentityOf(tokenB, 0).Identity}
	for account, identity := range want {
		status, body := call(t, http.MethodGet, s.url+"/get-tools", keys[account], "")
		var tools edge.ToolList
		if err := json.Unmarshal([]byte(body), &tools); err != nil || status != http.StatusOK || len(tools.Tools) != 1 ||
			tools.Tools[0].Connection.State != edge.ConnectionReady || len(tools.Tools[0].Connection.Missing) != 0 {
			t.Fatalf("%s's get-tools: %d %s", account, status, body)
		}
		for _, path := range []string{"/tool-call/fixture/env_identity", "/tools/fixture/env_identity"} {
			status, body := call(t, http.MethodPost, s.url+path, keys[account], `{}`)
			if status != http.StatusOK {
				t.Fatalf("%s %s: %d %s", account, path, status, body)
			}
			if got := identityOf(t, body); got.Identity != identity {
				t.Errorf("%s %s acts as %q, want %q", account, path, got.Identity, identity)
			}
		}
		if got := mcpIdentity(t, s.url, keys[account]); got.Identity != identity {
			t.Errorf("%s over MCP acts as %q, want %q", account, got.Identity, identity)
		}
	}

	status, body := call(t, http.MethodPost, s.url+"/tool-call/fixture/env_identity", keys["initech"], `{}`)
	if status != http.StatusConflict || !strings.Contains(body, `"code":"connection_required"`) || !strings.Contains(body, `"missing":["token"]`) {
		t.Fatalf("initech's call: %d %s", status, body)
	}
	if res := mcpCall(t, s.url, keys["initech"]); !res.IsError || !strings.Contains(testenv.ToolText(res), "token") {
		t.Fatalf("initech's MCP call: %+v, want an isError result naming the token", res)
	}
	if got := metric(t, "http://"+health+"/metrics", "toolgate_bridge_account_sessions{tool=\"fixture\"}"); got != "2" {
		t.Errorf("account sessions metric %q, want 2 (acme's and globex's)", got)
	}
	s.assertNowhere(t, tokenA, "http://"+health+"/metrics")
	s.assertNowhere(t, tokenB, "http://"+health+"/metrics")
}

// mcpCall calls env_identity over MCP through the link get-tools gives key.
func mcpCall(t *testing.T, edgeURL, key string) *mcp.CallToolResult {
	t.Helper()
	ctx, cs := mcpSession(t, edgeURL, key, "fixture")
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpfixture.EnvHashToolName, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mcpIdentity is whom env_identity acts as over MCP, for key's account.
func mcpIdentity(t *testing.T, edgeURL, key string) mcpfixture.Identity {
	t.Helper()
	res := mcpCall(t, edgeURL, key)
	b, _ := json.Marshal(res)
	return identityOf(t, string(b))
}

// metric is the value of the sample named series on a /metrics page, "" if absent.
func metric(t *testing.T, url, series string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	return fmt.Sprintf("(none in %d bytes)", len(b))
}

// mcpSession is an MCP client's session through the link key's account has to tool,
// with a context that ends with the test's patience.
func mcpSession(t *testing.T, edgeURL, key, tool string) (context.Context, *mcp.ClientSession) {
	t.Helper()
	_, body := call(t, http.MethodGet, edgeURL+"/tools/"+tool, key, "")
	var info edge.ToolInfo
	if err := json.Unmarshal([]byte(body), &info); err != nil || info.MCPURL == "" {
		t.Fatalf("the tool's link: %s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	t.Cleanup(cancel)
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1.0.0"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: info.MCPURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ctx, cs
}
