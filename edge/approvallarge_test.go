package edge_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"testing"
	"time"

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
	type answer struct {
		res *mcp.CallToolResult
		err error
	}
	done := make(chan answer, 1)
	go func() { // the call waits for its approval: the test decides meanwhile
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "approval-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, nil)
		if err != nil {
			done <- answer{err: err}
			return
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: obj})
		done <- answer{res, err}
	}()

	var pending []approvals.Record
	testenv.WaitFor(t, "the call waits for approval", func() bool {
		select {
		case a := <-done:
			b, _ := json.Marshal(a.res)
			t.Fatalf("the call ended before its approval: %v %.300s", a.err, b)
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
	got := <-done
	if got.err != nil || got.res.IsError || len(got.res.Content) == 0 {
		t.Fatalf("the approved call: %v %+v", got.err, got.res)
	}
	res := got.res
	if echoSum(t, res.Content[0].(*mcp.TextContent).Text) != sha256.Sum256([]byte(obj["blob"].(string))) {
		t.Fatal("the approved call's arguments came back changed")
	}
	e.noToolObjectsLeft(t, "echo")
}
