// Package asks is the edge's side of what workers ask of the bus. A worker has no
// JetStream reach (JetStream publishes its answers on any reply subject a requester
// names, so a user that may reach it at all can make the server publish anywhere in
// the account), so it asks an edge to store its tool's record and its presence, to
// use its tool's state bucket, and to put messages for its MCP sessions' clients in
// the session event log (see wire.Subjects.Asks for the subjects). Every edge runs a
// Server; they take the asks in one queue group.
//
// A Server acts only on an ask whose subject names a tool, on that tool's own
// records, bucket and sessions, and answers only on a reply subject under that
// tool's inbox (wire.AskReplyAllowed): an ask with any other reply subject is
// dropped unanswered, so no worker can make the edge publish where it chooses. The
// worker's credentials let it ask only for its own tool.
package asks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// DefaultConcurrency bounds how many asks one edge works on at once; past it the
// rest wait in this edge's subscriptions, in order, until a slot is free.
const DefaultConcurrency = 64

// answerMargin is what an answer keeps free of the server's max_payload for its
// headers: a keys answer longer than max_payload less this is too_large.
const answerMargin = 1024

// Server answers workers' asks on one edge's connection.
type Server struct {
	nc   *nats.Conn
	js   jetstream.JetStream
	subj wire.Subjects
	log  *slog.Logger
	// getBytes reads a payload's parts with GetBytes, as they were first read; the
	// benchmarks compare it with readPart's sized buffer. Set before any ask.
	getBytes bool
	subs     []*nats.Subscription
	sem      chan struct{}
	wg       sync.WaitGroup // the asks taken; Add only through enter

	stopMu  sync.Mutex
	stopped bool // Stop began: no ask is taken after

	working, peak atomic.Int64 // asks worked on now, and the most at once

	mu      sync.Mutex
	buckets map[string]jetstream.KeyValue // state buckets opened, by name
	objects jetstream.ObjectStore         // the payloads bucket, once opened
}

// Serve subscribes to every tool's asks in the edges' queue group (wire
// Subjects.AskQueue) until Stop. concurrency bounds the asks worked on at once
// (DefaultConcurrency when 0).
func Serve(nc *nats.Conn, subj wire.Subjects, concurrency int, log *slog.Logger) (*Server, error) {
	if concurrency <= 0 {
		concurrency = DefaultConcurrency
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("asks: %w", err)
	}
	s := &Server{nc: nc, js: js, subj: subj, log: log, sem: make(chan struct{}, concurrency), buckets: map[string]jetstream.KeyValue{}}
	for _, subject := range subj.Asks() {
		sub, err := nc.QueueSubscribe(subject, subj.AskQueue(), s.take)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("asks: subscribe to %s: %w", subject, err)
		}
		s.subs = append(s.subs, sub)
	}
	if err := nc.Flush(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("asks: %w", err)
	}
	return s, nil
}

// Stop stops taking asks and waits for those taken.
func (s *Server) Stop() {
	for _, sub := range s.subs {
		_ = sub.Unsubscribe()
	}
	// A callback may still be running after Unsubscribe returns: it takes no ask
	// once stopped is set, so no Add races the Wait.
	s.stopMu.Lock()
	s.stopped = true
	s.stopMu.Unlock()
	s.wg.Wait()
}

// enter counts an ask in, unless Stop began.
func (s *Server) enter() bool {
	s.stopMu.Lock()
	defer s.stopMu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	return true
}

func (s *Server) take(m *nats.Msg) {
	a, ok := s.subj.ParseAsk(m.Subject)
	if !ok {
		s.log.Warn("ask dropped: its subject breaks the rules", "subject", m.Subject)
		return
	}
	// A stream answer is a worker's reply to the edge's call: never answered. Any
	// other ask is answered only under the tool's own inbox.
	if a.Kind != wire.AskAnswerKind && m.Reply != "" && !wire.AskReplyAllowed(a.Tool, m.Reply) {
		s.log.Warn("ask dropped: its reply subject is not the tool's inbox", "tool", a.Tool, "subject", m.Subject)
		return
	}
	s.sem <- struct{}{}
	if !s.enter() {
		<-s.sem
		return
	}
	s.began()
	go func() {
		defer func() { s.working.Add(-1); <-s.sem; s.wg.Done() }()
		ctx, cancel := context.WithTimeout(context.Background(), wire.AskTimeout)
		defer cancel()
		answer := s.answer(ctx, a, m)
		if answer == nil || m.Reply == "" || a.Kind == wire.AskAnswerKind {
			return
		}
		answer.Subject = m.Reply
		if err := s.nc.PublishMsg(answer); err != nil {
			s.log.Warn("ask answer not sent", "tool", a.Tool, "err", err)
		}
	}()
}

// began counts an ask taken, and the most worked on at once.
func (s *Server) began() {
	n := s.working.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
}

func (s *Server) answer(ctx context.Context, a wire.Ask, m *nats.Msg) *nats.Msg {
	var rev uint64
	var body []byte
	var err error
	switch a.Kind {
	case wire.AskRecordKind:
		rev, err = s.record(ctx, a.Tool, m.Data)
	case wire.AskPresenceKind:
		rev, err = s.presence(ctx, a, m)
	case wire.AskStateKind:
		body, rev, err = s.state(ctx, a.Tool, a.Op, m)
	case wire.AskPayloadKind:
		body, err = s.payload(ctx, a, m)
	case wire.AskSessionKind:
		rev, err = s.store(ctx, sessionOut(s.subj, a, m.Header), m.Data, nil)
	case wire.AskAnswerKind:
		_, err = s.store(ctx, s.subj.StreamAnswerLogged(a.Tool, a.Session, a.Post), m.Data, answerHeaders(m.Header))
		if err != nil {
			s.log.Warn("a tool's stream answer not logged", "tool", a.Tool, "session", a.Session, "err", err)
		}
		return nil
	}
	if err != nil {
		var ae *wire.AskError
		if !errors.As(err, &ae) {
			ae = toAskError(err)
		}
		if ae.Code == wire.AskFailed {
			s.log.Warn("ask failed", "tool", a.Tool, "subject", m.Subject, "err", err)
		}
		return wire.AskErrorReply("", ae.Code, ae.Message)
	}
	return wire.AskReply("", rev, body)
}

// sessionOut is where a worker's message for its session's client is stored: on the
// stream of the POST it names (Tg-Post; a request related to a call answered on that
// stream), else on the session's standalone stream.
func sessionOut(subj wire.Subjects, a wire.Ask, h nats.Header) string {
	if post := h.Get(wire.HeaderPost); post != "" && wire.ValidToken(post) {
		return subj.SessionPost(a.Tool, a.Session, post)
	}
	return subj.SessionOut(a.Tool, a.Session)
}

func badRequest(format string, args ...any) error {
	return &wire.AskError{Code: wire.AskBadRequest, Message: fmt.Sprintf(format, args...)}
}

// toAskError names a JetStream error for the worker.
func toAskError(err error) *wire.AskError {
	var api *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound), errors.Is(err, jetstream.ErrStreamNotFound),
		errors.Is(err, jetstream.ErrNoStreamResponse), errors.Is(err, nats.ErrNoResponders):
		return &wire.AskError{Code: wire.AskNoBucket, Message: "nothing stores it on this NATS system"}
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted), errors.Is(err, registry.ErrNotFound):
		return &wire.AskError{Code: wire.AskNotFound, Message: "the key has no value"}
	case errors.Is(err, jetstream.ErrKeyExists):
		return &wire.AskError{Code: wire.AskExists, Message: "the key has a value, or another revision"}
	case errors.Is(err, jetstream.ErrInvalidKey):
		return &wire.AskError{Code: wire.AskBadRequest, Message: "the key is not a valid key"}
	case errors.As(err, &api) && (api.ErrorCode == jetstream.JSErrCodeStreamMessageExceedsMaximum || strings.Contains(api.Description, "maximum bytes")):
		return &wire.AskError{Code: wire.AskTooLarge, Message: api.Description}
	}
	return &wire.AskError{Code: wire.AskFailed, Message: "the edge could not do it; try again"}
}

// record stores the tool's record unless the registry holds it already (its
// UpdatedAt apart): every instance asks at start, and an unchanged tool must not look
// changed to the edges.
func (s *Server) record(ctx context.Context, tool string, data []byte) (uint64, error) {
	var rec wire.Tool
	if err := json.Unmarshal(data, &rec); err != nil {
		return 0, badRequest("the record is not a tool record: %v", err)
	}
	if rec.ID != tool {
		return 0, badRequest("the record is tool %q's, asked for as %q's", rec.ID, tool)
	}
	if err := wire.CheckTool(&rec); err != nil {
		return 0, badRequest("%v", err)
	}
	kv, err := s.js.KeyValue(ctx, wire.BucketTools)
	if err != nil {
		return 0, err
	}
	cur, curRev, err := registry.ReadLatest(ctx, s.js, wire.BucketTools, tool)
	if err == nil {
		var have wire.Tool
		if json.Unmarshal(cur, &have) == nil {
			have.UpdatedAt, rec.UpdatedAt = time.Time{}, time.Time{}
			a, errA := json.Marshal(have)
			b, errB := json.Marshal(rec)
			if errA == nil && errB == nil && string(a) == string(b) {
				return curRev, nil
			}
		}
	} else if !errors.Is(err, registry.ErrNotFound) {
		return 0, err
	}
	rec.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, err
	}
	return kv.Put(ctx, tool, b)
}

// presence stores or removes an instance's presence, with its own time to live.
func (s *Server) presence(ctx context.Context, a wire.Ask, m *nats.Msg) (uint64, error) {
	if m.Header.Get(wire.HeaderOp) == "delete" {
		return s.store(ctx, wire.PresenceRecord(a.Tool, a.Instance), nil, nats.Header{"KV-Operation": {"DEL"}})
	}
	var p wire.Presence
	if err := json.Unmarshal(m.Data, &p); err != nil {
		return 0, badRequest("the presence is not a presence record: %v", err)
	}
	if p.Tool != a.Tool || p.Instance != a.Instance {
		return 0, badRequest("the presence is %s.%s's, asked for as %s.%s's", p.Tool, p.Instance, a.Tool, a.Instance)
	}
	ttl, err := wire.ReadTTL(m.Header)
	if err != nil || ttl == 0 {
		return 0, badRequest("a presence needs its time to live in %s, in whole seconds", wire.HeaderTTL)
	}
	b, err := json.Marshal(p)
	if err != nil {
		return 0, err
	}
	return s.store(ctx, wire.PresenceRecord(a.Tool, a.Instance), b, ttlHeader(ttl))
}

func ttlHeader(ttl time.Duration) nats.Header {
	return nats.Header{"Nats-TTL": {strconv.FormatInt(wire.TTLSeconds(ttl), 10) + "s"}}
}

// store publishes data on subject through JetStream and returns where it was stored.
func (s *Server) store(ctx context.Context, subject string, data []byte, hdr nats.Header) (uint64, error) {
	msg := nats.NewMsg(subject)
	msg.Data = data
	for k, v := range hdr {
		msg.Header[k] = v
	}
	ack, err := s.js.PublishMsg(ctx, msg)
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// answerHeaders are the headers of a tool's reply the event log keeps with its stream
// answer: the wire contract's reply headers, and the server's no-responders status.
// Nothing else passes, so a worker sets no JetStream header of its own there.
func answerHeaders(h nats.Header) nats.Header {
	out := nats.Header{}
	for _, k := range []string{wire.HeaderContentType, wire.HeaderStatus, wire.HeaderResult, wire.HeaderErrorCode, wire.HeaderError, wire.HeaderPayload, "Status", "Description"} {
		if v := h.Values(k); len(v) > 0 {
			out[k] = v
		}
	}
	return out
}

// bucket opens the tool's state bucket, once per edge.
func (s *Server) bucket(ctx context.Context, tool string) (jetstream.KeyValue, error) {
	name := wire.StateBucket(tool)
	s.mu.Lock()
	kv := s.buckets[name]
	s.mu.Unlock()
	if kv != nil {
		return kv, nil
	}
	kv, err := s.js.KeyValue(ctx, name)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, &wire.AskError{Code: wire.AskNoBucket, Message: fmt.Sprintf("tool %s has no state bucket %s (an admin makes it: toolgate state create %s)", tool, name, tool)}
	}
	if err != nil {
		// Only "not found" says the bucket is missing: JetStream not answering (no
		// responders while a node restarts, a timeout) is a failure to try again, not
		// a missing bucket, which a worker opening its state takes for good.
		return nil, &wire.AskError{Code: wire.AskFailed, Message: fmt.Sprintf("the edge could not open %s (%v); try again", name, err)}
	}
	s.mu.Lock()
	s.buckets[name] = kv
	s.mu.Unlock()
	return kv, nil
}

// state runs one operation on the tool's state bucket.
func (s *Server) state(ctx context.Context, tool string, op wire.StateOp, m *nats.Msg) ([]byte, uint64, error) {
	kv, err := s.bucket(ctx, tool)
	if err != nil {
		return nil, 0, err
	}
	key := m.Header.Get(wire.HeaderKey)
	if op != wire.StateKeys && op != wire.StateInfo {
		if err := wire.CheckStateKey(key); err != nil {
			return nil, 0, badRequest("%s: %v", wire.HeaderKey, err)
		}
	}
	ttl, err := wire.ReadTTL(m.Header)
	if err != nil {
		return nil, 0, badRequest("%v", err)
	}
	switch op {
	case wire.StateInfo:
		return nil, 0, nil
	case wire.StateGet:
		// From the stream's leader: another instance of the tool may have written the
		// key through another node a moment ago, and been told it was stored.
		return registry.ReadLatest(ctx, s.js, kv.Bucket(), key)
	case wire.StatePut:
		if ttl == 0 {
			rev, err := kv.Put(ctx, key, m.Data)
			return nil, rev, err
		}
		rev, err := s.store(ctx, "$KV."+wire.StateBucket(tool)+"."+key, m.Data, ttlHeader(ttl))
		return nil, rev, err
	case wire.StateCreate:
		var opts []jetstream.KVCreateOpt
		if ttl > 0 {
			opts = append(opts, jetstream.KeyTTL(ttl))
		}
		rev, err := kv.Create(ctx, key, m.Data, opts...)
		return nil, rev, err
	case wire.StateUpdate:
		want, err := strconv.ParseUint(m.Header.Get(wire.HeaderRevision), 10, 64)
		if err != nil || want == 0 {
			return nil, 0, badRequest("an update names the revision it replaces (%s)", wire.HeaderRevision)
		}
		rev, err := kv.Update(ctx, key, m.Data, want)
		return nil, rev, err
	case wire.StateDelete:
		return nil, 0, kv.Delete(ctx, key)
	case wire.StateKeys:
		keys, err := kv.Keys(ctx)
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			keys, err = []string{}, nil
		}
		if err != nil {
			return nil, 0, err
		}
		b, err := json.Marshal(keys)
		if err != nil {
			return nil, 0, err
		}
		if max := s.nc.MaxPayload(); max > 0 && int64(len(b)) > max-answerMargin {
			return nil, 0, &wire.AskError{Code: wire.AskTooLarge, Message: fmt.Sprintf("the bucket's %d keys are more than one answer carries", len(keys))}
		}
		return b, 0, nil
	}
	return nil, 0, badRequest("unknown operation %q", op)
}
