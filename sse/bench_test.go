package sse_test

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkToolsCall measures one MCP tools/call of an open session through a real
// edge over TCP, real NATS and a worker: on Streamable HTTP as clients send it
// (either answer accepted), with a client that takes only streams, and on the
// legacy transport, where the answer comes back on the session's stream.
func BenchmarkToolsCall(b *testing.B) {
	e := newEnv(b)
	e.log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if _, err := e.store.UpdateAccount(testenv.Context(b), testAccount, func(a *registry.Account) error {
		a.Limits = registry.Limits{Rate: 1e9, Burst: 1 << 30}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ed := e.startEdge(b, 0, nil)
	url := e.streamableURL(ed.url)
	call := func(id int) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hello"}}}`, id)
	}
	want := []byte(`{\"text\":\"hello\"}`)

	for _, bc := range []struct{ accept, capabilities, name string }{
		{"application/json, text/event-stream", `{}`, ""},
		// A tool may ask such a client something during any call: its call becomes a
		// stream only when the tool does.
		{"application/json, text/event-stream", `{"roots":{}}`, ", a client that may be asked"},
		{"text/event-stream", `{}`, ""},
	} {
		accept := bc.accept
		b.Run("Streamable HTTP, Accept "+accept+bc.name, func(b *testing.B) {
			hello := strings.Replace(initialize, `"capabilities":{}`, `"capabilities":`+bc.capabilities, 1)
			x := do(b, "POST", url, map[string]string{"Accept": "application/json, text/event-stream"}, hello)
			session := x.header.Get("Mcp-Session-Id")
			if x.status != http.StatusOK || session == "" {
				b.Fatalf("initialize: %d %s", x.status, x.body)
			}
			id := 1
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				id++
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(call(id)))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", accept)
				req.Header.Set("Mcp-Session-Id", session)
				req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(body, want) {
					b.Fatalf("tools/call: %d %s", resp.StatusCode, body)
				}
			}
			testenv.ReportCPU(b, cpu0)
		})
	}

	// A client that declares something a worker could ask of it gets a round (mrtr.go).
	for name, caps := range map[string]string{"": `{}`, ", a client that may be asked": `{"sampling":{}}`} {
		b.Run("Streamable HTTP, stateless 2026-07-28"+name, func(b *testing.B) { statelessCalls(b, url, caps, want) })
	}

	b.Run("legacy HTTP+SSE", func(b *testing.B) {
		stream := openLegacyStream(b, e.sseURL(ed.url))
		messages := ed.url + stream.endpoint
		id := 1
		b.ReportAllocs()
		cpu0 := testenv.CPUTime(b)
		for b.Loop() {
			id++
			req, _ := http.NewRequest(http.MethodPost, messages, bytes.NewReader(call(id)))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				b.Fatalf("POST: %d", resp.StatusCode)
			}
			for {
				_, data := stream.next(b, "message")
				if strings.Contains(data, fmt.Sprintf(`"id":%d`, id)) {
					if !strings.Contains(data, string(want)) {
						b.Fatalf("tools/call answered %s", data)
					}
					break
				}
			}
		}
		testenv.ReportCPU(b, cpu0)
	})
}

func statelessCalls(b *testing.B, url, capabilities string, want []byte) {
	h, _ := rev20260728("tools/call", "")
	id := 1
	b.ReportAllocs()
	for b.Loop() {
		id++
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":%s},"name":"echo","arguments":{"text":"hello"}}}`, id, capabilities)
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range h {
			req.Header.Set(k, v)
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Mcp-Name", "echo")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(got, want) {
			b.Fatalf("tools/call: %d %s", resp.StatusCode, got)
		}
	}
}
