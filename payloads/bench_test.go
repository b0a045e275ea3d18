package payloads_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
)

// BenchmarkRoundTrip10MiB stores 10 MiB as a payload and streams it back, as an edge
// does with a large body and a large reply, on an embedded NATS server.
func BenchmarkRoundTrip10MiB(b *testing.B) {
	nc := testenv.Conn(b, testenv.Server(b).ClientURL())
	ctx := testenv.Context(b)
	store, err := payloads.Open(ctx, nc, 1)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		p, err := store.Write(ctx, "bench", nil, bytes.NewReader(data), 64<<20)
		if err != nil {
			b.Fatal(err)
		}
		if err := store.WriteTo(ctx, io.Discard, "bench", p); err != nil {
			b.Fatal(err)
		}
		store.Delete(ctx, "bench", p)
	}
}
