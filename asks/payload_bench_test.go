package asks_test

import (
	"bytes"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/asks"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/payloads"
)

// BenchmarkPayloadGet10MiB is a worker reading a 10 MiB request's parts from an edge,
// one ask each, as the SDK does before its handler runs. Its cases compare, in one
// run, the edge reading each part into a buffer of the part's size against
// GetBytes's buffer grown as it reads (as parts were first read); the first case
// again last shows the run's drift.
func BenchmarkPayloadGet10MiB(b *testing.B) {
	srv := testenv.Server(b)
	edge := testenv.Conn(b, srv.ClientURL())
	ctx := testenv.Context(b)
	store, err := payloads.Open(ctx, edge, 1)
	if err != nil {
		b.Fatal(err)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16)
	p, err := store.Write(ctx, "alpha", nil, bytes.NewReader(data), wire.DefaultPayloadLimit)
	if err != nil {
		b.Fatal(err)
	}
	worker, err := nats.Connect(srv.ClientURL(), nats.CustomInboxPrefix("_INBOX.tool.alpha"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(worker.Close)
	for _, c := range []struct {
		name     string
		getBytes bool
	}{{"sized", false}, {"before:GetBytes", true}, {"sized,again", false}} {
		a, err := asks.Serve(edge, wire.DefaultSubjects, 0, testenv.Logger(b))
		if err != nil {
			b.Fatal(err)
		}
		if c.getBytes {
			asks.ReadPartsWithGetBytes(a)
		}
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(p.Size)
			b.ReportAllocs()
			cpu0 := testenv.CPUTime(b)
			for b.Loop() {
				var got int64
				for n := range p.Parts {
					answer, err := worker.RequestMsg(wire.DefaultSubjects.AskPayloadMsg("alpha", wire.PayloadGet, p.ID, n, nil), testenv.Patience)
					if err != nil {
						b.Fatal(err)
					}
					part, _, err := wire.ReadAskReply(answer)
					if err != nil {
						b.Fatal(err)
					}
					got += int64(len(part))
				}
				if got != p.Size {
					b.Fatalf("read %d bytes of %d", got, p.Size)
				}
			}
			testenv.ReportCPU(b, cpu0)
		})
		a.Stop()
	}
}
