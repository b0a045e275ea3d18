package core

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// StreamCall answers a session's tools/call, raw as its client sent it, with a
// stream (streamCall): the transport's answer to a client that takes only streams.
func (s *Server) StreamCall(reqCtx context.Context, w http.ResponseWriter, rr *Request, raw []byte) {
	s.streamCall(reqCtx, w, rr, raw, nil, nil)
}

// streamCall answers a session's tools/call with a stream, so that progress and log
// notifications reach the client while the call runs. The stream's events are kept
// in the event log, and a client that loses the connection resumes the stream on any
// edge with Last-Event-ID (the transport's rule: a broken connection is not a
// cancellation). A client that is gone and does not resume within ResumeGrace has
// gone away: its call is cancelled.
//
// call, when not nil, is the call already running on ps (CallJSONOrStream), answered
// on the stream from now on; else streamCall starts it, on a new stream.
func (s *Server) streamCall(reqCtx context.Context, w http.ResponseWriter, rr *Request, raw []byte, call *running, ps *postStream) {
	sess := rr.Session
	if ps == nil {
		ps = s.newPostStream(sess, true, nil)
	}
	cs, err := s.openCallStream(w, sess, ps, raw, call != nil)
	if err != nil {
		s.log.Error("opening a call stream", "session", sess.ID, "err", err)
		ps.settle(nil)
		if call != nil {
			call.cancel()
			<-call.done
		}
		ps.stop()
		s.Refuse(w, http.StatusServiceUnavailable, "the event log is unavailable; retry")
		return
	}
	if call == nil {
		started := s.startStreamedCall(rr, cs)
		call = &started
	}
	ps.settle(cs)

	// The call outlives the POST's connection by up to ResumeGrace. One goroutine
	// keeps the stream alive while the client is there, and waits for it to resume
	// once it is not.
	cancelCall := call.cancel
	defer cancelCall()
	var abandoned atomic.Bool
	finished := make(chan struct{})
	watched := make(chan struct{})
	defer func() {
		close(finished)
		<-watched // no keep-alive after the handler returns
	}()
	// What the tool sends the client about the call (its requests) it publishes on
	// the stream's subject; this edge writes it as the log stores it.
	answered := make(chan struct{})
	relayed := make(chan struct{})
	if ps.f == nil {
		close(relayed)
	} else {
		defer ps.f.Stop()
		go func() {
			defer close(relayed)
			s.relayToolMessages(s.ctx, cs.ew, sess, ps.post, ps.f, answered)
		}()
	}
	go func() {
		defer close(watched)
		cs.watch(reqCtx, finished, cancelCall, &abandoned)
	}()

	h := <-call.done
	close(answered)
	<-relayed
	cs.answer(rr, h, abandoned.Load())
}

// callStream is the stream a session's tools/call is answered on, open: its place in
// the event log and its writer.
type callStream struct {
	s             *Server
	sess          *registry.Session
	post, subject string
	start         uint64 // the sequence of the call's request record
	ew            *EventWriter
}

// openCallStream stores the call's request (raw) at the start of its stream ps and
// opens the stream, primed. running says whether the call runs already
// (CallJSONOrStream).
func (s *Server) openCallStream(w http.ResponseWriter, sess *registry.Session, ps *postStream, raw []byte, running bool) (*callStream, error) {
	ctx, cancel := s.detached()
	start, err := s.events.Append(ctx, ps.subject, raw, nats.Header{headerEvent: {eventRequest}}, "")
	cancel()
	if err != nil {
		return nil, err
	}
	cs := &callStream{s: s, sess: sess, post: ps.post, subject: ps.subject, start: start, ew: StartEvents(w, http.StatusOK)}
	// A client resuming from the priming event gets what came after it. A call that
	// ran before its stream opened may have had the tool put records on the stream
	// before its request record: they come after the stream's start.
	at := start
	if running && ps.f != nil {
		at = 0
	}
	_ = cs.ew.Prime(EventID{Session: sess.ID, Post: ps.post, Seq: at}.String(), s.cfg.RetryAfter)
	return cs, nil
}

// send stores msg on the stream and writes it, with its event id once stored; final
// marks the response, after which the stream ends.
func (cs *callStream) send(msg []byte, final bool) {
	ctx, cancel := cs.s.detached()
	defer cancel()
	hdr := nats.Header{headerOrigin: {originEdge}}
	if final {
		hdr.Set(headerFinal, "1")
	}
	seq, err := cs.s.events.Append(ctx, cs.subject, msg, hdr, "")
	if err != nil {
		cs.s.log.Error("logging a call event", "session", cs.sess.ID, "err", err)
	}
	id := ""
	if seq != 0 {
		id = EventID{Session: cs.sess.ID, Post: cs.post, Seq: seq}.String()
	}
	_ = cs.ew.Event(id, "message", msg)
}

// sendLarge is send for the response of rr, whose result is large: written into a
// payload of the log as it is read, the record naming it, and the event written to
// the client from there. A response that cannot be stored is the failure's.
func (cs *callStream) sendLarge(rr *Request) {
	_, hdr, err := cs.s.ResponseRecord(rr, nil)
	if err != nil {
		cs.s.log.Error("storing a large result", "session", cs.sess.ID, "err", err)
		cs.send(EncodeError(rr.RPC.ID, RPCError(err)), true)
		return
	}
	ctx, cancel := cs.s.detached()
	hdr.Set(headerOrigin, originEdge)
	hdr.Set(headerFinal, "1")
	seq, err := cs.s.events.Append(ctx, cs.subject, nil, hdr, "")
	cancel()
	if err != nil {
		cs.s.log.Error("logging a call event", "session", cs.sess.ID, "err", err)
	}
	id := ""
	if seq != 0 {
		id = EventID{Session: cs.sess.ID, Post: cs.post, Seq: seq}.String()
	}
	p, _, _ := wire.PayloadOf(hdr)
	if err := cs.s.largeEvent(cs.s.ctx, cs.ew, id, p); err != nil {
		cs.s.log.Warn("a large result not sent whole", "session", cs.sess.ID, "err", err)
	}
}

// watch keeps the stream alive while its client is there, until finished is closed;
// once the client's connection breaks, it waits for the client to resume the stream
// and, if it does not, marks the call abandoned and cancels it.
func (cs *callStream) watch(reqCtx context.Context, finished <-chan struct{}, cancelCall context.CancelFunc, abandoned *atomic.Bool) {
	keepAlive := time.NewTicker(cs.s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-keepAlive.C:
			_ = cs.ew.KeepAlive(cs.s.cfg.KeepAlive)
		case <-reqCtx.Done():
			if !cs.s.awaitResume(cs.subject, cs.start+1, finished) {
				abandoned.Store(true)
				cancelCall()
			}
			return
		case <-finished:
			return
		}
	}
}

// startStreamedCall runs rr on the server's context, answered on the open stream cs.
func (s *Server) startStreamedCall(rr *Request, cs *callStream) running {
	sess, post := rr.Session, cs.post
	rr.Notify = func(msg []byte) { cs.send(msg, false) }
	rr.ReplyTo = s.subj.StreamAnswer(sess.Tool, sess.ID, post) // an edge logs it at EventLog.ReplySubject
	rr.Post = post
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan handled, 1)
	go func() {
		result, err := s.Handle(ctx, rr)
		done <- handled{result, err}
	}()
	return running{cancel: cancel, done: done}
}

// answer puts the call's outcome h on the stream, as its last event.
func (cs *callStream) answer(rr *Request, h handled, abandoned bool) {
	result, err := h.result, h.err
	cs.s.log.Debug("answer", "session", cs.sess.ID, "id", rr.RPC.ID.Raw(), "err", err)
	switch {
	case errors.Is(err, context.Canceled) && abandoned:
		// Nobody waits; but should the client resume after all, it learns what
		// became of its request instead of waiting for ever.
		cs.send(EncodeError(rr.RPC.ID, RPCError(fmt.Errorf("%w: the client left and did not resume the stream within %v", context.Canceled, cs.s.cfg.ResumeGrace))), true)
	case errors.Is(err, context.Canceled):
		// Cancelled by the client: no answer is owed.
	case err != nil:
		cs.send(EncodeError(rr.RPC.ID, RPCError(err)), true)
	case rr.large != nil:
		cs.sendLarge(rr)
	default:
		cs.send(EncodeResult(rr.RPC.ID, result), true)
	}
}

// running is a session's tools/call under way: its cancellation, and where its
// outcome arrives.
type running struct {
	cancel context.CancelFunc
	done   <-chan handled
}

type handled struct {
	result []byte
	err    error
}

// awaitResume waits, once the connection of a call's stream broke, for the client to
// resume the stream on any edge, which appends a "resume" record to it; it reports
// whether the client did within ResumeGrace, or the call finished meanwhile. The
// stream's records from seq from on are read first: the client may have resumed
// before its old connection was seen to break.
func (s *Server) awaitResume(subject string, from uint64, finished <-chan struct{}) bool {
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.ResumeGrace)
	defer cancel()
	f, err := s.events.Follow(subject)
	if err != nil {
		s.log.Warn("following a broken call stream", "subject", subject, "err", err)
		select {
		case <-ctx.Done():
			return false
		case <-finished:
			return true
		}
	}
	defer f.Stop()
	f.Next = from
	isResume := func(rec registry.Record) bool { return rec.Header.Get(headerEvent) == eventResume }
	if found, err := f.Stored(ctx, isResume); found {
		return true
	} else if err != nil && ctx.Err() == nil {
		s.log.Warn("reading a broken call stream", "subject", subject, "err", err)
	}
	for {
		select {
		case m := <-f.Live():
			if found, _ := f.Take(ctx, m, isResume); found {
				return true
			}
		case <-ctx.Done():
			return false
		case <-finished:
			return true
		}
	}
}

// relayToolMessages writes to a call's stream the messages the tool put on it (its
// requests to the client, related to the call), as f takes them, until stop is
// closed; then it writes what f holds already, so that what the tool sent before its
// answer goes before the answer.
func (s *Server) relayToolMessages(ctx context.Context, ew *EventWriter, sess *registry.Session, post string, f *registry.Follower, stop <-chan struct{}) {
	deliver := func(rec registry.Record) bool {
		if rec.Header.Get(headerEvent) != "" || rec.Header.Get(headerOrigin) != "" {
			return false // this edge's own, written already, or a record that steers
		}
		_ = ew.Event(EventID{Session: sess.ID, Post: post, Seq: rec.Seq}.String(), "message", rec.Data)
		return false
	}
	take := func(m *nats.Msg) {
		if _, err := f.Take(ctx, m, deliver); err != nil && ctx.Err() == nil {
			s.log.Warn("reading a call stream", "session", sess.ID, "err", err)
		}
	}
	for {
		select {
		case m := <-f.Live():
			take(m)
		case <-stop:
			for {
				select {
				case m := <-f.Live():
					take(m)
				default:
					return
				}
			}
		case <-ctx.Done():
			return
		}
	}
}
