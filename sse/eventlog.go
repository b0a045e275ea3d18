package sse

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus"
)

// Headers on event log records. A record without Tg-Event is a JSON-RPC message for
// the client; the others steer the edges that follow the log and are never sent.
const (
	headerEvent    = "Tg-Event"  // "open": a standalone stream opened; "request": a POST stream began; "resume": a POST stream was resumed
	headerInstance = "Tg-Stream" // with "open": which stream instance opened
	headerFinal    = "Tg-Final"  // on a POST stream's response: the stream ends after it
)

const (
	eventOpen    = "open"
	eventRequest = "request"
	eventResume  = "resume"
)

// eventLog is the JetStream stream that keeps every stream event of every session
// for a while. A session's standalone stream (its legacy SSE stream, or its
// Streamable HTTP GET stream) is the subject SessionOut(session); each POST answered
// with a stream has the subject SessionOut(session).<post>. Anything published on
// those subjects, by an edge or a worker, is stored; the edge holding the stream
// follows the subject and writes what arrives, and an edge that takes over after a
// reconnect replays from the Last-Event-ID the client sends.
type eventLog struct {
	js     jetstream.JetStream
	stream jetstream.Stream
	subj   bus.Subjects
}

func eventStreamName(s bus.Subjects) string {
	p := s.Prefix
	if p == "" {
		p = bus.DefaultPrefix
	}
	return strings.NewReplacer(".", "-", "*", "-", ">", "-").Replace(p) + "-mcp-events"
}

// openEventLog creates or updates the stream, retrying while a new cluster elects
// its JetStream leader.
func openEventLog(ctx context.Context, js jetstream.JetStream, subj bus.Subjects, replicas int, retention time.Duration) (*eventLog, error) {
	cfg := jetstream.StreamConfig{
		Name:        eventStreamName(subj),
		Description: "toolgate MCP stream events, kept for clients that resume with Last-Event-ID",
		Subjects:    []string{subj.SessionOut("*"), subj.SessionOut("*") + ".*"},
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      retention,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  min(2*time.Minute, retention),
	}
	for {
		st, err := js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			return &eventLog{js: js, stream: st, subj: subj}, nil
		}
		if !retryable(err) {
			return nil, fmt.Errorf("sse: event log %s: %w", cfg.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sse: event log %s: %w (last error: %v)", cfg.Name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func retryable(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == 10008 || apiErr.Code == 503) {
		return true
	}
	return errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}

// standaloneSubject carries a session's standalone stream.
func (l *eventLog) standaloneSubject(session string) string { return l.subj.SessionOut(session) }

// postSubject carries the stream of one POST of a session.
func (l *eventLog) postSubject(session, post string) string {
	return l.subj.SessionOut(session) + "." + post
}

// appendRecord stores one record and returns its sequence. A msgID makes the append
// idempotent across edges that all decide to write the same record.
func (l *eventLog) appendRecord(ctx context.Context, subject string, data []byte, hdr nats.Header, msgID string) (uint64, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = v
	}
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := l.js.PublishMsg(ctx, msg, opts...)
	var apiErr *jetstream.APIError
	if msgID != "" && errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrDuplicateInProcess {
		// Another edge is storing the same record right now.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("sse: event log: append to %s: %w", subject, err)
	}
	return ack.Sequence, nil
}

// follow delivers the records of subject from sequence from on, in order, until ctx
// ends or stop is called.
func (l *eventLog) follow(ctx context.Context, subject string, from uint64) (<-chan jetstream.Msg, func(), error) {
	if from == 0 {
		from = 1
	}
	cons, err := l.stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{subject},
		DeliverPolicy:  jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:    from,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sse: event log: follow %s: %w", subject, err)
	}
	ch := make(chan jetstream.Msg, 256)
	cc, err := cons.Consume(func(m jetstream.Msg) {
		select {
		case ch <- m:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return nil, nil, fmt.Errorf("sse: event log: follow %s: %w", subject, err)
	}
	return ch, cc.Stop, nil
}

// jsErrDuplicateInProcess is JetStream's answer to a message whose id another
// publisher's message, not yet stored, carries too.
const jsErrDuplicateInProcess = 10158

// sequence is a record's position in the log.
func sequence(m jetstream.Msg) uint64 {
	md, err := m.Metadata()
	if err != nil {
		return 0
	}
	return md.Sequence.Stream
}

// An event id names a stream and a position in it: "<session>:<seq>" on a session's
// standalone stream, "<session>:<post>:<seq>" on the stream of one POST. Session and
// post ids are base62, so ':' cannot occur in them.
type eventID struct {
	session string
	post    string // "" for the standalone stream
	seq     uint64
}

func (id eventID) String() string {
	if id.post == "" {
		return id.session + ":" + strconv.FormatUint(id.seq, 10)
	}
	return id.session + ":" + id.post + ":" + strconv.FormatUint(id.seq, 10)
}

func parseEventID(s string) (eventID, bool) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return eventID{}, false
	}
	seq, err := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	if err != nil {
		return eventID{}, false
	}
	id := eventID{session: parts[0], seq: seq}
	if len(parts) == 3 {
		id.post = parts[1]
	}
	if !validToken(id.session) || (len(parts) == 3 && !validToken(id.post)) {
		return eventID{}, false
	}
	return id, true
}

// validToken reports whether s may stand in a subject as one token.
func validToken(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
