package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestServerErrorsThroughTheLink: a server's JSON-RPC error reaches a client through
// the bridge and the link as the same JSON-RPC error (code, message, data) the client
// gets calling the server directly, not as an isError result: for tools/call,
// prompts/get and resources/read, at 2025-11-25 (a session) and at 2026-07-28 (no
// session, where the HTTP status is the one that revision gives the code), for a
// stdio server and a remote one. An HTTP caller gets it as the tool's error.
func TestServerErrorsThroughTheLink(t *testing.T) {
	fx := bridgedFixtures(t, "errs")
	dev, stdioLink, remoteLink, modern := fx.dev, fx.stdioLink, fx.remoteLink, fx.modern
	// The SDK serves sessions only before 2026-07-28: the server called directly at
	// 2025-11-25.
	sessions := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx.server }, nil))
	t.Cleanup(sessions.Close)

	ctx := testenv.Context(t)
	connect := func(t *testing.T, url, revision string) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "errors-test", Version: "1"}, nil).Connect(ctx,
			&mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: revision})
		if err != nil {
			t.Fatalf("connect to %s at %s: %v", url, revision, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != revision {
			t.Fatalf("the client speaks %s, want %s", v, revision)
		}
		return cs
	}
	rpcErr := func(t *testing.T, what string, err error) *jsonrpc.Error {
		t.Helper()
		var e *jsonrpc.Error
		if !errors.As(err, &e) {
			t.Fatalf("%s: got %v, want a JSON-RPC error", what, err)
		}
		return e
	}
	same := func(t *testing.T, what string, direct, linked *jsonrpc.Error) {
		t.Helper()
		if direct.Code != linked.Code || direct.Message != linked.Message || !sameJSON(direct.Data, linked.Data) {
			t.Errorf("%s: through the link %d %q %s, directly %d %q %s", what,
				linked.Code, linked.Message, linked.Data, direct.Code, direct.Message, direct.Data)
		}
	}
	type request struct {
		name string
		do   func(cs *mcp.ClientSession) error
	}
	missingCapability := request{"tools/call of a tool that needs sampling", func(cs *mcp.ClientSession) error {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpfixture.MissingCapabilityToolName, Arguments: map[string]any{}})
		if err == nil {
			b, _ := json.Marshal(res)
			return errors.New("a result: " + string(b))
		}
		return err
	}}
	unknownPrompt := request{"prompts/get of an unknown prompt", func(cs *mcp.ClientSession) error {
		_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "no_such_prompt"})
		return err
	}}
	unknownResource := request{"resources/read of an unknown resource", func(cs *mcp.ClientSession) error {
		_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "test://no-such-resource"})
		return err
	}}
	for _, c := range []struct {
		name, link, direct, revision string
		requests                     []request
	}{
		// A remote server that keeps no session serves a 2025-11-25 client on the
		// bridge's shared sessions, which declare every capability: its tool does
		// not need what this client lacks there.
		{"stdio at 2025-11-25", stdioLink, sessions.URL, sessionRevision, []request{missingCapability, unknownPrompt, unknownResource}},
		{"stdio at 2026-07-28", stdioLink, modern.URL, "2026-07-28", []request{missingCapability, unknownPrompt, unknownResource}},
		{"remote at 2025-11-25", remoteLink, sessions.URL, sessionRevision, []request{unknownPrompt, unknownResource}},
		{"remote at 2026-07-28", remoteLink, modern.URL, "2026-07-28", []request{missingCapability, unknownPrompt, unknownResource}},
	} {
		t.Run(c.name, func(t *testing.T) {
			direct, linked := connect(t, c.direct, c.revision), connect(t, c.link, c.revision)
			for _, r := range c.requests {
				d := rpcErr(t, r.name+" directly", r.do(direct))
				l := rpcErr(t, r.name+" through the link", r.do(linked))
				same(t, r.name, d, l)
			}
		})
	}

	t.Run("at 2026-07-28 the HTTP status is the code's", func(t *testing.T) {
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + mcpfixture.MissingCapabilityToolName + `","arguments":{},` +
			`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
		post := func(url string) (int, map[string]any) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("MCP-Protocol-Version", "2026-07-28")
			req.Header.Set("Mcp-Method", "tools/call")
			req.Header.Set("Mcp-Name", mcpfixture.MissingCapabilityToolName)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var msg map[string]any
			if err := json.Unmarshal(b, &msg); err != nil {
				t.Fatalf("POST %s: %s %s: not one JSON-RPC message: %v", url, resp.Status, b, err)
			}
			return resp.StatusCode, msg
		}
		directStatus, direct := post(modern.URL)
		for _, link := range []string{stdioLink, remoteLink} {
			status, linked := post(link)
			if status != http.StatusBadRequest || status != directStatus {
				t.Errorf("through the link HTTP %d, directly %d; want 400", status, directStatus)
			}
			if !reflect.DeepEqual(linked["error"], direct["error"]) || linked["id"] != direct["id"] {
				t.Errorf("through the link %v, directly %v", linked, direct)
			}
			required, _ := linked["error"].(map[string]any)["data"].(map[string]any)["requiredCapabilities"].(map[string]any)
			if _, ok := required["sampling"].(map[string]any); !ok {
				t.Errorf("error.data.requiredCapabilities names no sampling object: %v", linked)
			}
		}
	})

	t.Run("an HTTP caller gets the server's error as the tool's", func(t *testing.T) {
		// The server asks its client, and there is none to ask behind the HTTP API:
		// it answers with a JSON-RPC error.
		status, body := call(t, http.MethodPost, dev.edgeURL+"/tool-call/errs-stdio/test_elicitation", dev.key, `{"message":"Who?"}`)
		var env struct {
			Error struct {
				Code    string `json:"code"`
				Details []struct {
					Code    string `json:"code"`
					Message string `json:"message"`
					Data    struct {
						Message string `json:"message"`
					} `json:"data"`
				} `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(body), &env); err != nil || status != http.StatusBadGateway || env.Error.Code != "tool_error" ||
			len(env.Error.Details) != 1 || env.Error.Details[0].Code != "mcp_error" || !strings.Contains(env.Error.Details[0].Data.Message, "no client to ask") {
			t.Fatalf("got %d %s", status, body)
		}
	})
}

// fixtures are the fixture server deployed through the bridge twice on one dev
// stack: as a stdio server (this test binary) and as a remote one (server, served
// without sessions at modern, as the SDK serves 2026-07-28).
type fixtures struct {
	dev                   devStack
	stdioLink, remoteLink string
	server                *mcp.Server
	modern                *httptest.Server
}

// bridgedFixtures deploys the fixture as the tools <name>-stdio and <name>-remote.
func bridgedFixtures(t *testing.T, name string) fixtures {
	t.Helper()
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	fx := fixtures{server: mcpfixture.New(mcpfixture.Options{})}
	fx.modern = httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return fx.server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(fx.modern.Close) // after the bridges' end, which closes their streams
	data := t.TempDir()
	fx.dev, fx.stdioLink, _ = bridgedLinkIn(t, data, name+"-stdio", "--", os.Args[0], "-test.run=^$")
	fx.remoteLink, _ = deployBridged(t, fx.dev, data, name+"-remote", "--url", fx.modern.URL)
	return fx
}

// sameJSON reports whether two JSON texts (either may be empty) say the same.
func sameJSON(a, b json.RawMessage) bool {
	if len(bytes.TrimSpace(a)) == 0 || len(bytes.TrimSpace(b)) == 0 {
		return len(bytes.TrimSpace(a)) == len(bytes.TrimSpace(b))
	}
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}
