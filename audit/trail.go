package audit

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The bounds that keep writing the trail off the call path. A call hands its record
// to a queue of MaxQueued and goes on; one writer sends them to the stream with at
// most MaxInFlight unacknowledged, each acknowledged within AckTimeout or counted as
// failed. A record that finds the queue full (the stream has been unreachable for a
// while, or slower than the calls) is dropped and counted, never waited for.
const (
	MaxQueued   = 8192
	MaxInFlight = 1024
	AckTimeout  = 5 * time.Second
	// Linger is how long the writer waits, once it has a record to send, for others
	// to send with it.
	Linger = 5 * time.Millisecond
)

// ErrQueueFull is the failure of a record dropped because MaxQueued records were
// waiting already.
var ErrQueueFull = errors.New("audit: the queue of records to write is full")

// Trail writes the audit trail's records and reads them back.
type Trail struct {
	opts   Options
	js     jetstream.JetStream // its own, for its asynchronous publishing settings
	stream string
	log    *slog.Logger

	queue   chan Record
	stop    chan struct{}
	stopped chan struct{}
	closing sync.Once

	failures   atomic.Int64
	lastLogged atomic.Int64 // unix seconds of the last failure logged
}

// Open makes or opens the trail's stream (see Options) and starts writing what Write
// is given.
func Open(ctx context.Context, nc *nats.Conn, o Options, log *slog.Logger) (*Trail, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	o.Edge = cmp.Or(o.Edge, DefaultEdge())
	t := &Trail{opts: o, log: log, stream: o.Subjects.AuditStream(),
		queue: make(chan Record, MaxQueued), stop: make(chan struct{}), stopped: make(chan struct{})}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(MaxInFlight),
		jetstream.WithPublishAsyncTimeout(AckTimeout),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { t.fail(err) }))
	if err != nil {
		return nil, fmt.Errorf("audit: jetstream: %w", err)
	}
	t.js = js
	if _, err := openStream(ctx, js, o); err != nil {
		return nil, err
	}
	go t.run()
	return t, nil
}

// Write hands r to the writer and returns at once: the call r describes is not held
// up by the trail. The writer names the edge in it. A nil Trail writes nothing.
func (t *Trail) Write(r Record) {
	if t == nil {
		return
	}
	select {
	case t.queue <- r:
	default:
		t.fail(ErrQueueFull)
	}
}

// Failures counts the records that could not be written: dropped for a full queue,
// refused, or not acknowledged in time.
func (t *Trail) Failures() int64 { return t.failures.Load() }

// Close writes what is queued and waits for its acknowledgements, until ctx ends.
func (t *Trail) Close(ctx context.Context) error {
	t.closing.Do(func() { close(t.stop) })
	select {
	case <-t.stopped:
	case <-ctx.Done():
		return fmt.Errorf("audit: close: %w", ctx.Err())
	}
	select {
	case <-t.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: close: %d records not acknowledged: %w", t.js.PublishAsyncPending(), ctx.Err())
	}
}

// run sends the queued records until Close, then what is left. It sends them a
// batch at a time: from the first record, it waits Linger for others, so that a busy
// edge wakes the bus (and its own writer) once per batch rather than once per call.
func (t *Trail) run() {
	defer close(t.stopped)
	linger := time.NewTimer(Linger)
	for {
		select {
		case r := <-t.queue:
			t.publish(r)
		case <-t.stop:
			t.drain()
			return
		}
		linger.Reset(Linger)
		select {
		case <-linger.C:
		case <-t.stop:
		}
		t.drain()
	}
}

// drain sends what is queued now.
func (t *Trail) drain() {
	for {
		select {
		case r := <-t.queue:
			t.publish(r)
		default:
			return
		}
	}
}

// publish sends r without waiting for its acknowledgement; it waits only while
// MaxInFlight records are unacknowledged. The client sends it again only when no
// stream received it (no responders, while the stream elects a leader), so the
// stream stores it once without an id to tell copies apart.
func (t *Trail) publish(r Record) {
	r.Edge = t.opts.Edge
	data, err := json.Marshal(&r)
	if err != nil {
		t.fail(err)
		return
	}
	if _, err := t.js.PublishMsgAsync(&nats.Msg{Subject: r.subject(t.opts.Subjects), Data: data}); err != nil {
		t.fail(err)
	}
}

// fail counts a record that was not written, and logs it at most once a minute.
func (t *Trail) fail(err error) {
	t.failures.Add(1)
	now := time.Now().Unix()
	if last := t.lastLogged.Load(); now-last >= 60 && t.lastLogged.CompareAndSwap(last, now) {
		t.log.Warn("audit: a record could not be written (logged at most once a minute; toolgate_audit_write_failures_total counts them)", "err", err)
	}
}
