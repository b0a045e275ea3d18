package edge_test

import (
	"bytes"
	"io"
	"net/http"
	"testing"

	"github.com/toolgate/toolgate/registry"
)

// BenchmarkToolCall measures one tool call through a real edge over TCP, the schema
// check, NATS request-reply to a responder and back: the path every HTTP call takes.
func BenchmarkToolCall(b *testing.B) {
	e := newEnv(b)
	key := e.account("bench", registry.Limits{Rate: 1e9, Burst: 1 << 30})
	e.serve(emailTool, echo)
	e.connect("bench", "email")
	body := []byte(goodEmail)
	url := e.url + "/tool-call/email/send_email"

	b.ReportAllocs()
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
}
