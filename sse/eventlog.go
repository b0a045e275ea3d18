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
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// Headers on event log records. A record without Tg-Event is a JSON-RPC message for
// the client; the others steer the edges that follow the log and are never sent.
const (
	headerEvent    = "Tg-Event"  // "open" and "close": a standalone stream opened, closed; "request": a POST stream began; "resume": a POST stream was resumed
	headerInstance = "Tg-Stream" // with "open": which stream instance opened
	headerFinal    = "Tg-Final"  // on a POST stream's response: the stream ends after it
	// headerOrigin marks the messages of a POST stream that the edge running the
	// call wrote to the stream itself; the others (a worker's requests) it writes as
	// the log republishes them.
	headerOrigin = "Tg-Origin"
)

const originEdge = "edge"

const (
	eventOpen    = "open"
	eventClose   = "close"
	eventRequest = "request"
	eventResume  = "resume"
)

// eventLog is the JetStream stream that keeps every stream event of every session
// for a while. A session's standalone stream (its legacy SSE stream, or its
// Streamable HTTP GET stream) is the subject SessionOut(tool, session); each POST
// answered with a stream has the subject SessionPost(tool, session, post). Anything published on
// those subjects, by an edge or a worker, is stored, and the stream republishes it
// once stored, with its sequence, on the same subject under <prefix>.logged. The
// edge holding a stream follows that with a plain subscription (one interest entry,
// no consumer on the server); it reads the store only for what a client missed: a
// client that reconnects with Last-Event-ID, to any edge, and whatever the live
// feed lost.
type eventLog struct {
	js     jetstream.JetStream
	nc     *nats.Conn
	stream jetstream.Stream
	subj   wire.Subjects
	posts  *postFeeds // the POST streams followed for calls, a subscription per session
}

func eventStreamName(s wire.Subjects) string {
	p := s.Prefix
	if p == "" {
		p = wire.DefaultPrefix
	}
	return strings.NewReplacer(".", "-", "*", "-", ">", "-").Replace(p) + "-mcp-events"
}

// openEventLog creates the stream, or opens it as every edge shares it: a retention of
// 0 takes the stream's own, and a retention or replica count that differs from the
// stream's is refused unless update is set (the registry's --update-registry). What
// only this code decides (subjects, republishing) is brought up to date: a log made
// by an older version, with other subjects, takes this version's. It retries while a
// new cluster elects its JetStream leader.
func openEventLog(ctx context.Context, js jetstream.JetStream, nc *nats.Conn, subj wire.Subjects, replicas int, retention time.Duration, update bool) (*eventLog, error) {
	name := eventStreamName(subj)
	var have *jetstream.StreamConfig
	for {
		st, err := js.Stream(ctx, name)
		if err == nil {
			c := st.CachedInfo().Config
			have = &c
			break
		}
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			break
		}
		if !retryable(err) {
			return nil, fmt.Errorf("sse: event log %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("sse: event log %s: %w (last error: %v)", name, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
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
				return nil, fmt.Errorf("sse: event log %s has %s %v, this edge asks for %v: give every edge the same settings, "+
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
	}
	cfg.RePublish = &jetstream.RePublish{Source: subj.SessionRoot() + ">", Destination: subj.LoggedRoot() + ">"}
	for {
		st, err := js.CreateOrUpdateStream(ctx, cfg)
		if err == nil {
			l := &eventLog{js: js, nc: nc, stream: st, subj: subj}
			l.posts = &postFeeds{log: l, feeds: map[string]*postFeed{}}
			return l, nil
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
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrDisconnected) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoHeartbeat)
}

// standaloneSubject carries a session's standalone stream.
func (l *eventLog) standaloneSubject(tool, session string) string {
	return l.subj.SessionOut(tool, session)
}

// postSubject carries the stream of one POST of a session.
func (l *eventLog) postSubject(tool, session, post string) string {
	return l.subj.SessionPost(tool, session, post)
}

// replySubject is where the log keeps the tool's answer to the call of a POST
// stream's subject (wire.Subjects.StreamAnswerLogged): beside the stream, not on it,
// since the tool's reply is not a message for the client. The tool sends it on
// wire.Subjects.StreamAnswer, a plain subject, and an edge stores it here (package
// asks): a worker publishes on no subject the log stores. '~' never occurs in a post
// id, so no POST's stream is named so.
func (l *eventLog) replySubject(postSubject string) string { return postSubject + "~reply" }

// appendRecord stores one record and returns its sequence. A msgID makes the append
// idempotent across edges that all decide to write the same record.
func (l *eventLog) appendRecord(ctx context.Context, subject string, data []byte, hdr nats.Header, msgID string) (uint64, error) {
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
		return 0, fmt.Errorf("sse: event log: append to %s: %w", subject, err)
	}
	return ack.Sequence, nil
}

// How a record that must reach its client is stored: each attempt waits appendAttempt
// at most for the log's answer, and attempts go on, under one message id so that the
// log keeps one copy, for up to deliverWait. A stream of the log whose leader died or
// was cut off takes a few seconds (up to about ten) to elect another; a response must
// not be lost to it.
const (
	appendAttempt = 2 * time.Second
	deliverWait   = 30 * time.Second
)

// appendSure is appendRecord for a record that must not be lost: the response of a
// request whose client waits for it on its stream. It tries again, as the same
// message, while the log cannot take it, for up to deliverWait from ctx.
func (l *eventLog) appendSure(ctx context.Context, subject string, data []byte, hdr nats.Header) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, deliverWait)
	defer cancel()
	id := nuid.Next()
	for {
		attempt, cancelAttempt := context.WithTimeout(ctx, appendAttempt)
		seq, err := l.appendRecord(attempt, subject, data, hdr, id)
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

// publish stores one record, as opts allow.
func (l *eventLog) publish(ctx context.Context, subject string, data []byte, hdr nats.Header, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = v
	}
	return l.js.PublishMsg(ctx, msg, opts...)
}

// unheard returns where a new standalone stream starts, given the sequence of its
// own "open" record: after the session's last "close" record if no stream opened
// since; at the session's first record if none ever opened; else after its own
// "open" (the stream still open, or one that broke, had the records meanwhile). It
// reads the session's records up to open, which are few: what a session's client is
// sent outside its POSTs, and a record per stream opened or closed.
func (l *eventLog) unheard(ctx context.Context, subject string, open uint64) (uint64, error) {
	from := uint64(1)
	for seq := uint64(1); ; {
		m, err := l.stream.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return open + 1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("sse: event log: read %s from %d: %w", subject, seq, err)
		}
		if m.Sequence >= open {
			return from, nil
		}
		switch m.Header.Get(headerEvent) {
		case eventOpen:
			from = open + 1
		case eventClose:
			from = m.Sequence + 1
		}
		seq = m.Sequence + 1
	}
}

// record is one event of a stream, as the log keeps it.
type record struct {
	seq    uint64
	header nats.Header
	data   []byte
}

// liveBuffer is how many republished records a follower holds before its stream
// writes them; past it the subscription drops records, which the follower then
// reads from the store.
const liveBuffer = 64

// A follower delivers the records of one subject of the log in order, each once,
// from a sequence on: live, as the log republishes them, and from the store for what
// came before it followed and for what the live feed lost (a stream that fell
// behind, a reconnect to NATS, a republish lost to a change of stream leader).
type follower struct {
	log      *eventLog
	subject  string
	live     chan *nats.Msg
	next     uint64     // the sequence of the first record not yet delivered
	unfollow func()     // ends the following
	lost     func() int // how many records the live feed dropped so far

	reconnects uint64 // the connection's, when last checked
	lostSeen   int    // lost(), when last checked
}

// follow subscribes to what the log stores on subject from now on; set next, then
// take what arrives on live. The subscription comes first so that a record stored
// while the stream reads the store is delivered live if not read.
func (l *eventLog) follow(subject string) (*follower, error) {
	f := &follower{log: l, subject: subject, live: make(chan *nats.Msg, liveBuffer), next: 1, reconnects: l.nc.Stats().Reconnects}
	sub, err := l.nc.ChanSubscribe(l.subj.Logged(subject), f.live)
	if err != nil {
		return nil, fmt.Errorf("sse: event log: follow %s: %w", subject, err)
	}
	f.unfollow = func() { _ = sub.Unsubscribe() }
	f.lost = func() int {
		d, _ := sub.Dropped()
		return d
	}
	return f, nil
}

func (f *follower) stop() { f.unfollow() }

// stored delivers what the log holds from next on, until deliver says it is done.
func (f *follower) stored(ctx context.Context, deliver func(record) bool) (bool, error) {
	for {
		m, err := f.log.stream.GetMsg(ctx, f.next, jetstream.WithGetMsgSubject(f.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("sse: event log: read %s from %d: %w", f.subject, f.next, err)
		}
		f.next = m.Sequence + 1
		if deliver(record{seq: m.Sequence, header: m.Header, data: m.Data}) {
			return true, nil
		}
	}
}

// take delivers a record of the live feed: nothing if it was delivered already; the
// records before it from the store if the one it follows was not delivered.
func (f *follower) take(ctx context.Context, m *nats.Msg, deliver func(record) bool) (bool, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || seq < f.next {
		return false, nil
	}
	// The sequence of the subject's record before this one; 0 for none.
	prev, _ := strconv.ParseUint(m.Header.Get(jetstream.LastSequenceHeader), 10, 64)
	if prev >= f.next {
		return f.stored(ctx, deliver)
	}
	f.next = seq + 1
	return deliver(record{seq: seq, header: m.Header, data: m.Data}), nil
}

// mayHaveLost reports whether the live feed may have lost records since the last
// check: the connection to NATS was re-established or the subscription dropped some.
func (f *follower) mayHaveLost() bool {
	r, d := f.log.nc.Stats().Reconnects, f.lost()
	lost := r != f.reconnects || d != f.lostSeen
	f.reconnects, f.lostSeen = r, d
	return lost
}

// jsErrDuplicateInProcess is JetStream's answer to a message whose id another
// publisher's message, not yet stored, carries too.
const jsErrDuplicateInProcess = 10158

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
