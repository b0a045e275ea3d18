package workers_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/workers"
)

// BenchmarkLargeReply10MiB is a tool's reply of 10 MiB on the path `make bench`
// measures through an edge, less HTTP: the worker stores it in parts through the
// edge's asks, the caller gets the claim check, streams the parts from the payloads
// bucket and removes them. cpu-µs/op is the process's CPU, NATS server included.
func BenchmarkLargeReply10MiB(b *testing.B) {
	e := newEnv(b)
	ctx := testenv.Context(b)
	store, err := payloads.Open(ctx, e.nc, 1)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	e.start(workers.Tool{ID: "blob"}, []workers.Method{{Name: "bytes", Handler: func(context.Context, *workers.Call) (any, error) {
		return workers.Raw{ContentType: "application/octet-stream", Data: data}, nil
	}}})
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := testenv.CPUTime(b)
	for b.Loop() {
		req := wire.Request{Tool: "blob", Method: "bytes", CallID: "bench", RequestID: "bench", Account: "acme",
			Deadline: time.Now().Add(testenv.Patience)}
		r, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, &req)
		if err != nil {
			b.Fatal(err)
		}
		p, ok, err := wire.PayloadOf(r.Header)
		if !ok || err != nil || p.Size != int64(len(data)) {
			b.Fatalf("payload %+v %v %v", p, ok, err)
		}
		if err := store.WriteTo(ctx, io.Discard, "blob", p); err != nil {
			b.Fatal(err)
		}
		store.Delete(ctx, "blob", p)
	}
	testenv.ReportCPU(b, cpu0)
}
