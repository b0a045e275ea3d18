package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// bridgedLink runs `toolgate worker mcp` for the tool with args (the flags, then --
// and the server's command) on a dev stack, connects the tool to the dev account and
// returns the stack and the tool's link once the tool is online.
func bridgedLink(t *testing.T, tool string, args ...string) (devStack, string) {
	t.Helper()
	dev, link, _ := bridgedLinkWith(t, tool, args...)
	return dev, link
}

// bridgedLinkWith is bridgedLink that also returns what stops the bridge.
func bridgedLinkWith(t *testing.T, tool string, args ...string) (devStack, string, func()) {
	t.Helper()
	return bridgedLinkIn(t, t.TempDir(), tool, args...)
}

// bridgedLinkIn is bridgedLinkWith with the dev stack's data in data (where its admin
// key is).
func bridgedLinkIn(t *testing.T, data, tool string, args ...string) (devStack, string, func()) {
	t.Helper()
	dev := startDevStack(t, data)
	t.Cleanup(func() { _ = dev.stop() })
	link, stop := deployBridged(t, dev, data, tool, args...)
	return dev, link, stop
}

// deployBridged runs `toolgate worker mcp` for the tool with args on the dev stack
// whose data is in data, connects the tool to the dev account, and returns the tool's
// link once it is online, and what stops the bridge.
func deployBridged(t *testing.T, dev devStack, data, tool string, args ...string) (string, func()) {
	t.Helper()
	stop := startBridge(t, dev.natsURL, tool, args...)

	admin := strings.TrimSpace(readFile(t, data, "admin-key"))
	req, _ := http.NewRequest(http.MethodPost, dev.edgeURL+"/admin/connections", strings.NewReader(`{"account":"dev","tool":"`+tool+`"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		t.Fatalf("connect %s: %s", tool, resp.Status)
	}
	var info struct {
		MCPURL string `json:"mcp_url"`
		Status string `json:"status"`
	}
	testenv.Eventually(t, 90*time.Second, "the bridged tool is online", func() bool {
		status, body := call(t, http.MethodGet, dev.edgeURL+"/tools/"+tool, dev.key, "")
		return status == 200 && json.Unmarshal([]byte(body), &info) == nil && info.Status == "online"
	})
	return info.MCPURL, stop
}

// startBridge runs an instance of `toolgate worker mcp` for tool with args on natsURL
// until the returned stop (or the test's end), which returns once it has stopped.
func startBridge(t *testing.T, natsURL, tool string, args ...string) func() {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	root := newRootCmd()
	root.SetArgs(append([]string{"worker", "mcp", "--nats", natsURL, "--tool", tool}, args...))
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop
}

// sessionRevision is the newest MCP revision with sessions.
const sessionRevision = "2025-11-25"

// pidOf calls the fixture's process.pid on a client session: which server process
// serves the session.
func pidOf(t *testing.T, ctx context.Context, cs *mcp.ClientSession) int {
	t.Helper()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpfixture.DottedToolName, Arguments: map[string]any{}})
	if err != nil || res.IsError {
		t.Fatalf("process.pid: %+v %v", res, err)
	}
	var out struct {
		PID int `json:"pid"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || out.PID == 0 {
		t.Fatalf("process.pid answered %s", b)
	}
	return out.PID
}

func alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

// TestBridgedSessionsThroughTheLink checks that what a server keeps per session stays
// with one client session: each client session has an upstream session (here a
// process) of its own while it lives, whose end ends it; the number held is bounded;
// and what the server sends on it reaches that client, within calls or outside them.
func TestBridgedSessionsThroughTheLink(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio") // the server below is this test binary
	dev, link := bridgedLink(t, "fixture", "--sessions", "1", "--client-sessions", "2", "--", os.Args[0], "-test.run=^$")
	ctx := testenv.Context(t)

	logs := make(chan *mcp.LoggingMessageParams, 16)
	connect := func(name string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ClientOptions{
			LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) { logs <- r.Params },
		})
		// Sessions are of the revisions before 2026-07-28, which is stateless.
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a, b := connect("a"), connect("b")

	var pidA, pidB int
	t.Run("each client session is served by one upstream session of its own", func(t *testing.T) {
		pidA, pidB = pidOf(t, ctx, a), pidOf(t, ctx, b)
		for range 4 {
			if got := pidOf(t, ctx, a); got != pidA {
				t.Fatalf("client a was served by processes %d and %d", pidA, got)
			}
			if got := pidOf(t, ctx, b); got != pidB {
				t.Fatalf("client b was served by processes %d and %d", pidB, got)
			}
		}
		if pidA == pidB {
			t.Fatalf("clients a and b share the server process %d", pidA)
		}
		status, body := call(t, http.MethodPost, dev.edgeURL+"/tool-call/fixture/process_pid", dev.key, `{}`)
		if status != 200 || strings.Contains(body, `"pid":`+itoa(pidA)) || strings.Contains(body, `"pid":`+itoa(pidB)) {
			t.Fatalf("a REST call, which has no MCP session, answered %d %s (clients' processes %d, %d)", status, body, pidA, pidB)
		}
	})

	t.Run("log messages the server sends outside any call reach the client, at its level", func(t *testing.T) {
		if err := b.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
			t.Fatal(err)
		}
		res, err := b.CallTool(ctx, &mcp.CallToolParams{Name: mcpfixture.LogLaterToolName, Arguments: map[string]any{"ms": 300, "text": "after the call"}})
		if err != nil || res.IsError {
			t.Fatalf("log_later: %+v %v", res, err)
		}
		select {
		case m := <-logs:
			if m.Level != "info" || m.Data != "after the call" || m.Logger != "fixture" {
				t.Fatalf("the client got %+v, want the info message only", m)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("no log message reached the client within 20s")
		}
	})

	t.Run("a client session beyond the bound is refused, and served once one ends", func(t *testing.T) {
		c := connect("c")
		res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || !strings.Contains(toolText(res), "upstream_session_limit") {
			t.Fatalf("a third client session with --client-sessions 2 got %+v, want upstream_session_limit", res)
		}
		if err := a.Close(); err != nil { // DELETE: the client's session ends
			t.Fatal(err)
		}
		testenv.WaitFor(t, "the ended session's server process gone", func() bool { return !alive(pidA) })
		if !alive(pidB) {
			t.Fatal("the other client's server process ended too")
		}
		testenv.WaitFor(t, "the third client served", func() bool {
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
			return err == nil && !res.IsError
		})
	})
}

// TestBridgedSamplingOnThePostStream calls a tool whose server asks the client to
// sample with mcp-go, which by default opens no standalone stream: the request must
// come on the stream of the call's own POST.
func TestBridgedSamplingOnThePostStream(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	_, link := bridgedLink(t, "fixture", "--sessions", "1", "--", os.Args[0], "-test.run=^$")
	ctx, cancel := context.WithTimeout(testenv.Context(t), 60*time.Second)
	defer cancel()

	tr, err := mcpgotransport.NewStreamableHTTP(link)
	if err != nil {
		t.Fatal(err)
	}
	c := startMCPGo(t, ctx, tr, mcpgo.WithSamplingHandler(sampler{}))
	callCtx, callCancel := context.WithTimeout(ctx, 15*time.Second)
	defer callCancel()
	var call mcpgotypes.CallToolRequest
	call.Params.Name = "test_sampling"
	call.Params.Arguments = map[string]any{"prompt": "2+2?"}
	res, err := c.CallTool(callCtx, call)
	if err != nil {
		t.Fatalf("test_sampling: %v", err)
	}
	if len(res.Content) != 1 || !strings.Contains(mcpgotypes.GetTextFromContent(res.Content[0]), "LLM response: 4 from mcp-go") {
		t.Fatalf("test_sampling answered %+v", res)
	}
}

// TestBridgedCallsStreamOnlyWhenTheServerAsks: the go-sdk client, in a session of
// 2025-11-25, declares roots (its default) and sampling, so the bridged server may ask
// it something during any call. A call of echo, which asks nothing, is answered as
// application/json, and nothing of it is kept in the event log; a call of
// test_sampling gets the server's request on the stream of its own POST.
func TestBridgedCallsStreamOnlyWhenTheServerAsks(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	dev, link := bridgedLink(t, "fixture", "--sessions", "1", "--", os.Args[0], "-test.run=^$")
	ctx, cancel := context.WithTimeout(testenv.Context(t), 60*time.Second)
	defer cancel()
	rec := &testenv.CallRecorder{}
	c := mcp.NewClient(&mcp.Implementation{Name: "roots-and-sampling", Version: "1"}, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "4 from go-sdk"}}, nil
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link, HTTPClient: &http.Client{Transport: rec}},
		&mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	nc := testenv.Conn(t, dev.natsURL)

	// A call that runs longer than the edge's --mcp-stream-after (the first starts
	// the session's server process) becomes a stream all the same.
	testenv.WaitFor(t, "a call of echo answered as application/json", func() bool {
		before := testenv.PostRecords(t, nc, "fixture", cs.ID())
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "quick"}})
		if err != nil || res.IsError || !strings.Contains(toolText(res), "quick") {
			t.Fatalf("echo: %+v, %v", res, err)
		}
		if rec.Last(t).ContentType != "application/json" {
			return false
		}
		if n := testenv.PostRecords(t, nc, "fixture", cs.ID()); n != before {
			t.Fatalf("the event log keeps %d more records of the session's POST streams after a call answered with JSON, want none", n-before)
		}
		return true
	})

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "test_sampling", Arguments: map[string]any{"prompt": "2+2?"}})
	if err != nil || res.IsError || !strings.Contains(toolText(res), "LLM response: 4 from go-sdk") {
		t.Fatalf("test_sampling: %+v, %v", res, err)
	}
	got := rec.Last(t)
	if got.ContentType != "text/event-stream" || !strings.Contains(got.Body(), `"method":"sampling/createMessage"`) {
		t.Fatalf("a call whose server asked the client was answered as %s carrying %q, want the sampling request on its stream", got.ContentType, got.Body())
	}
}

// startMCPGo starts an mcp-go client on tr and initializes its session at
// sessionRevision; the client closes with the test.
func startMCPGo(t *testing.T, ctx context.Context, tr mcpgotransport.Interface, opts ...mcpgo.ClientOption) *mcpgo.Client {
	t.Helper()
	c := mcpgo.NewClient(tr, opts...)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	req := mcpgotypes.InitializeRequest{}
	req.Params.ProtocolVersion = sessionRevision
	req.Params.ClientInfo = mcpgotypes.Implementation{Name: "mcp-go-test", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	return c
}

type sampler struct{}

func (sampler) CreateMessage(_ context.Context, _ mcpgotypes.CreateMessageRequest) (*mcpgotypes.CreateMessageResult, error) {
	return &mcpgotypes.CreateMessageResult{
		SamplingMessage: mcpgotypes.SamplingMessage{Role: mcpgotypes.RoleAssistant, Content: mcpgotypes.NewTextContent("4 from mcp-go")},
		Model:           "m",
	}, nil
}

func toolText(res *mcp.CallToolResult) string { return testenv.ToolText(res) }

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
