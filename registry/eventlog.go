package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/payloads"
)

// EventLog is the JetStream stream (wire.Subjects.EventLogStream) that keeps every
// stream event of every MCP session for a while. A session's standalone stream (its
// legacy SSE stream, or its Streamable HTTP GET stream) is the subject
// SessionOut(tool, session); each POST answered with a stream has the subject
// SessionPost(tool, session, post). Anything published on those subjects, by an edge
// or a worker, is stored, and the stream republishes it once stored, with its
// sequence, on the same subject under <prefix>.logged. The edge holding a stream
// follows that with a plain subscription (one interest entry, no consumer on the
// server); it reads the store only for what a client missed: a client that
// reconnects with Last-Event-ID, to any edge, and whatever the live feed lost.
type EventLog struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	stream jetstream.Stream
	subj   wire.Subjects
	posts  *postFeeds      // the POST streams followed for calls, a subscription per session
	large  *payloads.Store // where records past one message are kept (KeepLarge)
}

// DefaultEventRetention is how long the event log keeps events when an edge creates
// it without being told.
const DefaultEventRetention = 10 * time.Minute

// OpenEventLog creates the event log, or opens it as every edge shares it: a
// retention of 0 takes the stream's own, and a retention or replica count that
// differs from the stream's is refused unless update is set (the registry's
// --update-registry). What only this code decides (subjects, republishing) is brought
// up to date: a log made by an older version, with other subjects, takes this
// version's. It retries while a new cluster elects its JetStream leader.
func OpenEventLog(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, subj wire.Subjects, replicas int, retention time.Duration, update bool) (*EventLog, error) {
	name := subj.EventLogStream()
	have, err := eventLogConfig(ctx, js, name)
	if err != nil {
		return nil, err
	}
	if have != nil {
		if retention == 0 {
			retention = have.MaxAge
		}
		for _, d := range []struct {
			setting    string
			have, want any
		}{{"retention", have.MaxAge, retention}, {"replicas", have.Replicas, replicas}} {
			if d.have != d.want && !update {
				return nil, fmt.Errorf("registry: event log %s has %s %v, this edge asks for %v: give every edge the same settings, "+
					"leave --mcp-event-retention unset to take the log's own, or change it on purpose (toolgate edge --update-registry)",
					name, d.setting, d.have, d.want)
			}
		}
	}
	if retention == 0 {
		retention = DefaultEventRetention
	}
	cfg := jetstream.StreamConfig{
		Name:        name,
		Description: "toolgate MCP stream events, kept for clients that resume with Last-Event-ID",
		Subjects:    subj.EventLog(),
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxAge:      retention,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		Duplicates:  min(2*time.Minute, retention),
		RePublish:   &jetstream.RePublish{Source: subj.SessionRoot() + ">", Destination: subj.LoggedRoot() + ">"},
	}
	for {
		st, err := js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			l := &EventLog{js: js, nc: nc, stream: st, subj: subj}
			l.posts = &postFeeds{log: l, feeds: map[string]*postFeed{}}
			return l, nil
		}
		if !retryable(err) {
			return nil, fmt.Errorf("registry: event log %s: %w", cfg.Name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: event log %s: %w (last error: %v)", cfg.Name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// eventLogConfig is the configuration of the event log as it is, nil when there is
// none yet.
func eventLogConfig(ctx context.Context, js jetstream.JetStream, name string) (*jetstream.StreamConfig, error) {
	for {
		st, err := js.Stream(ctx, name)
		if err == nil {
			c := st.CachedInfo().Config
			return &c, nil
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return nil, nil
		}
		if !retryable(err) {
			return nil, fmt.Errorf("registry: event log %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: event log %s: %w (last error: %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StandaloneSubject carries a session's standalone stream.
func (l *EventLog) StandaloneSubject(tool, session string) string {
	return l.subj.SessionOut(tool, session)
}

// PostSubject carries the stream of one POST of a session.
func (l *EventLog) PostSubject(tool, session, post string) string {
	return l.subj.SessionPost(tool, session, post)
}

// ReplySubject is where the log keeps the tool's answer to the call of a POST
// stream's subject (wire.Subjects.StreamAnswerLogged): beside the stream, not on it,
// since the tool's reply is not a message for the client. The tool sends it on
// wire.Subjects.StreamAnswer, a plain subject, and an edge stores it here (package
// asks): a worker publishes on no subject the log stores. '~' never occurs in a post
// id, so no POST's stream is named so.
func (l *EventLog) ReplySubject(postSubject string) string { return postSubject + "~reply" }

// Retention is how long the log keeps a record.
func (l *EventLog) Retention() time.Duration { return l.stream.CachedInfo().Config.MaxAge }

// Append stores one record and returns its sequence. A msgID makes the append
// idempotent across edges that all decide to write the same record.
func (l *EventLog) Append(ctx context.Context, subject string, data []byte, hdr nats.Header, msgID string) (uint64, error) {
	var opts []jetstream.PublishOpt
	if msgID != "" {
		opts = append(opts, jetstream.WithMsgID(msgID))
	}
	ack, err := l.publish(ctx, subject, data, hdr, opts...)
	var apiErr *jetstream.APIError
	if msgID != "" && errors.As(err, &apiErr) && apiErr.ErrorCode == jsErrDuplicateInProcess {
		// Another edge is storing the same record right now.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("registry: event log: append to %s: %w", subject, err)
	}
	return ack.Sequence, nil
}

// jsErrDuplicateInProcess is JetStream's answer to a message whose id another
// publisher's message, not yet stored, carries too.
const jsErrDuplicateInProcess = 10158

// How a record that must reach its client is stored: each attempt waits appendAttempt
// at most for the log's answer, and attempts go on, under one message id so that the
// log keeps one copy, for up to deliverWait. A stream of the log whose leader died or
// was cut off takes a few seconds (up to about ten) to elect another; a response must
// not be lost to it.
const (
	appendAttempt = 2 * time.Second
	deliverWait   = 30 * time.Second
)

// AppendSure is Append for a record that must not be lost: the response of a
// request whose client waits for it on its stream. It tries again, as the same
// message, while the log cannot take it, for up to deliverWait from ctx.
func (l *EventLog) AppendSure(ctx context.Context, subject string, data []byte, hdr nats.Header) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, deliverWait)
	defer cancel()
	id := nuid.Next()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, appendAttempt)
		seq, err := l.Append(attempt, subject, data, hdr, id)
		cancelAttempt()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return seq, err
		}
		select {
		case <-ctx.Done():
			return seq, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// AppendAfter stores one record on subject if the subject's last record is still
// last, and reports whether it did.
func (l *EventLog) AppendAfter(ctx context.Context, subject string, data []byte, hdr nats.Header, last uint64) (bool, error) {
	_, err := l.publish(ctx, subject, data, hdr, jetstream.WithExpectLastSequencePerSubject(last))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("registry: event log: append to %s: %w", subject, err)
	}
	return true, nil
}

// publish stores one record, as opts allow.
func (l *EventLog) publish(ctx context.Context, subject string, data []byte, hdr nats.Header, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = v
	}
	if err := l.claimCheck(ctx, msg); err != nil {
		return nil, err
	}
	return l.js.PublishMsg(ctx, msg, opts...)
}

// Get reads the first record of subject at sequence from or after it:
// jetstream.ErrMsgNotFound when there is none.
func (l *EventLog) Get(ctx context.Context, subject string, from uint64) (*jetstream.RawStreamMsg, error) {
	m, err := l.stream.GetMsg(ctx, from, jetstream.WithGetMsgSubject(subject))
	if err != nil {
		return nil, err
	}
	if m.Data, err = l.whole(ctx, m.Header, m.Data); err != nil {
		return nil, err
	}
	return m, nil
}

// Last reads the last record of subject.
func (l *EventLog) Last(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	return l.stream.GetLastMsgForSubject(ctx, subject)
}
