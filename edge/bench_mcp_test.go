package edge_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkMCPToolsCall measures one MCP tools/call through a real edge over TCP with
// what toolgate edge runs on every call (the link's check, the schema, the shared
// rate bucket, metrics, the access log and the audit trail), on Streamable HTTP and
// on the legacy transport, whose answer comes back on the session's stream.
// cpu-µs/op is the whole process's CPU per call (callers, edge, NATS server, worker).
func BenchmarkMCPToolsCall(b *testing.B) {
	e := newEnv(b, withMCP(), withAudit())
	e.account("bench", registry.Limits{Rate: 1e9, Burst: 1 << 30})
	e.serve(emailTool, echo)
	conn := e.connect("bench", "email")
	base := e.url + "/mcp/" + e.signer.Token("bench", "email", conn.LinkNonce)
	call := func(id int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"send_email","arguments":%s}}`, id, goodEmail)
	}

	b.Run("Streamable HTTP", func(b *testing.B) {
		resp, _ := mcpPost(b, base, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
		session := resp.Header.Get("Mcp-Session-Id")
		if session == "" {
			b.Fatalf("initialize: %d, no session", resp.StatusCode)
		}
		mcpPost(b, base, map[string]string{"Mcp-Session-Id": session, "Mcp-Protocol-Version": "2025-11-25"}, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		id := 1
		b.ReportAllocs()
		cpu0 := testenv.CPUTime(b)
		for b.Loop() {
			id++
			req, _ := http.NewRequest(http.MethodPost, base, bytes.NewReader(call(id)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
			resp, err := e.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(`"structuredContent"`)) {
				b.Fatalf("tools/call: %d %s", resp.StatusCode, body)
			}
		}
		testenv.ReportCPU(b, cpu0)
	})

	b.Run("legacy HTTP+SSE", func(b *testing.B) {
		stream, endpoint := openLegacy(b, base)
		id := 1
		b.ReportAllocs()
		cpu0 := testenv.CPUTime(b)
		for b.Loop() {
			id++
			req, _ := http.NewRequest(http.MethodPost, endpoint, bytes.NewReader(call(id)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := e.client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Fatalf("POST: %d", resp.StatusCode)
			}
			if data := nextData(b, stream); !bytes.Contains(data, fmt.Appendf(nil, `"id":%d,`, id)) || !bytes.Contains(data, []byte(`"structuredContent"`)) {
				b.Fatalf("tools/call answered %s", data)
			}
		}
		testenv.ReportCPU(b, cpu0)
	})
}

// openLegacy opens a legacy session at base and initializes it: its stream, and the
// endpoint its messages are posted to.
func openLegacy(b *testing.B, base string) (*bufio.Reader, string) {
	resp, err := http.Get(base + "/sse")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { resp.Body.Close() })
	stream := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := stream.ReadString('\n')
		if err != nil {
			b.Fatalf("legacy stream: %v", err)
		}
		if d, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), "data: "); ok {
			endpoint = d
		}
	}
	if !strings.HasPrefix(endpoint, "http") {
		endpoint = base[:strings.Index(base, "/mcp/")] + endpoint
	}
	if r, _ := mcpPost(b, endpoint, nil, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`); r.StatusCode != http.StatusAccepted {
		b.Fatalf("initialize: %d", r.StatusCode)
	}
	nextData(b, stream)
	if r, _ := mcpPost(b, endpoint, nil, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		b.Fatalf("initialized: %d", r.StatusCode)
	}
	return stream, endpoint
}
