package payloads_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
)

// BenchmarkRoundTrip10MiB stores 10 MiB as a payload and streams it back, as an edge
// does with a large body and a large reply, and removes it, on an embedded NATS
// server. (On a 3-node cluster a loaded 2-core machine times out the object store's
// acks now and then, which would fail the run.) Its cases compare, side by side in
// one run, Write as it was ("before": each part read whole into a buffer, then put)
// against Write streaming each part into the object store's chunks, and the other
// layouts measured: one chunk per part, 256 KiB chunks, a part read through 128 KiB
// instead of 32 KiB, and the bucket in memory instead of in files. cpu-µs/op is the
// process's CPU, server included, which the machine's other load inflates less
// than it does the time.
func BenchmarkRoundTrip10MiB(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	nc := testenv.Conn(b, testenv.Server(b).ClientURL())
	ctx := testenv.Context(b)
	store, err := payloads.Open(ctx, nc, 1)
	if err != nil {
		b.Fatal(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	mem, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: "bench-memory", TTL: payloads.TTL,
		Storage: jetstream.MemoryStorage})
	if err != nil {
		b.Fatal(err)
	}
	part := payloads.PartSize(store)
	for _, c := range []struct {
		name           string
		obj            jetstream.ObjectStore
		chunk, copyBuf int
		buffered       bool
	}{
		{"before:write=buffered/chunk=128KiB/buf=32KiB", store.Bucket(), 0, 0, true},
		{"write=streamed/chunk=128KiB/buf=32KiB", store.Bucket(), 0, 0, false},
		{"write=buffered/chunk=part/buf=32KiB", store.Bucket(), part, 0, true},
		{"write=streamed/chunk=256KiB/buf=32KiB", store.Bucket(), 256 << 10, 0, false},
		{"write=streamed/chunk=128KiB/buf=128KiB", store.Bucket(), 0, 128 << 10, false},
		{"write=streamed/chunk=256KiB/buf=256KiB", store.Bucket(), 256 << 10, 256 << 10, false},
		{"write=streamed/chunk=128KiB/buf=32KiB/memory", mem, 0, 0, false},
		{"before,again", store.Bucket(), 0, 0, true},
	} {
		s := payloads.WithLayout(store, c.obj, c.chunk, c.copyBuf)
		write := s.Write
		if c.buffered {
			write = func(ctx context.Context, tool string, _ []byte, r io.Reader, limit int64) (wire.Payload, error) {
				return payloads.WriteBuffered(ctx, s, tool, r, limit)
			}
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				roundTrip(b, s, write, data)
			}
			testenv.ReportCPU(b, cpu0)
		})
	}
}

type writeFunc func(ctx context.Context, tool string, head []byte, r io.Reader, limit int64) (wire.Payload, error)

func roundTrip(b *testing.B, s *payloads.Store, write writeFunc, data []byte) {
	ctx := b.Context()
	p, err := write(ctx, "bench", nil, bytes.NewReader(data), wire.DefaultPayloadLimit)
	if err != nil {
		b.Fatal(err)
	}
	if p.Size != int64(len(data)) {
		b.Fatalf("stored %d bytes of %d", p.Size, len(data))
	}
	if err := s.WriteTo(ctx, io.Discard, "bench", p); err != nil {
		b.Fatal(err)
	}
	s.Delete(ctx, "bench", p)
}
