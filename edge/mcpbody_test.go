package edge_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgotypes "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers"
)

// echoText is the text of a tools/call result of echo, which is the arguments it
// was given.
func echoSum(t *testing.T, text string) [32]byte {
	t.Helper()
	var got struct{ Blob string }
	if err := json.Unmarshal([]byte(text), &got); err != nil {
		t.Fatalf("echo's text is not its object: %.200s", text)
	}
	return sha256.Sum256([]byte(got.Blob))
}

// goSDKEcho calls echo with args over tr with the go-sdk; it returns the result.
func goSDKEcho(t *testing.T, tr mcp.Transport, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "mcpbody-test", Version: "1"}, nil).Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// mcpGoEcho calls echo with args over tr with mcp-go, in a session; it returns the
// text of the result's one content.
func mcpGoEcho(t *testing.T, tr mcpgotransport.Interface, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl := mcpgo.NewClient(tr)
	if err := cl.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := cl.Initialize(ctx, mcpgotypes.InitializeRequest{Params: mcpgotypes.InitializeParams{
		ProtocolVersion: "2025-11-25", ClientInfo: mcpgotypes.Implementation{Name: "mcpbody-test", Version: "1"},
	}}); err != nil {
		t.Fatal(err)
	}
	res, err := cl.CallTool(ctx, mcpgotypes.CallToolRequest{Params: mcpgotypes.CallToolParams{Name: "echo", Arguments: args}})
	if err != nil {
		t.Fatal(err)
	}
	if res.IsError || len(res.Content) == 0 {
		t.Fatalf("echo failed: %d contents", len(res.Content))
	}
	text, ok := res.Content[0].(mcpgotypes.TextContent)
	if !ok {
		t.Fatalf("echo's content is a %T", res.Content[0])
	}
	return text.Text
}

// statelessEcho posts one 2026-07-28 tools/call of echo with args, a JSON object as
// sent, to link, taking only JSON; it returns the status and the JSON-RPC message.
func statelessEcho(t *testing.T, e *env, link string, args []byte) (int, []byte) {
	t.Helper()
	var body bytes.Buffer
	body.WriteString(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":`)
	body.Write(args)
	body.WriteString(`}}`)
	req, _ := http.NewRequest(http.MethodPost, link, &body)
	for k, v := range map[string]string{"Content-Type": "application/json", "Accept": "application/json",
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "echo"} {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	if _, err := out.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out.Bytes()
}

// statelessText is the text of the one content of a stateless tools/call's result,
// and whether it is an error.
func statelessText(t *testing.T, msg []byte) (string, bool) {
	t.Helper()
	var rpc struct {
		Result struct {
			Content []struct{ Text string }
			IsError bool
		}
		Error json.RawMessage
	}
	if err := json.Unmarshal(msg, &rpc); err != nil || rpc.Error != nil || len(rpc.Result.Content) == 0 {
		t.Fatalf("not a result: %.300s", msg)
	}
	return rpc.Result.Content[0].Text, rpc.Result.IsError
}

// noToolObjectsLeft waits until the payloads bucket holds nothing of tool's: the
// event log's own copies (under ~events/) stay for a client's replay.
func (e *env) noToolObjectsLeft(t *testing.T, tool string) {
	t.Helper()
	testenv.WaitFor(t, "no object of "+tool+" left in the payloads bucket", func() bool {
		obj, err := e.gw.Payloads().Bucket().List(testenv.Context(t))
		if err != nil && !errors.Is(err, jetstream.ErrNoObjectsFound) {
			return false
		}
		for _, o := range obj {
			if strings.HasPrefix(o.Name, tool+"/") {
				return false
			}
		}
		return true
	})
}

// TestLargeMCPArguments: a tools/call whose arguments are past one bus message (3
// MiB) reaches echo intact (sha256 compared) from the go-sdk on Streamable HTTP and
// legacy HTTP+SSE, from mcp-go on both, and from a 2026-07-28 client; the edge
// stores the arguments in the payloads bucket as they arrive and removes them once
// the call is over, so nothing is left.
func TestLargeMCPArguments(t *testing.T) {
	e := newEnv(t, withMCP())
	e.runEcho(t)
	e.account("acme", registry.Limits{})
	link := e.url + "/mcp/" + e.signer.Token("acme", "echo", e.connect("acme", "echo").LinkNonce)
	args := jsonBody(t, 3<<20)
	var obj map[string]any
	if err := json.Unmarshal(args, &obj); err != nil {
		t.Fatal(err)
	}
	want := sha256.Sum256([]byte(obj["blob"].(string)))
	check := func(t *testing.T, text string) {
		t.Helper()
		if echoSum(t, text) != want {
			t.Fatal("the blob came back changed")
		}
	}
	t.Run("go-sdk, Streamable HTTP", func(t *testing.T) {
		res := goSDKEcho(t, &mcp.StreamableClientTransport{Endpoint: link}, obj)
		if res.IsError || len(res.Content) == 0 {
			t.Fatalf("echo failed: %+v", res.Content)
		}
		check(t, res.Content[0].(*mcp.TextContent).Text)
	})
	t.Run("go-sdk, legacy HTTP+SSE", func(t *testing.T) {
		res := goSDKEcho(t, &mcp.SSEClientTransport{Endpoint: link + "/sse", MaxEventSize: -1}, obj)
		if res.IsError || len(res.Content) == 0 {
			t.Fatalf("echo failed: %+v", res.Content)
		}
		check(t, res.Content[0].(*mcp.TextContent).Text)
	})
	t.Run("mcp-go, Streamable HTTP", func(t *testing.T) {
		tr, err := mcpgotransport.NewStreamableHTTP(link)
		if err != nil {
			t.Fatal(err)
		}
		check(t, mcpGoEcho(t, tr, obj))
	})
	t.Run("mcp-go, legacy HTTP+SSE", func(t *testing.T) {
		tr, err := mcpgotransport.NewSSE(link + "/sse")
		if err != nil {
			t.Fatal(err)
		}
		check(t, mcpGoEcho(t, tr, obj))
	})
	t.Run("2026-07-28", func(t *testing.T) {
		status, msg := statelessEcho(t, e, link, args)
		text, isError := statelessText(t, msg)
		if status != http.StatusOK || isError {
			t.Fatalf("%d %.300s", status, msg)
		}
		check(t, text)
	})
	e.noToolObjectsLeft(t, "echo")
}

// TestLargeMCPArgumentsLimit: a tools/call's arguments of exactly the account's
// payload limit pass, and one byte more is payload_too_large, an isError result as
// the README's table has it for MCP (its text naming the limit); arguments that break
// off as invalid JSON (a parse error), a message that names its arguments twice (the
// same) and another method's message past one message (answered as it always was)
// leave nothing in the payloads bucket either.
func TestLargeMCPArgumentsLimit(t *testing.T) {
	e := newEnv(t, withMCP())
	e.runEcho(t)
	const limit = 1<<20 + 300<<10 // past one message
	e.account("acme", registry.Limits{PayloadBytes: limit})
	link := e.url + "/mcp/" + e.signer.Token("acme", "echo", e.connect("acme", "echo").LinkNonce)
	testenv.WaitFor(t, "the edge sees the account's limit", func() bool { return e.gw.PayloadLimit("acme") == limit })

	at := jsonBody(t, limit)
	status, msg := statelessEcho(t, e, link, at)
	if text, isError := statelessText(t, msg); status != http.StatusOK || isError || !bytes.Equal([]byte(text), at) {
		t.Fatalf("arguments of the limit's %d bytes: %d, error %v, %.300s", limit, status, isError, text)
	}
	status, msg = statelessEcho(t, e, link, jsonBody(t, limit+1))
	if text, isError := statelessText(t, msg); status != http.StatusOK || !isError || !strings.Contains(text, fmt.Sprintf("past the %d bytes", limit)) {
		t.Fatalf("one byte past the limit: %d, error %v, %.300s", status, isError, text)
	}
	over := jsonBody(t, limit+1)
	var obj map[string]any
	if err := json.Unmarshal(over, &obj); err != nil {
		t.Fatal(err)
	}
	res := goSDKEcho(t, &mcp.StreamableClientTransport{Endpoint: link}, obj)
	if text := res.Content[0].(*mcp.TextContent).Text; !res.IsError || !strings.Contains(text, fmt.Sprintf("past the %d bytes", limit)) {
		t.Fatalf("go-sdk, one byte past the limit: %.300s", text)
	}
	e.noToolObjectsLeft(t, "echo")

	broken := append(jsonBody(t, limit-10)[:limit-12], "\xff\"}"...)
	if status, msg := statelessEcho(t, e, link, broken); status != http.StatusBadRequest || !strings.Contains(string(msg), "-32700") {
		t.Fatalf("arguments not UTF-8 at their end: %d %.300s", status, msg)
	}
	// Another method's message is put back whole, and its stored part removed.
	ping := `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"arguments":` + string(at) + `}}`
	if r := e.do(http.MethodPost, link[len(e.url):], ping, "Accept", "application/json", "Mcp-Protocol-Version", "2026-07-28"); r.status != http.StatusOK || !strings.Contains(string(r.body), `"result":{}`) {
		t.Fatalf("a ping of %d bytes: %d %.300s", len(ping), r.status, r.body)
	}
	twice := append(append([]byte(nil), at[:len(at)-1]...), `},"arguments":{}`...)
	twice = twice[:len(twice)-1]
	if status, msg := statelessEcho(t, e, link, twice); status != http.StatusBadRequest || !strings.Contains(string(msg), "-32700") {
		t.Fatalf("arguments given twice: %d %.300s", status, msg)
	}
	e.noToolObjectsLeft(t, "echo")
}

// TestDeclaredMCPBodiesCostOnlyWhatArrives: a thousand MCP clients that POST a
// tools/call declaring a megabyte, or the 64 MiB a call's request may have, and send
// its first bytes cost the edge what arrived and a bounded step more, as REST callers
// do (TestDeclaredBodiesCostOnlyWhatArrives): no buffer the size of the declared
// length, and no write to the payloads bucket, is begun ahead of the bytes.
func TestDeclaredMCPBodiesCostOnlyWhatArrives(t *testing.T) {
	const (
		callers = 1000
		perConn = 64 << 10
	)
	e := newEnv(t, withMCP(), withEdge(func(c *edge.Config) { c.ReadBodyTimeout = 10 * time.Minute }))
	e.runEcho(t)
	e.account("acme", registry.Limits{})
	path := "/mcp/" + e.signer.Token("acme", "echo", e.connect("acme", "echo").LinkNonce)
	// A call first, so that what the edge makes once is made before the measure.
	if status, msg := statelessEcho(t, e, e.url+path, []byte(`{"warm":true}`)); status != http.StatusOK {
		t.Fatalf("warm-up call: %d %s", status, msg)
	}
	e.client.CloseIdleConnections()
	first := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"pad":"xxxxxx`
	for _, declared := range []int{1_000_000, int(edge.DefaultMaxPayloadBytes)} {
		boundTricklers(t, callers, declared, perConn, "github.com/toolgate/toolgate/sse/core.(*Server).readHead", func() net.Conn {
			return e.trickle("POST "+path, declared, first, "Accept", "application/json",
				"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "echo")
		})
	}
}

// TestLargeMCPArgumentsInHeaders: a 2026-07-28 tools/call past one message whose
// method mirrors an argument in an Mcp-Param header has the header checked against
// its arguments, which are then held whole: the header that matches passes and the
// tool gets the arguments intact; one that does not is a header mismatch (400); and
// nothing is left in the payloads bucket.
func TestLargeMCPArgumentsInHeaders(t *testing.T) {
	e := newEnv(t, withMCP())
	w := workers.New(testenv.Conn(t, e.nc.ConnectedUrl()), workers.Tool{ID: "regions"}, workers.WithLogger(testenv.Logger(t)))
	w.Handle(workers.Method{
		Name: "put", Description: "Sums up a blob put in a region.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},"blob":{"type":"string"}}}`),
		Handler: func(_ context.Context, c *workers.Call) (any, error) {
			var in struct{ Region, Blob string }
			if err := json.Unmarshal(c.Params, &in); err != nil {
				return nil, err
			}
			return map[string]any{"region": in.Region, "sha256": fmt.Sprintf("%x", sha256.Sum256([]byte(in.Blob)))}, nil
		},
	})
	e.runWorker(t, w, "regions", make(chan struct{}))
	e.account("acme", registry.Limits{})
	path := "/mcp/" + e.signer.Token("acme", "regions", e.connect("acme", "regions").LinkNonce)
	blob := string(jsonBody(t, 2<<20)[len(`{"blob":"`) : 2<<20-len(`"}`)])
	body := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
		`"io.modelcontextprotocol/clientCapabilities":{}},"name":"put","arguments":{"region":"eu","blob":"` + blob + `"}}}`
	post := func(region string) result {
		return e.do(http.MethodPost, path, body, "Accept", "application/json", "Mcp-Protocol-Version", "2026-07-28",
			"Mcp-Method", "tools/call", "Mcp-Name", "put", "Mcp-Param-Region", region)
	}
	want := fmt.Sprintf("%x", sha256.Sum256([]byte(blob)))
	if r := post("eu"); r.status != http.StatusOK || !strings.Contains(string(r.body), want) || strings.Contains(string(r.body), `"isError":true`) {
		t.Fatalf("the header that matches: %d %.300s", r.status, r.body)
	}
	if r := post("us"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "Header mismatch") {
		t.Fatalf("a header that does not match: %d %.300s", r.status, r.body)
	}
	e.noToolObjectsLeft(t, "regions")
}
