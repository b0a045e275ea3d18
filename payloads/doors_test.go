package payloads_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/testenv"
)

// blob is n random bytes in base64: the one string of the objects echo is sent.
func blob(t testing.TB, n int) string {
	t.Helper()
	raw := make([]byte, n*3/4+3)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

// client of the demo's echo tool on a stack: an account's key and its links.
type client struct {
	s    *stack
	key  string
	mcp  string // Streamable HTTP (and 2026-07-28)
	sse  string // legacy HTTP+SSE
	http *http.Client
}

func newClient(t *testing.T, s *stack) *client {
	t.Helper()
	s.adminCall(http.MethodPost, "/accounts", `{"id":"acme"}`)
	var key struct{ Key string }
	if err := json.Unmarshal(s.adminCall(http.MethodPost, "/keys", `{"account":"acme"}`), &key); err != nil {
		t.Fatal(err)
	}
	var links struct {
		MCPURL string `json:"mcp_url"`
		SSEURL string `json:"sse_url"`
	}
	if err := json.Unmarshal(s.adminCall(http.MethodPost, "/connections", `{"account":"acme","tool":"echo"}`), &links); err != nil {
		t.Fatal(err)
	}
	c := &client{s: s, key: key.Key, mcp: links.MCPURL, sse: links.SSEURL, http: &http.Client{Timeout: 2 * time.Minute}}
	testenv.WaitFor(t, "echo answers", func() bool {
		status, _, _ := c.rest(t, "/tool-call/echo/echo", []byte(`{}`))
		return status == http.StatusOK
	})
	return c
}

// rest posts body and returns the status, the answer's sha256 and its length,
// reading the answer as it comes.
func (c *client) rest(t testing.TB, path string, body []byte) (int, [32]byte, int64) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, c.s.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("SERVICE_API_KEY", c.key)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return resp.StatusCode, [32]byte(h.Sum(nil)), n
}

// echoed is the blob of the object echo answered with, from a tools/call result.
func echoed(t testing.TB, text string) [32]byte {
	t.Helper()
	var got struct{ Blob string }
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("echo's text is not its object: %v", err)
	}
	return sha256.Sum256([]byte(got.Blob))
}

// goSDK calls echo with the go-sdk over tr and returns the sha256 of the blob echoed.
func (c *client) goSDK(t *testing.T, tr mcp.Transport, b string) [32]byte {
	t.Helper()
	return echoed(t, c.goSDKCall(t, tr, "echo", map[string]any{"blob": b}))
}

// goSDKCall calls the tool name with args with the go-sdk over tr and returns the
// text of the result's one content.
func (c *client) goSDKCall(t *testing.T, tr mcp.Transport, name string, args map[string]any) string {
	t.Helper()
	// 50 MiB twice over (echo's text and structuredContent), decoded under the race
	// detector on a busy machine, takes minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl := mcp.NewClient(&mcp.Implementation{Name: "payloads-test", Version: "1"}, nil)
	cs, err := cl.Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		b, _ := json.Marshal(res.Content)
		t.Fatalf("%s failed: %.300s", name, b)
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s's content is a %T", name, res.Content[0])
	}
	return text.Text
}

// rev20260728 calls echo as a 2026-07-28 client does: one POST, no session.
func (c *client) rev20260728(t *testing.T, b string) [32]byte {
	t.Helper()
	return echoed(t, c.rev20260728Call(t, "echo", `{"blob":"`+b+`"}`))
}

// rev20260728Call calls the tool name with args (a JSON object) as a 2026-07-28
// client does, and returns the text of the result's one content.
func (c *client) rev20260728Call(t *testing.T, name, args string) string {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"` + name + `","arguments":` + args + `}}`
	req, _ := http.NewRequest(http.MethodPost, c.mcp, bytes.NewReader([]byte(body)))
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name} {
		req.Header.Set(k, v)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rpc struct {
		ID     json.RawMessage
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
		Error json.RawMessage
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("2026-07-28: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		if err := json.NewDecoder(resp.Body).Decode(&rpc); err != nil {
			t.Fatalf("2026-07-28: %v", err)
		}
	} else { // the call's stream: its last event is the answer
		r := bufio.NewReaderSize(resp.Body, 1<<20)
		for string(rpc.ID) != "7" {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("2026-07-28: the stream ended without the answer: %v", err)
			}
			if data, ok := strings.CutPrefix(line, "data: "); ok {
				_ = json.Unmarshal([]byte(data), &rpc)
			}
		}
	}
	if rpc.Error != nil || rpc.Result.IsError || len(rpc.Result.Content) == 0 {
		t.Fatalf("2026-07-28: error %s, content %d", rpc.Error, len(rpc.Result.Content))
	}
	return rpc.Result.Content[0].Text
}

// TestLargePayloadsThroughEveryDoor: the demo's echo given 1, 10 and 50 MiB answers
// them intact (sha256 compared) over REST, the direct API, and MCP on Streamable
// HTTP, legacy HTTP+SSE (whose answers go through the event log) and 2026-07-28; and
// the edge relaying a 50 MiB call (its body in, its reply out) grows its peak RSS by
// less than 16 MiB. The stack runs as processes of the binary, so its speed is not the
// race detector's, and the edge's memory is its own. Where large payloads are not run
// (see large), only 1 MiB goes through the MCP doors.
func TestLargePayloadsThroughEveryDoor(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the edge's peak RSS is read from /proc")
	}
	s := startStack(t)
	c := newClient(t, s)
	sizes := []int{1 << 20, 10 << 20, 50 << 20}
	if notLarge() != "" {
		sizes = sizes[:1]
	}

	t.Run("REST and the direct API, and the edge's memory", func(t *testing.T) {
		large(t, "50 MiB each way")
		for _, n := range sizes {
			body := []byte(`{"blob":"` + blob(t, n-len(`{"blob":""}`)) + `"}`)
			want := sha256.Sum256(body)
			for _, path := range []string{"/tools/echo/echo", "/tool-call/echo/echo"} {
				relay := func() {
					status, sum, got := c.rest(t, path, body)
					if status != http.StatusOK || sum != want || got != int64(len(body)) {
						t.Fatalf("%s, %d bytes: %d, %d bytes back, intact %v", path, n, status, got, sum == want)
					}
				}
				if n == 50<<20 && path == "/tool-call/echo/echo" {
					runtime.GC() // the test's own garbage is not the edge's, but keeps the machine calm
					s.boundPeak(t, "a call of 50 MiB each way", relay)
				} else {
					relay()
				}
			}
		}
	})
	for _, door := range []struct {
		name string
		call func(t *testing.T, b string) [32]byte
	}{
		{"MCP Streamable HTTP (go-sdk)", func(t *testing.T, b string) [32]byte {
			return c.goSDK(t, &mcp.StreamableClientTransport{Endpoint: c.mcp}, b)
		}},
		{"MCP legacy HTTP+SSE (go-sdk)", func(t *testing.T, b string) [32]byte {
			return c.goSDK(t, &mcp.SSEClientTransport{Endpoint: c.sse, MaxEventSize: -1}, b)
		}},
		{"MCP 2026-07-28", c.rev20260728},
	} {
		t.Run(door.name, func(t *testing.T) {
			for _, n := range sizes {
				b := blob(t, n)
				if got := door.call(t, b); got != sha256.Sum256([]byte(b)) {
					t.Fatalf("%d bytes: the blob came back changed", n)
				}
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
