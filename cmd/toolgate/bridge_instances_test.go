package main

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBridgedSessionsStayOnTheirInstance: with two instances of a bridge, each of
// which holds an upstream session (here a server process) per client session, every
// request of a client session reaches the instance holding its upstream session, not
// whichever instance the tool's queue group picks; when that instance stops, the
// session goes on at the other, and stays there.
func TestBridgedSessionsStayOnTheirInstance(t *testing.T) {
	t.Setenv(mcpfixture.ChildEnv, "stdio") // the server below is this test binary
	server := []string{"--sessions", "1", "--", os.Args[0], "-test.run=^$"}
	dev, link, stopFirst := bridgedLinkWith(t, "fixture", server...)
	ctx := testenv.Context(t)

	connect := func(name string) *mcp.ClientSession {
		t.Helper()
		c := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: link}, &mcp.ClientSessionOptions{ProtocolVersion: sessionRevision})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	a := connect("a")
	pidA := pidOf(t, ctx, a) // the first instance is the only one: it holds a's session

	startBridge(t, dev.natsURL, "fixture", server...)
	testenv.WaitFor(t, "two instances of the tool", func() bool {
		var info struct {
			Instances int `json:"instances"`
		}
		status, body := call(t, http.MethodGet, dev.edgeURL+"/tools/fixture", dev.key, "")
		return status == 200 && json.Unmarshal([]byte(body), &info) == nil && info.Instances == 2
	})

	const calls = 12 // spread over two instances at random, all twelve at one: 1 in 2048
	t.Run("a session's requests reach the instance holding it", func(t *testing.T) {
		for i := range calls {
			if got := pidOf(t, ctx, a); got != pidA {
				t.Fatalf("call %d of session a reached server process %d, its session is held by %d", i+1, got, pidA)
			}
		}
		b := connect("b")
		pidB := pidOf(t, ctx, b)
		for i := range calls {
			if got := pidOf(t, ctx, b); got != pidB {
				t.Fatalf("call %d of session b reached server process %d, its session is held by %d", i+1, got, pidB)
			}
		}
	})

	t.Run("when that instance stops, the session goes on at the other", func(t *testing.T) {
		stopFirst()
		if alive(pidA) {
			testenv.WaitFor(t, "the stopped instance's server process gone", func() bool { return !alive(pidA) })
		}
		pidA2 := pidOf(t, ctx, a)
		if pidA2 == pidA {
			t.Fatalf("session a still reached process %d after its instance stopped", pidA)
		}
		for i := range calls {
			if got := pidOf(t, ctx, a); got != pidA2 {
				t.Fatalf("call %d of session a after the move reached server process %d, its session is held by %d", i+1, got, pidA2)
			}
		}
	})
}
