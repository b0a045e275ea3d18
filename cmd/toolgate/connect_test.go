package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// asToolgate, set in the environment, makes this test binary run as toolgate itself
// (see TestMain): the tests of commands a client starts as a process run it so,
// without building the binary.
const asToolgate = "TOOLGATE_TEST_AS_TOOLGATE"

// toolgateCommand is `toolgate args...` as a process: this test binary, run as toolgate.
func toolgateCommand(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asToolgate+"=1")
	return cmd
}

// TestConnectRelaysToARunningEdge: `toolgate connect` started by an MCP client, as
// Claude Desktop starts it, relays a tool call to a link of a running dev stack.
func TestConnectRelaysToARunningEdge(t *testing.T) {
	stack := startDevStack(t, t.TempDir())
	t.Cleanup(func() { _ = stack.stop() })
	var link string
	testenv.WaitFor(t, "the echo tool online with its link", func() bool {
		req, _ := http.NewRequest(http.MethodGet, stack.edgeURL+"/tools/echo", nil)
		req.Header.Set("SERVICE_API_KEY", stack.key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var tool struct {
			MCPURL string `json:"mcp_url"`
			Status string `json:"status"`
		}
		if json.NewDecoder(resp.Body).Decode(&tool) == nil && tool.Status == "online" {
			link = tool.MCPURL
		}
		return link != ""
	})

	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "connect-edge-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: toolgateCommand("connect", "--header", "X-Trace: connect-test", link)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"through": "connect"}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) != 1 {
		t.Fatalf("tools/call through toolgate connect: %+v", res)
	}
	if text, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(text.Text, `"through":"connect"`) {
		t.Fatalf("tools/call content: %#v", res.Content[0])
	}
	if err := session.Close(); err != nil {
		t.Errorf("toolgate connect did not exit cleanly when its input closed: %v", err)
	}
}

// TestConnectCommandFails: the command exits non-zero on a link it cannot reach and
// on a header that is not "Name: value", and never shows the link's secret.
func TestConnectCommandFails(t *testing.T) {
	const secret = "lnk_s3cretT0ken"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/mcp/" + secret
	l.Close()
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}` + "\n"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"an unreachable link", []string{"connect", closed}, "connection refused"},
		{"a header without a colon", []string{"connect", "--header", "nocolon", closed}, "connect: header:"},
		{"no link", []string{"connect"}, "accepts 1 arg"},
	} {
		t.Run(tc.name+" exits non-zero, saying why", func(t *testing.T) {
			cmd := toolgateCommand(tc.args...)
			cmd.Stdin = strings.NewReader(initialize)
			var stdout, stderr testenv.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("toolgate connect: %v, want a non-zero exit\nstderr:\n%s", err, &stderr)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr does not say %q:\n%s", tc.want, &stderr)
			}
			if out := stdout.String() + stderr.String(); strings.Contains(out, secret) {
				t.Errorf("output shows the link's secret:\n%s", out)
			}
		})
	}
}
