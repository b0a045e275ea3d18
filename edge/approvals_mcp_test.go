package edge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestApprovalOverMCP: over the legacy HTTP+SSE transport and Streamable HTTP (the
// go-sdk's clients), a held tools/call waits in its request until it is approved,
// then runs once; a denied one is an isError result that says so.
func TestApprovalOverMCP(t *testing.T) {
	e := newEnv(t, withMCP())
	var sends atomic.Int64
	e.serve(emailTool, func(_ string, m *nats.Msg) {
		sends.Add(1)
		respond(m, 0, "application/json", []byte(`{"id":"msg_1"}`))
	})
	e.account("acme", registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "email", Method: "*"}}})
	conn := e.connect("acme", "email")
	link := e.url + "/mcp/" + e.signer.Token("acme", "email", conn.LinkNonce)
	for _, tc := range []struct {
		name string
		tr   mcp.Transport
	}{
		{"legacy SSE", &mcp.SSEClientTransport{Endpoint: link + "/sse"}},
		{"Streamable HTTP", &mcp.StreamableClientTransport{Endpoint: link}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mcp.NewClient(&mcp.Implementation{Name: "approvals-test", Version: "1"}, nil)
			cs, err := c.Connect(testenv.Context(t), tc.tr, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cs.Close() })
			call := func(to string) <-chan *mcp.CallToolResult {
				out := make(chan *mcp.CallToolResult, 1)
				go func() {
					res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "send_email",
						Arguments: map[string]any{"to": to, "subject": "hi", "body": "x"}})
					if err != nil {
						t.Errorf("tools/call: %v", err)
					}
					out <- res
				}()
				return out
			}
			decideNext := func(decision string) {
				t.Helper()
				var list edge.ApprovalList
				testenv.WaitFor(t, "the call waits for approval", func() bool {
					list = decode[edge.ApprovalList](t, e.admin(http.MethodGet, "/approvals?account=acme", ""))
					return len(list.Approvals) == 1
				})
				if r := e.admin(http.MethodPost, "/approvals/"+list.Approvals[0].ID, `{"decision":"`+decision+`"}`); r.status != http.StatusOK {
					t.Fatalf("%s: %d %s", decision, r.status, r.body)
				}
			}
			before := sends.Load()
			approved := call("ada@example.com")
			decideNext("approve")
			if res := <-approved; res == nil || res.IsError {
				t.Fatalf("the approved call: %+v", res)
			}
			denied := call("bob@example.com")
			decideNext("deny")
			res := <-denied
			if res == nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "denied") {
				t.Fatalf("the denied call: %+v", res)
			}
			if n := sends.Load() - before; n != 1 {
				t.Fatalf("the tool was sent %d calls, want 1", n)
			}
		})
	}
	t.Run("2026-07-28", func(t *testing.T) {
		before := sends.Load()
		// The decision comes from another goroutine while the stateless request waits.
		approved := make(chan string, 1)
		go func() {
			defer close(approved)
			deadline := time.Now().Add(testenv.Patience)
			for time.Now().Before(deadline) {
				r, err := e.send(http.MethodGet, "/admin/approvals?account=acme", "", "Authorization", "Bearer "+e.adminKey)
				var list edge.ApprovalList
				if err == nil && json.Unmarshal(r.body, &list) == nil && len(list.Approvals) == 1 {
					if r, err := e.send(http.MethodPost, "/admin/approvals/"+list.Approvals[0].ID, `{"decision":"approve"}`, "Authorization", "Bearer "+e.adminKey); err == nil && r.status == http.StatusOK {
						approved <- list.Approvals[0].ID
					}
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
		answer := statelessCall(t, link, "send_email", `{"to":"cy@example.com","subject":"hi","body":"x"}`)
		if !strings.Contains(string(answer), "msg_1") || strings.Contains(string(answer), `"isError":true`) {
			t.Fatalf("the approved stateless call answered %s", answer)
		}
		if n := sends.Load() - before; n != 1 {
			t.Fatalf("the tool was sent %d calls, want 1", n)
		}
		if id, ok := <-approved; !ok || id == "" {
			t.Fatal("the stateless call was not held for approval")
		}
	})
	if list := decode[edge.ApprovalList](t, e.admin(http.MethodGet, "/approvals", "")); len(list.Approvals) != 0 {
		t.Fatalf("approvals left pending: %+v", list.Approvals)
	}
}
