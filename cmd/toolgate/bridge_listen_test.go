package main

import (
	"context"
	"net/http"
	"sync"
	"testing"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestListenHearsTheServersChanges: a 2026-07-28 client's subscriptions/listen
// stream on a link hears the list changes of the bridged 2026-07-28 server (a stdio
// one and a remote one): its tools and its prompts, each only on a stream that asked
// for that list, every notification naming the stream's subscriptionId. mcp-go's
// client opens streams with a filter of its own; the go-sdk client opens one for
// the lists it has handlers for, as the link's server/discover declares them.
func TestListenHearsTheServersChanges(t *testing.T) {
	fx := bridgedFixtures(t, "listen")
	stdioLink, remoteLink := fx.stdioLink, fx.remoteLink
	ctx := testenv.Context(t)

	for _, c := range []struct{ name, link string }{{"stdio", stdioLink}, {"remote", remoteLink}} {
		t.Run(c.name, func(t *testing.T) {
			tools := listenWithMCPGo(t, ctx, c.link, mcpgotypes.SubscriptionFilter{ToolsListChanged: true})
			prompts := listenWithMCPGo(t, ctx, c.link, mcpgotypes.SubscriptionFilter{PromptsListChanged: true})

			var mu sync.Mutex
			var sdkTools, sdkPrompts int
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "listen-test", Version: "1"}, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { mu.Lock(); sdkTools++; mu.Unlock() },
				PromptListChangedHandler: func(context.Context, *mcp.PromptListChangedRequest) {
					mu.Lock()
					sdkPrompts++
					mu.Unlock()
				},
			}).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: c.link}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			caps := cs.InitializeResult().Capabilities
			if caps.Tools == nil || !caps.Tools.ListChanged || caps.Prompts == nil || !caps.Prompts.ListChanged {
				t.Fatalf("the link's server/discover declares no tools and prompts listChanged: %+v %+v", caps.Tools, caps.Prompts)
			}

			trigger := func(name string) {
				t.Helper()
				if res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}}); err != nil || res.IsError {
					t.Fatalf("%s: %+v %v", name, res, err)
				}
			}
			trigger("test_trigger_tool_change")
			testenv.WaitFor(t, "the tools stream hears the tools change", func() bool { return tools.count("notifications/tools/list_changed") > 0 })
			testenv.WaitFor(t, "the go-sdk client hears the tools change", func() bool { mu.Lock(); defer mu.Unlock(); return sdkTools > 0 })
			trigger("test_trigger_prompt_change")
			testenv.WaitFor(t, "the prompts stream hears the prompts change", func() bool { return prompts.count("notifications/prompts/list_changed") > 0 })
			testenv.WaitFor(t, "the go-sdk client hears the prompts change", func() bool { mu.Lock(); defer mu.Unlock(); return sdkPrompts > 0 })
			if c.name == "stdio" {
				// A change on one of the bridge's shared sessions (the HTTP API's
				// calls run there) is heard as well.
				before := prompts.count("notifications/prompts/list_changed")
				if status, body := call(t, http.MethodPost, fx.dev.edgeURL+"/tool-call/listen-stdio/test_trigger_prompt_change", fx.dev.key, `{}`); status != http.StatusOK {
					t.Fatalf("test_trigger_prompt_change over HTTP: %d %s", status, body)
				}
				testenv.WaitFor(t, "the prompts stream hears a shared session's change", func() bool {
					return prompts.count("notifications/prompts/list_changed") > before
				})
			}
			// Each stream heard the other's change by now, if it was going to.
			if n := prompts.count("notifications/tools/list_changed"); n > 0 {
				t.Errorf("a stream that asked for prompts only heard %d tools changes", n)
			}
			if n := tools.count("notifications/prompts/list_changed"); n > 0 {
				t.Errorf("a stream that asked for tools only heard %d prompts changes", n)
			}
			tools.tagged(t)
			prompts.tagged(t)
		})
	}
}

// listener is an mcp-go client with a subscriptions/listen stream open: the
// notifications it heard there.
type listener struct {
	mu    sync.Mutex
	heard []mcpgotypes.JSONRPCNotification
}

// listenWithMCPGo connects an mcp-go client at 2026-07-28 to link and opens a
// subscriptions/listen stream asking for filter.
func listenWithMCPGo(t *testing.T, ctx context.Context, link string, filter mcpgotypes.SubscriptionFilter) *listener {
	t.Helper()
	tr, err := mcpgotransport.NewStreamableHTTP(link)
	if err != nil {
		t.Fatal(err)
	}
	c := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion(mcpgotypes.ProtocolVersion20260728))
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l := &listener{}
	c.OnNotification(func(n mcpgotypes.JSONRPCNotification) {
		l.mu.Lock()
		l.heard = append(l.heard, n)
		l.mu.Unlock()
	})
	req := mcpgotypes.InitializeRequest{}
	req.Params.ProtocolVersion = mcpgotypes.ProtocolVersion20260728
	req.Params.ClientInfo = mcpgotypes.Implementation{Name: "mcp-go-listen", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		t.Fatal(err)
	}
	stop, err := c.ListenAsync(ctx, filter, nil)
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	t.Cleanup(stop)
	testenv.WaitFor(t, "the listen stream is acknowledged", func() bool { return l.count("notifications/subscriptions/acknowledged") > 0 })
	return l
}

// count is how many notifications of method the stream heard.
func (l *listener) count(method string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, h := range l.heard {
		if h.Method == method {
			n++
		}
	}
	return n
}

// tagged checks that every notification the stream heard names one subscriptionId.
func (l *listener) tagged(t *testing.T) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var id any
	for _, h := range l.heard {
		got, ok := h.Params.Meta["io.modelcontextprotocol/subscriptionId"]
		if !ok || got == nil || id != nil && got != id {
			t.Errorf("%s names subscriptionId %v (the stream's first named %v)", h.Method, got, id)
		}
		if id == nil {
			id = got
		}
	}
}
