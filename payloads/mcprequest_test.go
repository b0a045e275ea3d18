package payloads_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/workers"
)

// runSums runs, in the test's process on the stack's NATS, the tool sums: its method
// sum answers with the sha256 of the blob it is given: a small answer to a large
// request, so that what the edge holds of a call is what it holds of the request.
func runSums(t *testing.T, s *stack) {
	t.Helper()
	runWorker(t, s, workers.Tool{ID: "sums", Title: "Sums", Version: "1.0.0", Description: "Sums up large requests."}, workers.Method{
		Name: "sum", Description: "Answers with the sha256 of blob.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"blob":{"type":"string"}},"required":["blob"]}`),
		Handler: func(_ context.Context, c *workers.Call) (any, error) {
			var in struct{ Blob string }
			if err := json.Unmarshal(c.Params, &in); err != nil {
				return nil, err
			}
			sum := sha256.Sum256([]byte(in.Blob))
			return map[string]any{"sha256": hex.EncodeToString(sum[:]), "n": len(in.Blob)}, nil
		},
	})
}

// sumsClient is a client of the stack's account with links to the tool sums, which
// it runs, once it answers.
func sumsClient(t *testing.T, s *stack) *client {
	t.Helper()
	c := newClient(t, s)
	runSums(t, s)
	c.linkTo(t, "sums", "/tool-call/sums/sum", `{"blob":"x"}`)
	return c
}

// TestLargeMCPRequestsStoredAsRead: a tools/call whose arguments are 50 MiB reaches
// its tool intact (the tool's sha256 of them compared) from an MCP client on
// Streamable HTTP in a session (mcp-go; a client taking only JSON; the TypeScript
// SDK), legacy HTTP+SSE (go-sdk) and 2026-07-28 (go-sdk), and the edge it goes
// through grows its peak RSS by less than 24 MiB on each (after a first small call):
// it reads the message's envelope and passes the arguments to the payloads bucket as
// they arrive, never holding them whole. Each transport has a stack of its own, so
// that each edge is measured afresh.
func TestLargeMCPRequestsStoredAsRead(t *testing.T) {
	skipPeakOf50MiB(t)
	for _, door := range mcpDoors {
		t.Run(door.name, func(t *testing.T) {
			s := startStack(t, "--call-lost-after", "15s") // the tool runs under the race detector
			c := sumsClient(t, s)
			// A first small call through the door: what the edge makes once for a
			// transport's first client (its subscriptions, its caches) is not the
			// request's.
			door.call(c, t, "sum", map[string]any{"blob": "x"})
			b := blob(t, 50<<20)
			sum := sha256.Sum256([]byte(b))
			runtime.GC() // the test's own garbage is not the edge's, but keeps the machine calm
			// The bound: what the payloads writer costs a REST body of 50 MiB too
			// (15.7 MiB measured; 10 to 16 here), with room to spare. Read whole,
			// the request cost 221 to 229 MiB.
			s.boundPeakBy(t, "a request of 50 MiB", 24<<20, func() {
				if text := door.call(c, t, "sum", map[string]any{"blob": b}); !strings.Contains(text, hex.EncodeToString(sum[:])) {
					t.Fatalf("the tool summed other bytes: %.300s", text)
				}
			})
		})
	}
}
