package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// BenchmarkToolCall measures one tool call through a real edge over TCP, the schema
// check, NATS request-reply to a responder and back: the path every HTTP call takes;
// for a tool whose workers name the calls they hold (as the SDK's do), the edge also
// watches each call until its answer. cpu-µs/op is the whole process's CPU per call
// (callers, edge, NATS server and worker).
func BenchmarkToolCall(b *testing.B) {
	for _, holding := range []bool{false, true} {
		name := map[bool]string{false: "a tool", true: "a tool whose workers name their calls"}[holding]
		b.Run(name, func(b *testing.B) {
			tool := emailTool
			tool.Holding = holding
			benchmarkToolCall(b, tool)
		})
	}
}

// BenchmarkToolCallAudit measures the same call with the audit trail off and on: the
// record is written off the call's path, so the two should cost about the same.
func BenchmarkToolCallAudit(b *testing.B) {
	b.Run("audit off", func(b *testing.B) { benchmarkToolCall(b, emailTool) })
	b.Run("audit on", func(b *testing.B) { benchmarkToolCall(b, emailTool, withAudit()) })
}

func benchmarkToolCall(b *testing.B, tool registry.Tool, opts ...option) {
	e := newEnv(b, opts...)
	key := e.account("bench", registry.Limits{Rate: 1e9, Burst: 1 << 30})
	e.serve(tool, echo)
	e.connect("bench", "email")
	body := []byte(goodEmail)
	url := e.url + "/tool-call/email/send_email"

	b.ReportAllocs()
	cpu0 := testenv.CPUTime(b)
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("SERVICE_API_KEY", key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := e.client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
	testenv.ReportCPU(b, cpu0)
}
