package sse_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// methodOf peeks at a POST's JSON-RPC method, leaving the body for the proxy.
func methodOf(r *http.Request) string {
	if r.Body == nil {
		return ""
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if i := bytes.Index(body, []byte(`"method":"`)); i >= 0 {
		rest := body[i+len(`"method":"`):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 {
			return string(rest[:j])
		}
	}
	return ""
}

// TestAnyEdgeServesAnySession puts two edges on one 3-node cluster behind a balancer
// that sends a session's stream to edge A and its POSTs to edge B: responses,
// progress, list changes and a worker's sampling request all cross from B (or the
// worker) to the client on A, and the client's answers back.
func TestAnyEdgeServesAnySession(t *testing.T) {
	e := newClusterEnv(t)
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 1, nil)
	streamsToA := newBalancer(t, func(r *http.Request) string {
		if r.Method == http.MethodGet {
			return a.url
		}
		return b.url
	})

	for _, k := range []struct {
		name    string
		connect func(t *testing.T, s *seen) mcpClient
	}{
		{"go-sdk over HTTP+SSE", func(t *testing.T, s *seen) mcpClient {
			return connectGoSDK(t, &mcp.SSEClientTransport{Endpoint: e.sseURL(streamsToA.url)}, "", s)
		}},
		{"go-sdk over Streamable HTTP at 2025-11-25", func(t *testing.T, s *seen) mcpClient {
			return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(streamsToA.url)}, "2025-11-25", s)
		}},
	} {
		t.Run(k.name, func(t *testing.T) {
			s := newSeen()
			c := k.connect(t, s)
			ctx := testenv.Context(t)

			res, err := c.call(ctx, "echo", map[string]any{"text": "across"}, false)
			if err != nil || res.text != `{"text":"across"}` {
				t.Fatalf("echo: %+v, %v", res, err)
			}
			if _, err := c.call(ctx, "count", map[string]any{"n": 2}, true); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				select {
				case <-s.progress:
				case <-time.After(testenv.Patience):
					t.Fatal("progress did not cross the edges")
				}
			}
			// The worker asks the client's model; the request reaches the client on
			// edge A's stream and the answer, POSTed to edge B, reaches the worker.
			res, err = c.call(ctx, "ask", nil, false)
			if err != nil || res.isError || !strings.Contains(res.text, "hi from the client") {
				t.Fatalf("ask: %+v, %v", res, err)
			}
			e.addMethod(t, "added-"+strings.NewReplacer(" ", "_", "+", "_", ".", "_").Replace(k.name))
			s.waitChanged(t)
		})
	}

	t.Run("a cancel POSTed to one edge stops the call another edge runs", func(t *testing.T) {
		callsToA := newBalancer(t, func(r *http.Request) string {
			if r.Method == http.MethodGet || methodOf(r) == "tools/call" {
				return a.url
			}
			return b.url
		})
		for _, connect := range []func() mcpClient{
			func() mcpClient {
				return connectGoSDK(t, &mcp.SSEClientTransport{Endpoint: e.sseURL(callsToA.url)}, "", newSeen())
			},
			func() mcpClient {
				return connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(callsToA.url)}, "2025-11-25", newSeen())
			},
			func() mcpClient {
				tr, err := mcpgotransport.NewSSE(e.sseURL(callsToA.url))
				if err != nil {
					t.Fatal(err)
				}
				return connectMCPGo(t, tr, "", newSeen())
			},
		} {
			c := connect()
			id := c.cancelWait(t, e.worker)
			e.worker.waitCancelled(t, id)
			c.close()
		}
	})
}

// TestClientResumesOnAnotherEdge stops the edge holding a session's stream in the
// middle of the session. The client reconnects through the balancer to the other
// edge with Last-Event-ID and gets the event published while it had no stream.
func TestClientResumesOnAnotherEdge(t *testing.T) {
	e := newClusterEnv(t)
	a := e.startEdge(t, 0, nil)
	b := e.startEdge(t, 1, nil)
	lb := newBalancer(t, func(*http.Request) string { return a.url })

	s := newSeen()
	c := connectGoSDK(t, &mcp.StreamableClientTransport{Endpoint: e.streamableURL(lb.url)}, "2025-11-25", s)
	ctx := testenv.Context(t)
	if _, err := c.call(ctx, "echo", map[string]any{"text": "on A"}, false); err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); ; {
		e.addMethod(t, "first")
		select {
		case <-s.changed:
		case <-time.After(2 * time.Second):
			if time.Since(start) < testenv.Patience {
				continue
			}
			t.Fatal("no list_changed on edge A")
		}
		break
	}

	lb.sendTo(func(*http.Request) string { return b.url })
	a.stop()
	// The client waits the retry delay edge A sent before reconnecting; this change
	// happens while it has no stream at all.
	e.addMethod(t, "second")
	s.waitChanged(t)

	res, err := c.call(ctx, "echo", map[string]any{"text": "on B"}, false)
	if err != nil || res.text != `{"text":"on B"}` {
		t.Fatalf("echo after the move: %+v, %v", res, err)
	}
}

// TestALegacyResponseWaitsOutTheEventLogsElection: on the legacy transport a response
// reaches the client only through the event log. The log's stream loses its quorum
// while a call runs (two of the three nodes stop; the edge and the worker are on the
// third) and gets it back when one returns: the response is stored then and reaches
// the client's stream, instead of being lost with the one append that found no
// leader.
func TestALegacyResponseWaitsOutTheEventLogsElection(t *testing.T) {
	c := testenv.NewCluster(t)
	var urls []string
	for _, s := range c.Servers {
		urls = append(urls, s.ClientURL())
	}
	e := setupEnv(t, urls, 3) // the worker is on the last node
	ed := e.startEdge(t, 2, nil)
	stream := openLegacyStream(t, e.sseURL(ed.url))
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":1500}}}`
	if x := do(t, "POST", ed.url+stream.endpoint, nil, call); x.status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", x.status, x.body)
	}
	c.Stop(0)
	c.Stop(1)
	time.Sleep(4 * time.Second) // the answer came and found no leader to store it
	c.Start(t, 1)

	deadline := time.After(45 * time.Second)
	for {
		select {
		case l, ok := <-stream.lines:
			if !ok {
				t.Fatal("the stream ended")
			}
			if strings.HasPrefix(l, "data: ") && strings.Contains(l, `"id":7`) {
				if !strings.Contains(l, `slept`) {
					t.Fatalf("the response: %s", l)
				}
				return
			}
		case <-deadline:
			t.Fatal("the response never reached the stream")
		}
	}
}
