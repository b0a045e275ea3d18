package connect_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

var (
	bannerKey  = regexp.MustCompile(`^    (tg_[0-9A-Za-z]{43})$`)
	bannerEdge = regexp.MustCompile(`^  edge\s+(http://\S+)$`)
)

// runDev starts `toolgate dev` as a process on free ports and returns its edge URL
// and the key it printed.
func runDev(t *testing.T) (edgeURL, key string) {
	t.Helper()
	cmd := exec.Command(toolgateBin, "dev", "--data", t.TempDir(), "--nats-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	})
	found := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := bannerEdge.FindStringSubmatch(sc.Text()); m != nil {
				edgeURL = m[1]
			}
			if m := bannerKey.FindStringSubmatch(sc.Text()); m != nil {
				key = m[1]
				close(found)
			}
		}
		io.Copy(io.Discard, out)
	}()
	select {
	case <-found:
	case <-time.After(testenv.Patience):
		t.Fatalf("toolgate dev printed no key within %v", testenv.Patience)
	}
	return edgeURL, key
}

func TestConnectRelaysToARunningEdge(t *testing.T) {
	edgeURL, key := runDev(t)
	var link string
	deadline := time.Now().Add(10 * time.Second)
	for link == "" && time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, edgeURL+"/tools/echo", nil)
		req.Header.Set("SERVICE_API_KEY", key)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var tool struct {
				MCPURL string `json:"mcp_url"`
				Status string `json:"status"`
			}
			if json.NewDecoder(resp.Body).Decode(&tool) == nil && tool.Status == "online" {
				link = tool.MCPURL
			}
			resp.Body.Close()
		}
		if link == "" {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if link == "" {
		t.Fatal("the echo tool never came online")
	}

	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "connect-edge-test", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcp.CommandTransport{Command: exec.Command(toolgateBin, "connect", link)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer session.Close()
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
}
