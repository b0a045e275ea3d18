package edge_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// TestFailuresReadTheSameEverywhere walks failures of one table (gateway/errors.go)
// through every door a call can take: REST, the direct tool API, Streamable HTTP,
// legacy SSE and 2026-07-28. Over HTTP the envelope carries the kind's code, status
// and sentence; over MCP the same sentence comes as the isError result's text a model
// reads, or as the JSON-RPC error's message with the kind's code.
func TestFailuresReadTheSameEverywhere(t *testing.T) {
	e := newEnv(t, withMCP())
	// One call of kit's block at a time, and one is held running: the next is over
	// the account's quota.
	key := e.account("acme", registry.Limits{Quotas: []registry.Quota{{Scope: registry.QuotaAccount, Tool: "kit", Method: "block", Concurrent: 1}}})
	kit := registry.Tool{ID: "kit", Title: "Kit", Methods: []registry.Method{
		{Name: "echo", InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)},
		{Name: "fail"},
		{Name: "hang", Timeout: wire.Duration(300 * time.Millisecond)},
		{Name: "block"},
	}}
	blocked := make(chan *nats.Msg, 1)
	e.serve(kit, func(method string, m *nats.Msg) {
		switch method {
		case "echo":
			echo(method, m)
		case "fail":
			respondError(m, "no_luck", "the kit failed on purpose")
		case "block":
			blocked <- m
		}
	})
	idle := registry.Tool{ID: "idle", Title: "Idle", Methods: []registry.Method{{Name: "nap"}}}
	e.deploy(idle)
	links := map[string]string{}
	for _, tool := range []string{"kit", "idle"} {
		conn := e.connect("acme", tool)
		links[tool] = e.signer.Token("acme", tool, conn.LinkNonce)
	}
	held := e.callInBackground(key, "kit", "block", `{}`)
	running := <-blocked
	t.Cleanup(func() {
		echo("block", running)
		<-held
	})

	for _, tc := range []struct {
		name, tool, method, params string
		kind                       *gateway.Kind
	}{
		{"parameters against the schema", "kit", "echo", `{}`, gateway.KindInvalidParams},
		{"the tool's own error", "kit", "fail", `{}`, gateway.KindToolError},
		{"a tool that does not answer in time", "kit", "hang", `{}`, gateway.KindToolTimeout},
		{"a tool no worker serves", "idle", "nap", `{}`, gateway.KindToolUnavailable},
		{"a method the tool lacks", "kit", "unsend", `{}`, gateway.KindMethodNotFound},
		{"a call over the account's quota", "kit", "block", `{}`, gateway.KindQuotaExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, path := range []string{"/tool-call/", "/tools/"} {
				r := e.do(http.MethodPost, path+tc.tool+"/"+tc.method, tc.params, "SERVICE_API_KEY", key)
				got := r.expect(t, tc.kind.Status, tc.kind.Code)
				if got.Message != tc.kind.Text {
					t.Errorf("%s: message %q, want %q", path, got.Message, tc.kind.Text)
				}
			}
			call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tc.method + `","arguments":` + tc.params + `}}`
			base := e.url + "/mcp/" + links[tc.tool]
			answers := map[string][]byte{
				"streamable": streamableCall(t, base, call),
				"legacy":     legacyCall(t, base, call),
				"2026-07-28": statelessCall(t, base, tc.method, tc.params),
			}
			for transport, answer := range answers {
				checkMCPFailure(t, transport, answer, tc.method, tc.kind)
			}
		})
	}
}

// checkMCPFailure: an isError result whose text is the method and the kind's
// sentence, or a JSON-RPC error of the kind's code whose message starts with it.
func checkMCPFailure(t *testing.T, transport string, answer []byte, method string, k *gateway.Kind) {
	t.Helper()
	var msg struct {
		Result *struct {
			IsError bool `json:"isError"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"result"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(answer, &msg); err != nil {
		t.Fatalf("%s: not a JSON-RPC answer: %s", transport, answer)
	}
	if k.InResult {
		if msg.Result == nil || !msg.Result.IsError || len(msg.Result.Content) == 0 ||
			!strings.HasPrefix(msg.Result.Content[0].Text, method+": "+k.Text) {
			t.Errorf("%s: want an isError result reading %q, got %s", transport, method+": "+k.Text, answer)
		}
		return
	}
	if msg.Error == nil || msg.Error.Code != k.RPC || !strings.HasPrefix(msg.Error.Message, k.Text) {
		t.Errorf("%s: want JSON-RPC error %d reading %q, got %s", transport, k.RPC, k.Text, answer)
	}
}

// mcpPost sends one MCP message and returns the JSON-RPC answer in its body, a JSON
// body or the first message event of a stream.
func mcpPost(t testing.TB, url string, header map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp, nextData(t, bufio.NewReader(resp.Body))
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// nextData reads a stream up to its next event's data.
func nextData(t testing.TB, r *bufio.Reader) []byte {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before an event: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok && strings.HasPrefix(d, "{") {
			return []byte(d)
		}
	}
}

func streamableCall(t *testing.T, url, call string) []byte {
	t.Helper()
	resp, _ := mcpPost(t, url, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize: %d, no session", resp.StatusCode)
	}
	h := map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}
	mcpPost(t, url, h, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	_, answer := mcpPost(t, url, h, call)
	return answer
}

func legacyCall(t *testing.T, base, call string) []byte {
	t.Helper()
	resp, err := http.Get(base + "/sse")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	stream := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := stream.ReadString('\n')
		if err != nil {
			t.Fatalf("legacy stream: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			endpoint = d
		}
	}
	if !strings.HasPrefix(endpoint, "http") {
		endpoint = base[:strings.Index(base, "/mcp/")] + endpoint
	}
	for _, m := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		call,
	} {
		if r, _ := mcpPost(t, endpoint, nil, m); r.StatusCode != http.StatusAccepted {
			t.Fatalf("legacy POST: %d", r.StatusCode)
		}
		if strings.Contains(m, `"id":1,`) {
			nextData(t, stream) // the initialize result
		}
	}
	return nextData(t, stream)
}

func statelessCall(t *testing.T, url, method, params string) []byte {
	t.Helper()
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`
	body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{` + meta + `,"name":"` + method + `","arguments":` + params + `}}`
	_, answer := mcpPost(t, url, map[string]string{
		"Mcp-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": method,
	}, body)
	return answer
}
