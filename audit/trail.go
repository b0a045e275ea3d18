package audit

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// The bounds of writing the trail. At most MaxInFlight records are unacknowledged at
// once (a write beyond waits for room, and fails past the client's stall wait); each
// is acknowledged within AckTimeout or fails.
const (
	MaxInFlight = 4096
	AckTimeout  = 5 * time.Second
)

// Trail writes the audit trail's records and reads them back.
type Trail struct {
	opts   Options
	js     jetstream.JetStream // its own, for its asynchronous publishing settings
	stream string
	log    *slog.Logger

	failures   atomic.Int64
	down       atomic.Bool  // the last write that ended failed
	lastLogged atomic.Int64 // unix seconds of the last failure logged
}

// Open makes or opens the trail's stream (see Options).
func Open(ctx context.Context, nc *nats.Conn, o Options, log *slog.Logger) (*Trail, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	o.Edge = cmp.Or(o.Edge, DefaultEdge())
	t := &Trail{opts: o, log: log, stream: o.Subjects.AuditStream()}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncMaxPending(MaxInFlight),
		jetstream.WithPublishAsyncTimeout(AckTimeout),
		jetstream.WithPublishAsyncAckHandler(func(jetstream.JetStream, *nats.Msg, *jetstream.PubAck) { t.down.Store(false) }),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *nats.Msg, err error) { t.fail(err) }))
	if err != nil {
		return nil, fmt.Errorf("audit: jetstream: %w", err)
	}
	t.js = js
	if _, err := openStream(ctx, js, o); err != nil {
		return nil, err
	}
	return t, nil
}

// Write sends r to the stream and returns once the stream has stored it, or with why
// it did not: the call r describes is answered only after its record is kept. Writes
// of many calls at once share the connection, each waiting for its own
// acknowledgement, so that the stream's round trip is paid in parallel, not in turn.
// r.ID (a new id when empty) is the message's Nats-Msg-Id: a record the client sends
// again (no stream answered it, while one elects a leader) is stored once. The writer
// names the edge in it. A nil Trail writes nothing.
func (t *Trail) Write(r Record) error {
	paf, err := t.publish(&r)
	if paf == nil || err != nil {
		return err
	}
	select {
	case <-paf.Ok():
		return nil
	case err := <-paf.Err():
		return fmt.Errorf("audit: record %s not written: %w", r.ID, err) // counted by the client's handler
	}
}

// Send sends r as Write does without waiting for the stream: for a call whose
// account does not require its record while the stream fails (Ready is false), so
// that the call is not held up by a trail that will not answer. A record the stream
// does not store is counted.
func (t *Trail) Send(r Record) {
	_, _ = t.publish(&r)
}

// publish sends r, returning its acknowledgement to come (nil for a nil Trail).
func (t *Trail) publish(r *Record) (jetstream.PubAckFuture, error) {
	if t == nil {
		return nil, nil
	}
	r.Edge = t.opts.Edge
	if r.ID == "" {
		r.ID = nuid.Next()
	}
	data, err := r.encode()
	if err != nil {
		t.fail(err)
		return nil, fmt.Errorf("audit: record %s: %w", r.ID, err)
	}
	msg := &nats.Msg{Subject: r.subject(t.opts.Subjects), Data: data, Header: nats.Header{jetstream.MsgIDHeader: []string{r.ID}}}
	paf, err := t.js.PublishMsgAsync(msg)
	if err != nil {
		t.fail(err)
		return nil, fmt.Errorf("audit: record %s not written: %w", r.ID, err)
	}
	return paf, nil
}

// Ready says the last write that ended was stored (or none has ended yet): false
// while the stream fails. A nil Trail is never ready.
func (t *Trail) Ready() bool { return t != nil && !t.down.Load() }

// Failures counts the records that could not be written: refused, or not
// acknowledged in time.
func (t *Trail) Failures() int64 { return t.failures.Load() }

// Close waits for the acknowledgements of what was sent, until ctx ends.
func (t *Trail) Close(ctx context.Context) error {
	select {
	case <-t.js.PublishAsyncComplete():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("audit: close: %d records not acknowledged: %w", t.js.PublishAsyncPending(), ctx.Err())
	}
}

// fail counts a record that was not written, and logs it at most once a minute.
func (t *Trail) fail(err error) {
	t.failures.Add(1)
	t.down.Store(true)
	now := time.Now().Unix()
	if last := t.lastLogged.Load(); now-last >= 60 && t.lastLogged.CompareAndSwap(last, now) {
		t.log.Warn("audit: a record could not be written (logged at most once a minute; toolgate_audit_write_failures_total counts them)", "err", err)
	}
}
