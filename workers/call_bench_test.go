package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
)

// BenchmarkCall is one call through a running worker, answered at once, as a tool
// call and as an MCP request: what the SDK's call path (decoding the request, the
// call's context, cancel tracking, encoding and sending the reply) costs, with the
// caller on its own connection in the same process.
func BenchmarkCall(b *testing.B) {
	e := newEnv(b)
	echo := workers.Method{Name: "echo", Handler: func(_ context.Context, c *workers.Call) (any, error) {
		return workers.Raw{ContentType: "application/json", Data: c.Params}, nil
	}}
	tool := workers.Tool{ID: "bencher", Capabilities: workers.Capabilities{Resources: true}}
	e.startWith(tool, []workers.Method{echo}, func(w *workers.Worker) {
		w.HandleMCP(func(_ context.Context, c *workers.Call, _ string) (any, error) {
			return workers.Raw{ContentType: "application/json", Data: c.Params}, nil
		})
	})
	for _, bc := range []struct {
		name string
		req  wire.Request
	}{
		{"tool call", wire.Request{Tool: "bencher", Method: "echo"}},
		{"mcp request", wire.Request{Tool: "bencher", MCP: true, Method: "resources/read"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			req := bc.req
			req.CallID, req.RequestID, req.Account = "bench", "bench", "acme"
			req.Data = []byte(`{"message":"hello, gateway","n":42}`)
			b.ReportAllocs()
			for b.Loop() {
				req.Deadline = time.Now().Add(testenv.Patience)
				r, err := bus.Do(context.Background(), e.nc, wire.DefaultSubjects, &req)
				if err != nil || r.Status != 200 {
					b.Fatal(r, err)
				}
			}
		})
	}
}
