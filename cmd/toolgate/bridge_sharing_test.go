package main

//lint:file-ignore SA1019 the clients below answer sampling, which MCP deprecates only from 2026-07-28.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// connectClients opens n client sessions on link, each with opts (nil: the SDK's
// defaults, which declare roots).
func connectClients(t *testing.T, ctx context.Context, link string, n int, opts func(i int) *mcp.ClientOptions) []*mcp.ClientSession {
	t.Helper()
	out := make([]*mcp.ClientSession, n)
	for i := range out {
		var o *mcp.ClientOptions
		if opts != nil {
			o = opts(i)
		}
		c := mcp.NewClient(&mcp.Implementation{Name: "client-" + strconv.Itoa(i), Version: "1"}, o)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatalf("client session %d: %v", i, err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		out[i] = cs
	}
	return out
}

// servedBy makes calls of echo with texts of session i's own on every session at
// once, checks each answer is its own, and returns the server process that answered
// each session's process.pid.
func servedBy(t *testing.T, ctx context.Context, sessions []*mcp.ClientSession) []int {
	t.Helper()
	pids := make([]int, len(sessions))
	var wg sync.WaitGroup
	for i, cs := range sessions {
		wg.Go(func() {
			for j := range 3 {
				text := fmt.Sprintf("session %d, call %d", i, j)
				res, err := callPaced(ctx, cs, "echo", map[string]any{"text": text})
				if err != nil || res.IsError {
					t.Errorf("session %d: echo: %s %v", i, resText(res), err)
					return
				}
				if out, _ := res.StructuredContent.(map[string]any); out["text"] != text {
					t.Errorf("session %d sent %q and got %v", i, text, res.StructuredContent)
				}
			}
			res, err := callPaced(ctx, cs, mcpfixture.DottedToolName, map[string]any{})
			if err != nil || res.IsError {
				t.Errorf("session %d: process.pid: %s %v", i, resText(res), err)
				return
			}
			var out struct {
				PID int `json:"pid"`
			}
			b, _ := json.Marshal(res.StructuredContent)
			if json.Unmarshal(b, &out) != nil || out.PID == 0 {
				t.Errorf("session %d: process.pid answered %s", i, b)
			}
			pids[i] = out.PID
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return pids
}

// fixtureChildren counts this test process's children that are the fixture: its own
// binary, started with -test.run=^$.
func fixtureChildren(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	self, n := strconv.Itoa(os.Getpid()), 0
	for _, e := range entries {
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: the comm may hold spaces, the rest follows its ')'.
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) < 2 || f[1] != self {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if strings.Contains(string(cmdline), "-test.run=^$") {
			n++
		}
	}
	return n
}

func distinct(pids []int) map[int]bool {
	out := map[int]bool{}
	for _, p := range pids {
		out[p] = true
	}
	return out
}

// TestBridgedSharedPool: with --upstream-sessions shared, 32 client sessions are
// served by the pool's --sessions processes, no more, and each gets its own answers.
func TestBridgedSharedPool(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	_, link := bridgedLink(t, "fixture", "--upstream-sessions", "shared", "--sessions", "3", "--", os.Args[0], "-test.run=^$")
	ctx := testenv.Context(t)
	sessions := connectClients(t, ctx, link, 32, nil)
	pids := distinct(servedBy(t, ctx, sessions))
	if len(pids) > 3 {
		t.Fatalf("32 client sessions were served by %d processes, want at most the pool's 3: %v", len(pids), pids)
	}
	if n := fixtureChildren(t); n > 3 {
		t.Fatalf("the bridge runs %d server processes for 32 client sessions, want at most the pool's 3", n)
	}
}

// TestBridgedPerSession: with --upstream-sessions per-session, each client session
// has a process of its own, besides the pool's.
func TestBridgedPerSession(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	dev, link := bridgedLink(t, "fixture", "--upstream-sessions", "per-session", "--sessions", "1", "--client-sessions", "8", "--", os.Args[0], "-test.run=^$")
	ctx := testenv.Context(t)
	sessions := connectClients(t, ctx, link, 8, func(int) *mcp.ClientOptions {
		return &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}} // nothing the server may ask: still its own
	})
	pids := distinct(servedBy(t, ctx, sessions))
	if len(pids) != 8 {
		t.Fatalf("8 client sessions were served by %d processes, want one each: %v", len(pids), pids)
	}
	status, body := call(t, http.MethodPost, dev.edgeURL+"/tool-call/fixture/process_pid", dev.key, `{}`)
	for pid := range pids {
		if status != 200 || strings.Contains(body, `"pid":`+itoa(pid)) {
			t.Fatalf("a REST call answered %d %s: the pool's process is a client session's (%v)", status, body, pids)
		}
	}
	if n := fixtureChildren(t); n != 9 {
		t.Fatalf("the bridge runs %d server processes, want 8 client sessions' and the pool's 1", n)
	}
}

// TestBridgedDefaultSharing: by default a server that declares nothing it keeps per
// session (the plain fixture) is shared by the client sessions it cannot ask
// anything, while a client that declared sampling has a process of its own, on which
// the server's request reaches that client and no other, calls running at once.
// A server that declares logging (the full fixture) gives each client its own.
func TestBridgedDefaultSharing(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio")
	sampler := func(name string) *mcp.ClientOptions {
		return &mcp.ClientOptions{
			Capabilities: &mcp.ClientCapabilities{},
			CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
				return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "from " + name}}, nil
			},
		}
	}
	asks := func(t *testing.T, ctx context.Context, samplers []*mcp.ClientSession) {
		t.Helper()
		var wg sync.WaitGroup
		for i, cs := range samplers {
			wg.Go(func() {
				for range 3 {
					res, err := callPaced(ctx, cs, "test_sampling", map[string]any{"prompt": "2+2?"})
					want := "from sampler-" + strconv.Itoa(i)
					if err != nil || res.IsError || !strings.Contains(toolText(res), want) {
						t.Errorf("sampler %d: test_sampling answered %s %v, want the answer of its own client, %q", i, resText(res), err, want)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	t.Run("a plain server is shared by clients it cannot ask", func(t *testing.T) {
		t.Setenv(mcpfixture.PlainEnv, "1")
		_, link := bridgedLink(t, "plain", "--sessions", "2", "--", os.Args[0], "-test.run=^$")
		ctx := testenv.Context(t)
		quiet := connectClients(t, ctx, link, 12, func(int) *mcp.ClientOptions {
			return &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
		})
		samplers := connectClients(t, ctx, link, 3, func(i int) *mcp.ClientOptions { return sampler("sampler-" + strconv.Itoa(i)) })
		shared := distinct(servedBy(t, ctx, quiet))
		if len(shared) > 2 {
			t.Fatalf("12 client sessions that declared nothing were served by %d processes, want at most the pool's 2", len(shared))
		}
		own := distinct(servedBy(t, ctx, samplers))
		for pid := range own {
			if shared[pid] {
				t.Fatalf("a client that declared sampling is served by the pool's process %d", pid)
			}
		}
		if len(own) != 3 {
			t.Fatalf("3 clients that declared sampling were served by %d processes, want one each", len(own))
		}
		asks(t, ctx, samplers)
	})
	t.Run("a server that declares logging gives each client its own", func(t *testing.T) {
		_, link := bridgedLink(t, "fixture", "--sessions", "1", "--", os.Args[0], "-test.run=^$")
		ctx := testenv.Context(t)
		quiet := connectClients(t, ctx, link, 3, func(int) *mcp.ClientOptions {
			return &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}
		})
		if pids := distinct(servedBy(t, ctx, quiet)); len(pids) != 3 {
			t.Fatalf("3 client sessions were served by %d processes, want one each", len(pids))
		}
		samplers := connectClients(t, ctx, link, 3, func(i int) *mcp.ClientOptions { return sampler("sampler-" + strconv.Itoa(i)) })
		asks(t, ctx, samplers)
	})
}

func resText(res *mcp.CallToolResult) string {
	if res == nil {
		return "no result"
	}
	return toolText(res)
}

// callPaced calls a tool, again after a pause while the dev account's rate refuses
// it: many sessions call at once here.
func callPaced(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (*mcp.CallToolResult, error) {
	for range 200 {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil || !res.IsError || !strings.Contains(toolText(res), "too many calls") {
			return res, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, errors.New("refused for its rate 200 times")
}
