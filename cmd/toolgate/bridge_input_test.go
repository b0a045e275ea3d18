package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestServersAskForInputThroughTheLink: a 2026-07-28 server behind the bridge asks its
// client for input with input_required results of its own; a 2026-07-28 client
// through the link sees what it would see calling the server directly (the server's
// keys, a requestState that changes each round) and its retries, carrying the
// answers, reach the server, which completes the call. A made-up or changed
// requestState, or another account's retry, is refused with -32602.
func TestServersAskForInputThroughTheLink(t *testing.T) {
	server := mcpfixture.New(mcpfixture.Options{}) // one: it checks the requestStates it signed
	// The SDK serves 2026-07-28 over HTTP only without sessions.
	upstream := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(upstream.Close) // after the bridge's end, which closes its streams
	data := t.TempDir()
	dev, link, _ := bridgedLinkIn(t, data, "asker", "--url", upstream.URL)

	ctx := testenv.Context(t)
	connect := func(t *testing.T, url string, opts *mcp.ClientOptions) *mcp.ClientSession {
		t.Helper()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "input-test", Version: "1"}, opts).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
			t.Fatalf("the client speaks %s", v)
		}
		return cs
	}
	// A client that does its rounds by hand, to see them.
	byHand := &mcp.ClientOptions{
		MultiRoundTrip:     &mcp.MultiRoundTripOptions{Disabled: true},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) { return nil, errors.New("unused") },
	}
	accept := func(content map[string]any) *mcp.ElicitResult {
		return &mcp.ElicitResult{Action: "accept", Content: content}
	}
	only := func(t *testing.T, res *mcp.CallToolResult, key string) {
		t.Helper()
		if !res.NeedsInput() || len(res.InputRequests) != 1 || res.InputRequests[key] == nil || res.RequestState == "" {
			got, _ := json.Marshal(res)
			t.Fatalf("want an input_required result asking %q with a requestState, got %s", key, got)
		}
	}

	t.Run("the server's own rounds reach the client, and its retries the server", func(t *testing.T) {
		cs := connect(t, link, byHand)
		name := "test_input_required_result_multi_round"
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		only(t, res, "step1")
		first := res.RequestState
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{"step1": accept(map[string]any{"name": "Alice"})}, RequestState: first})
		if err != nil {
			t.Fatal(err)
		}
		only(t, res, "step2")
		if res.RequestState == first {
			t.Fatal("the second round has the first round's requestState")
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{"step2": accept(map[string]any{"color": "blue"})}, RequestState: res.RequestState})
		if err != nil || res.NeedsInput() || res.IsError || toolText(res) != "Both steps done" {
			t.Fatalf("the last round: %+v %v", res, err)
		}
	})

	t.Run("answers without a requestState reach the server", func(t *testing.T) {
		cs := connect(t, link, byHand)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.NeedsInput() || res.InputRequests["user_name"] == nil {
			t.Fatalf("want the server's key user_name: %+v", res.InputRequests)
		}
		res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation", Arguments: map[string]any{},
			InputResponses: mcp.InputResponseMap{"user_name": accept(map[string]any{"name": "Alice"})}})
		if err != nil || toolText(res) != "Hello, Alice!" {
			t.Fatalf("the retry: %+v %v", res, err)
		}
	})

	t.Run("the SDK's own rounds complete the call", func(t *testing.T) {
		cs := connect(t, link, &mcp.ClientOptions{ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return accept(map[string]any{"name": "Bob"}), nil
		}})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_input_required_result_elicitation", Arguments: map[string]any{}})
		if err != nil || toolText(res) != "Hello, Bob!" {
			t.Fatalf("%+v %v", res, err)
		}
	})

	t.Run("a prompt asks for input as well", func(t *testing.T) {
		cs := connect(t, link, byHand)
		name := "test_input_required_result_prompt"
		res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name})
		if err != nil || !res.NeedsInput() || res.InputRequests["user_context"] == nil {
			t.Fatalf("want the server's key user_context: %+v %v", res, err)
		}
		res, err = cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name,
			InputResponses: mcp.InputResponseMap{"user_context": accept(map[string]any{"context": "tests"})}})
		if err != nil || res.NeedsInput() || len(res.Messages) != 1 {
			t.Fatalf("the retry: %+v %v", res, err)
		}
		if text, ok := res.Messages[0].Content.(*mcp.TextContent); !ok || text.Text != "Use this context: tests" {
			t.Fatalf("the prompt: %+v", res.Messages[0].Content)
		}
	})

	refused := func(t *testing.T, err error, what string) {
		t.Helper()
		var rpc *jsonrpc.Error
		if !errors.As(err, &rpc) || rpc.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("%s: got %v, want invalid params (-32602)", what, err)
		}
	}
	name := "test_input_required_result_request_state"
	cs := connect(t, link, byHand)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}})
	if err != nil {
		t.Fatal(err)
	}
	only(t, res, "confirm")
	state := res.RequestState
	answers := mcp.InputResponseMap{"confirm": accept(map[string]any{"ok": true})}

	t.Run("a made-up or changed requestState is refused", func(t *testing.T) {
		for _, bad := range []string{"nonsense", state + "-TAMPERED", "tgs1.abc.def"} {
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, InputResponses: answers, RequestState: bad})
			refused(t, err, "a retry with requestState "+bad)
		}
	})

	t.Run("another account's retry is refused", func(t *testing.T) {
		adminKey := strings.TrimSpace(readFile(t, data, "admin-key"))
		adminCall := func(path, body string) string {
			req, _ := http.NewRequest(http.MethodPost, dev.edgeURL+path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+adminKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var out struct {
				MCPURL string `json:"mcp_url"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&out)
			if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s: %s", path, resp.Status)
			}
			return out.MCPURL
		}
		adminCall("/admin/accounts", `{"id":"globex","name":"Globex"}`)
		otherLink := adminCall("/admin/connections", `{"account":"globex","tool":"asker"}`)
		var other *mcp.ClientSession
		testenv.WaitFor(t, "the other account's link opens", func() bool {
			c, err := mcp.NewClient(&mcp.Implementation{Name: "other", Version: "1"}, byHand).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: otherLink}, nil)
			other = c
			return err == nil
		})
		defer other.Close()
		_, err := other.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, InputResponses: answers, RequestState: state})
		refused(t, err, "another account's retry")
	})

	t.Run("the caller's retry completes", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, InputResponses: answers, RequestState: state})
		if err != nil || !strings.Contains(toolText(res), "state-ok") {
			t.Fatalf("%+v %v", res, err)
		}
	})
}
