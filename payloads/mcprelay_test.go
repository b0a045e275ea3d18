package payloads_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tsclient"
	"github.com/toolgate/toolgate/workers"
)

// seededBlob is n bytes of base64 made from seed: the worker and the test make the
// same one, so the test knows what the answer must be without sending it.
func seededBlob(seed uint64, n int) string {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	raw := make([]byte, n*3/4+3)
	_, _ = rand.NewChaCha8(key).Read(raw)
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

// runBlobs runs, in the test's process on the stack's NATS, the tool blobs: its
// method make answers {"blob": seededBlob(seed, n)}, from a request of a few bytes.
func runBlobs(t *testing.T, s *stack) {
	t.Helper()
	runWorker(t, s, workers.Tool{ID: "blobs", Title: "Blobs", Version: "1.0.0", Description: "Makes large answers."}, workers.Method{
		Name: "make", Description: "Answers with n bytes of base64 made from seed.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"seed":{"type":"integer"}},"required":["n","seed"]}`),
		Handler: func(_ context.Context, c *workers.Call) (any, error) {
			var in struct{ N, Seed uint64 }
			if err := json.Unmarshal(c.Params, &in); err != nil {
				return nil, err
			}
			return json.RawMessage(`{"blob":"` + seededBlob(in.Seed, int(in.N)) + `"}`), nil
		},
	})
}

// runWorker runs, in the test's process on the stack's NATS, tool with its one
// method m, until the test ends.
func runWorker(t *testing.T, s *stack, tool workers.Tool, m workers.Method) {
	t.Helper()
	nc, err := nats.Connect(s.nats)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := workers.New(nc, tool)
	w.Handle(m)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := w.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("worker: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// TestLargeMCPResultsRelayedAsRead: a tools/call result of 50 MiB, made by the tool
// from a request of a few bytes, reaches an MCP client intact (sha256 compared) on
// Streamable HTTP in a session (mcp-go, answered on a stream kept in the event log;
// and a client that takes only JSON), legacy HTTP+SSE (go-sdk, the session's stream in
// the event log) and 2026-07-28 (go-sdk), and the edge relaying it grows its peak RSS
// by less than 16 MiB on each: it writes the response's frame and the result's bytes
// into it as it reads them from the payloads bucket, never holding the result whole.
// Each transport has an edge of its own, measured first, before anything else it
// relayed left its heap larger than it needs. 1 and 10 MiB follow, compared too.
func TestLargeMCPResultsRelayedAsRead(t *testing.T) {
	skipPeakOf50MiB(t)
	for _, door := range mcpDoors {
		t.Run(door.name, func(t *testing.T) {
			// The tool runs in this test's process, race detector on, making 50 MiB
			// answers: on a loaded machine its word on the call it holds (every
			// 250ms) can come later than the default second, and the call would be
			// given up as lost. What is measured here is the relay, so the edge waits
			// longer, as --call-lost-after lets a deployment with such workers do.
			s := startStack(t, "--call-lost-after", "15s")
			c := blobsClient(t, s)
			for i, n := range []int{50 << 20, 1 << 20, 10 << 20} {
				seed := uint64(i + 1)
				want := sha256.Sum256([]byte(seededBlob(seed, n)))
				relay := func() {
					text := door.call(c, t, "make", map[string]any{"n": n, "seed": seed})
					if got := echoed(t, text); got != want {
						t.Fatalf("%d bytes: the blob came back changed", n)
					}
				}
				if n == 50<<20 {
					s.boundPeak(t, "a result of 50 MiB", relay)
				} else {
					relay()
				}
			}
		})
	}
}

// skipPeakOf50MiB skips a test that measures the edge's peak RSS while 50 MiB go
// through each MCP transport: where /proc cannot tell it, or in a short run.
func skipPeakOf50MiB(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the edge's peak RSS is read from /proc")
	}
	large(t, "50 MiB through each transport")
}

// mcpDoors are the MCP clients a large call is made with: each calls the tool name
// of c with args and returns the text of the result's one content.
var mcpDoors = []struct {
	name string
	call func(c *client, t *testing.T, name string, args map[string]any) string
}{
	{"Streamable HTTP session (mcp-go)", (*client).mcpGoCall},
	{"Streamable HTTP session, JSON only", (*client).jsonOnlyCall},
	{"Streamable HTTP session (TypeScript SDK)", (*client).tsCall},
	{"legacy HTTP+SSE (go-sdk)", func(c *client, t *testing.T, name string, args map[string]any) string {
		return c.goSDKCall(t, &mcp.SSEClientTransport{Endpoint: c.sse, MaxEventSize: -1}, name, args)
	}},
	{"2026-07-28 (go-sdk)", func(c *client, t *testing.T, name string, args map[string]any) string {
		return c.goSDKCall(t, &mcp.StreamableClientTransport{Endpoint: c.mcp}, name, args)
	}},
}

// blobsClient is a client of the stack's account with links to the tool blobs, which
// it runs, once it answers.
func blobsClient(t *testing.T, s *stack) *client {
	t.Helper()
	c := newClient(t, s)
	runBlobs(t, s)
	c.linkTo(t, "blobs", "/tool-call/blobs/make", `{"n":1,"seed":1}`)
	return c
}

// linkTo gives c links to tool instead of echo's, once a call of path with body
// answers.
func (c *client) linkTo(t *testing.T, tool, path, body string) {
	t.Helper()
	var links struct {
		MCPURL string `json:"mcp_url"`
		SSEURL string `json:"sse_url"`
	}
	if err := json.Unmarshal(c.s.adminCall(http.MethodPost, "/connections", `{"account":"acme","tool":"`+tool+`"}`), &links); err != nil {
		t.Fatal(err)
	}
	c.mcp, c.sse = links.MCPURL, links.SSEURL
	testenv.WaitFor(t, tool+" answers", func() bool {
		status, _, _ := c.rest(t, path, []byte(body))
		return status == http.StatusOK
	})
}

// mcpGoCall calls the tool name with args with mcp-go over Streamable HTTP, in a
// session (2025-11-25), and returns the text of the result's one content.
func (c *client) mcpGoCall(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	tr, err := mcpgotransport.NewStreamableHTTP(c.mcp)
	if err != nil {
		t.Fatal(err)
	}
	cl := mcpgo.NewClient(tr, mcpgo.WithProtocolVersion("2025-11-25"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, mcpgotypes.InitializeRequest{Params: mcpgotypes.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcpgotypes.Implementation{Name: "payloads-test", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.CallTool(ctx, mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("%s failed: %d contents", name, len(res.Content))
	}
	text, ok := res.Content[0].(mcpgotypes.TextContent)
	if !ok {
		t.Fatalf("%s's content is a %T", name, res.Content[0])
	}
	return text.Text
}

// jsonOnlyCall calls the tool name with args on Streamable HTTP as a client that
// takes only JSON answers, in a session of its own, and returns the text of the
// result's one content.
func (c *client) jsonOnlyCall(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	post := func(session, body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, c.mcp, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"payloads-test","version":"1"}}}`)
	resp.Body.Close()
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
	}
	post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
	a, _ := json.Marshal(args)
	resp = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"`+name+`","arguments":`+string(a)+`}}`)
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "application/json" {
		t.Fatalf("tools/call: %d %s", resp.StatusCode, ct)
	}
	var rpc struct {
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
		Error json.RawMessage
	}
	if err := json.NewDecoder(resp.Body).Decode(&rpc); err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	if rpc.Error != nil || rpc.Result.IsError || len(rpc.Result.Content) == 0 {
		t.Fatalf("tools/call: error %s, content %d", rpc.Error, len(rpc.Result.Content))
	}
	return rpc.Result.Content[0].Text
}

// tsCall calls the tool name with args with the TypeScript SDK over Streamable HTTP,
// in a session (2025-11-25), and returns the text of the result's one content.
func (c *client) tsCall(t *testing.T, name string, args map[string]any) string {
	t.Helper()
	ts := tsclient.HTTP(t, c.mcp, "2025-11-25")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	raw, err := ts.Do(ctx, map[string]any{"op": "call", "name": name, "args": args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var res struct {
		Text    string // the text of the result's contents
		IsError bool
	}
	if err := json.Unmarshal(raw, &res); err != nil || res.IsError {
		t.Fatalf("%s: %v, error %v", name, err, res.IsError)
	}
	return res.Text
}
