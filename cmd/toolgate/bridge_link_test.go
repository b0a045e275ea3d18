package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBridgedServerThroughItsLink deploys the fixture MCP server through the bridge on
// a dev stack and uses it as a user would: over REST, and with the official SDK's
// client on the tool's link.
func TestBridgedServerThroughItsLink(t *testing.T) {
	data := t.TempDir()
	dev := startDevStack(t, data)
	defer dev.stop()
	edgeURL, key, natsURL := dev.edgeURL, dev.key, dev.natsURL

	t.Setenv(mcpfixture.ChildEnv, "stdio") // the server below is this test binary
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	root := newRootCmd()
	root.SetArgs([]string{"worker", "mcp", "--nats", natsURL, "--tool", "fixture", "--sessions", "1", "--", os.Args[0], "-test.run=^$"})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	defer func() { cancel(); <-done }()

	admin := strings.TrimSpace(readFile(t, data, "admin-key"))
	req, _ := http.NewRequest(http.MethodPost, edgeURL+"/admin/connections", strings.NewReader(`{"account":"dev","tool":"fixture"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("connect the fixture: %v %v", resp, err)
	}
	var tool struct {
		MCPURL string `json:"mcp_url"`
		Status string `json:"status"`
	}
	testenv.WaitFor(t, "the bridged tool is online", func() bool {
		status, body := call(t, http.MethodGet, edgeURL+"/tools/fixture", key, "")
		return status == 200 && json.Unmarshal([]byte(body), &tool) == nil && tool.Status == "online"
	})

	t.Run("REST callers get the server's CallToolResult", func(t *testing.T) {
		status, body := call(t, http.MethodPost, edgeURL+"/tool-call/fixture/echo", key, `{"text":"hi"}`)
		if status != 200 || !strings.Contains(body, `"structuredContent":{"length":2,"text":"hi"}`) {
			t.Fatalf("got %d %s", status, body)
		}
	})

	cctx, ccancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer ccancel()
	var listChanged, progress atomic.Int32
	client := mcp.NewClient(&mcp.Implementation{Name: "bridge-link-test", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler:      func(context.Context, *mcp.ToolListChangedRequest) { listChanged.Add(1) },
		ProgressNotificationHandler: func(context.Context, *mcp.ProgressNotificationClientRequest) { progress.Add(1) },
	})
	session, err := client.Connect(cctx, &mcp.StreamableClientTransport{Endpoint: tool.MCPURL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()

	t.Run("the server's tools are listed and called with structured results", func(t *testing.T) {
		res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hello"}})
		if err != nil || res.IsError {
			t.Fatalf("echo: %+v %v", res, err)
		}
		if got, _ := json.Marshal(res.StructuredContent); string(got) != `{"length":5,"text":"hello"}` {
			t.Fatalf("structured content %s", got)
		}
	})
	t.Run("an image result arrives as an image", func(t *testing.T) {
		res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "test_image_content", Arguments: map[string]any{}})
		if err != nil || len(res.Content) == 0 {
			t.Fatalf("%+v %v", res, err)
		}
		if img, ok := res.Content[0].(*mcp.ImageContent); !ok || img.MIMEType == "" || len(img.Data) == 0 {
			t.Fatalf("content %#v", res.Content[0])
		}
	})
	t.Run("progress reaches the client", func(t *testing.T) {
		params := &mcp.CallToolParams{Name: "test_tool_with_progress", Arguments: map[string]any{}}
		params.SetProgressToken("p-1")
		if _, err := session.CallTool(cctx, params); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "progress notifications", func() bool { return progress.Load() >= 3 })
	})
	t.Run("a resource is read and a prompt is got", func(t *testing.T) {
		r, err := session.ReadResource(cctx, &mcp.ReadResourceParams{URI: "test://static-text"})
		if err != nil || len(r.Contents) != 1 || r.Contents[0].Text == "" {
			t.Fatalf("resources/read: %+v %v", r, err)
		}
		p, err := session.GetPrompt(cctx, &mcp.GetPromptParams{Name: "test_simple_prompt"})
		if err != nil || len(p.Messages) == 0 {
			t.Fatalf("prompts/get: %+v %v", p, err)
		}
	})
	t.Run("a tool the server adds reaches the client as list_changed", func(t *testing.T) {
		if _, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "toggle_extra", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		testenv.WaitFor(t, "list_changed and the new tool", func() bool {
			if listChanged.Load() == 0 {
				return false
			}
			tools, err := session.ListTools(cctx, nil)
			if err != nil {
				return false
			}
			for _, tl := range tools.Tools {
				if tl.Name == mcpfixture.ExtraToolName {
					return true
				}
			}
			return false
		})
	})
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(dir + "/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
