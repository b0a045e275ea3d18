package audit_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/testenv"
)

// benchRecord is a call's record as a busy edge writes it.
func benchRecord() audit.Record {
	return audit.Record{Time: time.Now().UTC(), Kind: audit.KindCall, Account: "acme", Key: "key-1", Tool: "email",
		Method: "send_email", Transport: audit.TransportREST, ArgsSHA256: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
		RequestBytes: 60, ResponseBytes: 60, Outcome: audit.OutcomeOK, Status: 200, LatencyUS: 900, RequestID: "req-1"}
}

// BenchmarkTrailWrite: a record per call written by many calls at once, each call
// waiting for its record's acknowledgement (Trail.Write, as edges write now), against
// the queue the trail had before, which a call left its record on and went on
// (queuedWriter): the cost of a call's record being stored before the call is
// answered. Both run on one embedded server, in the same run; ns/op is per record,
// every record acknowledged by the end.
func BenchmarkTrailWrite(b *testing.B) {
	nc := testenv.Conn(b, testenv.Server(b).ClientURL())
	ctx := testenv.Context(b)
	trail, err := audit.Open(ctx, nc, audit.Options{}, testenv.Logger(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Run("acked", func(b *testing.B) {
		b.SetParallelism(16) // callers at once per core, as an edge under load has
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := trail.Write(benchRecord()); err != nil {
					b.Error(err)
				}
			}
		})
	})
	b.Run("queued", func(b *testing.B) {
		q := startQueued(b, nc)
		b.SetParallelism(16)
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				q.write(benchRecord())
			}
		})
		q.close(b)
	})
	// One caller at a time: what waiting for its record adds to one call.
	b.Run("acked-one-caller", func(b *testing.B) {
		for b.Loop() {
			if err := trail.Write(benchRecord()); err != nil {
				b.Error(err)
			}
		}
	})
}

// queuedWriter is how the trail wrote records before a call waited for its record:
// Write queued it (at most 8192) and returned; one writer published what had queued
// within 5 ms of the first record asynchronously, at most 1024 unacknowledged, with
// no Nats-Msg-Id.
type queuedWriter struct {
	js      jetstream.JetStream
	queue   chan audit.Record
	stop    chan struct{}
	stopped chan struct{}
}

func startQueued(b *testing.B, nc *nats.Conn) *queuedWriter {
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(1024), jetstream.WithPublishAsyncTimeout(5*time.Second),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { b.Error(err) }))
	if err != nil {
		b.Fatal(err)
	}
	q := &queuedWriter{js: js, queue: make(chan audit.Record, 8192), stop: make(chan struct{}), stopped: make(chan struct{})}
	go q.run()
	return q
}

// write queues r. The writer dropped a record that found the queue full; here it
// waits for room instead, so that both writers store every record and the benchmark
// compares the time to store the same records.
func (q *queuedWriter) write(r audit.Record) { q.queue <- r }

func (q *queuedWriter) run() {
	defer close(q.stopped)
	linger := time.NewTimer(5 * time.Millisecond)
	for {
		select {
		case r := <-q.queue:
			q.publish(r)
		case <-q.stop:
			q.drain()
			return
		}
		linger.Reset(5 * time.Millisecond)
		select {
		case <-linger.C:
		case <-q.stop:
		}
		q.drain()
	}
}

func (q *queuedWriter) drain() {
	for {
		select {
		case r := <-q.queue:
			q.publish(r)
		default:
			return
		}
	}
}

func (q *queuedWriter) publish(r audit.Record) {
	data, _ := json.Marshal(&r)
	subject := wire.DefaultSubjects.Audit(r.Kind, r.Account, r.Tool, r.Method, r.Outcome)
	for {
		_, err := q.js.PublishMsgAsync(&nats.Msg{Subject: subject, Data: data})
		if err == nil {
			return
		}
		// The writer counted a record stalled this long as lost; here it waits on, so
		// that every record is stored.
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			panic(err)
		}
	}
}

// close sends what is queued and waits for its acknowledgements: the benchmark's time
// includes storing every record, as the acked one's does.
func (q *queuedWriter) close(b *testing.B) {
	close(q.stop)
	<-q.stopped
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case <-q.js.PublishAsyncComplete():
	case <-ctx.Done():
		b.Fatal("records not acknowledged")
	}
}
