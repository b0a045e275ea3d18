package edge_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestLargeMCPArgumentsHeldForApproval: a tools/call whose arguments the edge stores
// as they arrive (past one message) is held for approval as any other: the approval
// names the sha256 of the stored bytes and shows no arguments, and once approved the
// call runs and echo answers the arguments intact.
func TestLargeMCPArgumentsHeldForApproval(t *testing.T) {
	e := newEnv(t, withMCP(), withApprovals(nil))
	e.runEcho(t)
	e.account("acme", registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "echo", Method: "echo"}}})
	link := e.url + "/mcp/" + e.signer.Token("acme", "echo", e.connect("acme", "echo").LinkNonce)
	var obj map[string]any
	if err := json.Unmarshal(jsonBody(t, 3<<20), &obj); err != nil {
		t.Fatal(err)
	}
	done := make(chan *mcp.CallToolResult, 1)
	go func() { done <- goSDKEcho(t, &mcp.StreamableClientTransport{Endpoint: link}, obj) }()

	var pending []approvals.Record
	testenv.WaitFor(t, "the call waits for approval", func() bool {
		select {
		case res := <-done:
			b, _ := json.Marshal(res)
			t.Fatalf("the call ended before its approval: %.300s", b)
		default:
		}
		pending = decode[edge.ApprovalList](t, e.admin(http.MethodGet, "/approvals?account=acme", "")).Approvals
		return len(pending) == 1
	})
	a := pending[0]
	if sum, err := hex.DecodeString(a.ArgsSHA256); err != nil || len(sum) != 32 || a.Arguments != "" {
		t.Fatalf("the approval %+v: want the stored arguments' sha256 and none shown", a)
	}
	if r := e.admin(http.MethodPost, "/approvals/"+a.ID, `{"decision":"approve"}`); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	res := <-done
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("the approved call: %+v", res.Content)
	}
	if echoSum(t, res.Content[0].(*mcp.TextContent).Text) != sha256.Sum256([]byte(obj["blob"].(string))) {
		t.Fatal("the approved call's arguments came back changed")
	}
	e.noToolObjectsLeft(t, "echo")
}
