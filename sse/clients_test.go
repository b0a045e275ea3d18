package sse_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
)

// mcpClient is what the tests do with any MCP client: a real client of one of the
// SDKs, over one transport and protocol revision.
type mcpClient interface {
	// protocol is the revision the client settled on.
	protocol() string
	tools(ctx context.Context) ([]string, error)
	ping(ctx context.Context) error
	// call calls a tool; with progress, it asks for progress notifications.
	call(ctx context.Context, name string, args map[string]any, progress bool) (callResult, error)
	// cancelWait starts the kit's wait method and cancels it as this client does.
	cancelWait(t *testing.T, w *worker) string
	close()
}

type callResult struct {
	text       string
	isError    bool
	structured any
}

// seen collects what a client was notified of.
type seen struct {
	progress chan float64
	logs     chan string
	changed  chan struct{}
}

func newSeen() *seen {
	return &seen{progress: make(chan float64, 64), logs: make(chan string, 64), changed: make(chan struct{}, 16)}
}

func (s *seen) waitChanged(t *testing.T) {
	t.Helper()
	select {
	case <-s.changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed within 10s")
	}
}

// kind builds one kind of client against an edge's link.
type kind struct {
	name    string
	connect func(t *testing.T, e *env, base string, s *seen) mcpClient
}

var kinds = []kind{
	{"go-sdk over HTTP+SSE", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.SSEClientTransport{Endpoint: e.sseURL(base)}, "", s)
	}},
	{"go-sdk over Streamable HTTP at 2025-11-25", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(base)}, "2025-11-25", s)
	}},
	{"go-sdk over Streamable HTTP at 2025-06-18", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(base)}, "2025-06-18", s)
	}},
	{"go-sdk over Streamable HTTP at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(base)}, "", s)
	}},
	{"TypeScript SDK over Streamable HTTP at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectTS(t, e.streamableURL(base), "", s)
	}},
	{"TypeScript SDK over Streamable HTTP at 2025-06-18", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectTS(t, e.streamableURL(base), "2025-06-18", s)
	}},
	{"TypeScript SDK through toolgate connect at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectTSStdio(t, "", s, toolgate(t), "connect", e.streamableURL(base))
	}},
	{"TypeScript SDK through toolgate connect at 2025-06-18", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectTSStdio(t, "2025-06-18", s, toolgate(t), "connect", e.streamableURL(base))
	}},
	{"go-sdk through toolgate connect at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.CommandTransport{Command: exec.Command(toolgate(t), "connect", e.streamableURL(base))}, "", s)
	}},
	{"go-sdk through toolgate connect at 2025-06-18", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		return connectGoSDK(t, &mcp.CommandTransport{Command: exec.Command(toolgate(t), "connect", e.streamableURL(base))}, "2025-06-18", s)
	}},
	{"mcp-go through toolgate connect at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		tr := mcpgotransport.NewStdio(toolgate(t), nil, "connect", e.streamableURL(base))
		return connectMCPGo(t, tr, "", s)
	}},
	{"mcp-go over HTTP+SSE", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		tr, err := mcpgotransport.NewSSE(e.sseURL(base))
		if err != nil {
			t.Fatal(err)
		}
		return connectMCPGo(t, tr, "", s)
	}},
	{"mcp-go over Streamable HTTP at 2025-03-26", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		tr, err := mcpgotransport.NewStreamableHTTP(e.streamableURL(base), mcpgotransport.WithContinuousListening())
		if err != nil {
			t.Fatal(err)
		}
		return connectMCPGo(t, tr, "2025-03-26", s)
	}},
	{"mcp-go over Streamable HTTP at its default", func(t *testing.T, e *env, base string, s *seen) mcpClient {
		tr, err := mcpgotransport.NewStreamableHTTP(e.streamableURL(base))
		if err != nil {
			t.Fatal(err)
		}
		return connectMCPGo(t, tr, "", s)
	}},
}

type goSDKClient struct {
	cs *mcp.ClientSession
}

func connectGoSDK(t *testing.T, tr mcp.Transport, version string, s *seen) *goSDKClient {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "go-sdk-test", Version: "1"}, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.progress <- r.Params.Progress
		},
		LoggingMessageHandler: func(_ context.Context, r *mcp.LoggingMessageRequest) {
			s.logs <- string(r.Params.Level)
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.changed <- struct{}{}
		},
		CreateMessageHandler: func(_ context.Context, r *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test-model", Role: "assistant", Content: &mcp.TextContent{Text: "hi from the client"}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
		},
	})
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	// The SSE transport's stream lives on the context it was connected with.
	cs, err := c.Connect(testenv.Context(t), tr, opts)
	if err != nil {
		t.Fatalf("go-sdk connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return &goSDKClient{cs: cs}
}

func (c *goSDKClient) protocol() string { return c.cs.InitializeResult().ProtocolVersion }

func (c *goSDKClient) ping(ctx context.Context) error { return c.cs.Ping(ctx, nil) }

func (c *goSDKClient) tools(ctx context.Context) ([]string, error) {
	res, err := c.cs.ListTools(ctx, nil)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

func (c *goSDKClient) call(ctx context.Context, name string, args map[string]any, progress bool) (callResult, error) {
	p := &mcp.CallToolParams{Name: name, Arguments: args}
	if progress {
		p.Meta = mcp.Meta{"progressToken": "tok-1"}
	}
	res, err := c.cs.CallTool(ctx, p)
	if err != nil {
		return callResult{}, err
	}
	out := callResult{isError: res.IsError, structured: res.StructuredContent}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok {
			out.text = tc.Text
		}
	}
	return out, nil
}

func (c *goSDKClient) cancelWait(t *testing.T, w *worker) string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.cs.CallTool(ctx, &mcp.CallToolParams{Name: "wait"})
		done <- err
	}()
	id := w.waitStarted(t)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	return id
}

func (c *goSDKClient) close() { _ = c.cs.Close() }

type mcpGoClient struct {
	c *mcpgo.Client
}

func connectMCPGo(t *testing.T, tr mcpgotransport.Interface, version string, s *seen) *mcpGoClient {
	t.Helper()
	var opts []mcpgo.ClientOption
	if version != "" {
		opts = append(opts, mcpgo.WithProtocolVersion(version))
	}
	c := mcpgo.NewClient(tr, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("mcp-go start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	c.OnNotification(func(n mcpgotypes.JSONRPCNotification) {
		switch n.Method {
		case "notifications/progress":
			if p, ok := n.Params.AdditionalFields["progress"].(float64); ok {
				s.progress <- p
			}
		case "notifications/message":
			if l, ok := n.Params.AdditionalFields["level"].(string); ok {
				s.logs <- l
			}
		case "notifications/tools/list_changed":
			s.changed <- struct{}{}
		}
	})
	if _, err := c.Initialize(ctx, mcpgotypes.InitializeRequest{Params: mcpgotypes.InitializeParams{
		ProtocolVersion: version,
		ClientInfo:      mcpgotypes.Implementation{Name: "mcp-go-test", Version: "1"},
	}}); err != nil {
		t.Fatalf("mcp-go initialize: %v", err)
	}
	if mcpgotypes.IsModernProtocol(c.ProtocolVersion()) {
		// 2026-07-28 delivers list changes on a subscriptions/listen stream only.
		stop, err := c.ListenAsync(context.Background(), mcpgotypes.SubscriptionFilter{ToolsListChanged: true}, nil)
		if err != nil {
			t.Fatalf("mcp-go listen: %v", err)
		}
		t.Cleanup(stop)
	}
	return &mcpGoClient{c: c}
}

func (c *mcpGoClient) protocol() string { return c.c.ProtocolVersion() }

func (c *mcpGoClient) ping(ctx context.Context) error { return c.c.Ping(ctx) }

func (c *mcpGoClient) tools(ctx context.Context) ([]string, error) {
	res, err := c.c.ListTools(ctx, mcpgotypes.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

func (c *mcpGoClient) call(ctx context.Context, name string, args map[string]any, progress bool) (callResult, error) {
	req := mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: name, Arguments: args}}
	if progress {
		req.Params.Meta = &mcpgotypes.Meta{ProgressToken: "tok-1"}
	}
	res, err := c.c.CallTool(ctx, req)
	if err != nil {
		return callResult{}, err
	}
	out := callResult{isError: res.IsError, structured: res.StructuredContent}
	if len(res.Content) > 0 {
		if tc, ok := res.Content[0].(mcpgotypes.TextContent); ok {
			out.text = tc.Text
		}
	}
	return out, nil
}

func (c *mcpGoClient) cancelWait(t *testing.T, w *worker) string {
	if _, ok := c.c.GetTransport().(*mcpgotransport.SSE); ok {
		// mcp-go sends no notifications/cancelled over HTTP transports; on the legacy
		// SSE transport, where closing the request's POST means nothing, the
		// notification is the only way to cancel, so send it through the client's
		// transport.
		return c.cancelWithNotification(t, w)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.c.CallTool(ctx, mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: "wait"}})
		done <- err
	}()
	id := w.waitStarted(t)
	cancel()
	if err := <-done; err == nil {
		t.Fatal("a cancelled call returned no error")
	}
	return id
}

func (c *mcpGoClient) cancelWithNotification(t *testing.T, w *worker) string {
	tr := c.c.GetTransport()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := tr.SendRequest(ctx, mcpgotransport.JSONRPCRequest{
			JSONRPC: "2.0", ID: mcpgotypes.NewRequestId("wait-1"), Method: "tools/call",
			Params: map[string]any{"name": "wait"},
		})
		done <- err
	}()
	id := w.waitStarted(t)
	err := tr.SendNotification(context.Background(), mcpgotypes.JSONRPCNotification{
		JSONRPC: "2.0",
		Notification: mcpgotypes.Notification{Method: "notifications/cancelled", Params: mcpgotypes.NotificationParams{
			AdditionalFields: map[string]any{"requestId": "wait-1", "reason": "the test gave up"},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	return id
}

func (c *mcpGoClient) close() { _ = c.c.Close() }

// structuredText reads the text field of a structured result, whichever SDK decoded it.
func structuredText(v any) string {
	b, _ := json.Marshal(v)
	var s struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(b, &s)
	return s.Text
}

// tsSDKClient is a client of the TypeScript SDK, run by Node (internal/tsclient).
type tsSDKClient struct {
	c *tsclient.Client
}

func connectTS(t *testing.T, url, version string, s *seen) *tsSDKClient {
	t.Helper()
	return followTS(tsclient.HTTP(t, url, version), s, "progress")
}

func connectTSStdio(t *testing.T, version string, s *seen, command ...string) *tsSDKClient {
	t.Helper()
	// Over stdio the client's transport reads what arrives at once in one go, and the
	// SDK drops progress read together with the call's answer before its onprogress
	// runs (typescript-sdk#2580): progress is taken where the transport received it.
	return followTS(tsclient.Stdio(t, version, command...), s, "wire-progress")
}

// toolgate is the toolgate binary, built once, for clients that start `toolgate
// connect` as their stdio server.
func toolgate(t *testing.T) string {
	t.Helper()
	bin, err := buildToolgate()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// binDir holds the binaries the tests build; TestMain removes it.
var binDir string

var buildToolgate = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "toolgate")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/toolgate/toolgate/cmd/toolgate").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building toolgate: %v\n%s", err, out)
	}
	return bin, nil
})

// followTS hands what the client is told to s; progress comes as events of kind
// progress.
func followTS(c *tsclient.Client, s *seen, progress string) *tsSDKClient {
	go func() {
		for {
			select {
			case e := <-c.Events:
				switch e.Event {
				case progress:
					s.progress <- e.Progress
				case "log":
					s.logs <- e.Level
				case "changed":
					s.changed <- struct{}{}
				}
			case <-c.Exited():
				return
			}
		}
	}()
	return &tsSDKClient{c: c}
}

func (c *tsSDKClient) protocol() string { return c.c.Protocol }

func (c *tsSDKClient) ping(ctx context.Context) error {
	_, err := c.c.Do(ctx, map[string]any{"op": "ping"})
	return err
}

func (c *tsSDKClient) tools(ctx context.Context) ([]string, error) {
	raw, err := c.c.Do(ctx, map[string]any{"op": "tools"})
	if err != nil {
		return nil, err
	}
	var names []string
	err = json.Unmarshal(raw, &names)
	return names, err
}

func (c *tsSDKClient) call(ctx context.Context, name string, args map[string]any, progress bool) (callResult, error) {
	raw, err := c.c.Do(ctx, map[string]any{"op": "call", "name": name, "args": args, "progress": progress})
	if err != nil {
		return callResult{}, err
	}
	var r struct {
		Text       string `json:"text"`
		IsError    bool   `json:"isError"`
		Structured any    `json:"structured"`
	}
	err = json.Unmarshal(raw, &r)
	return callResult{text: r.Text, isError: r.IsError, structured: r.Structured}, err
}

func (c *tsSDKClient) cancelWait(t *testing.T, w *worker) string {
	ctx := testenv.Context(t)
	ref := c.c.ID()
	if _, err := c.c.Do(ctx, map[string]any{"op": "start", "name": "wait"}); err != nil {
		t.Fatal(err)
	}
	id := w.waitStarted(t)
	raw, err := c.c.Do(ctx, map[string]any{"op": "abort", "ref": ref})
	if err != nil || !strings.HasPrefix(string(raw), `"rejected`) {
		t.Fatalf("a cancelled call: %s %v, want it rejected", raw, err)
	}
	return id
}

func (c *tsSDKClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.c.Do(ctx, map[string]any{"op": "close"})
}
