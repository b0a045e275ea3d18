package sse

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/registry"
)

// ServeStreamable serves a link's Streamable HTTP endpoint: POST, GET and DELETE.
// Requests of 2026-07-28 (their _meta or MCP-Protocol-Version says so) are served
// statelessly; the others belong to sessions opened with initialize (2025-03-26 to
// 2025-11-25), which any edge serves.
func (s *Server) ServeStreamable(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		s.refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if !s.guard(w, r) {
		return
	}
	if _, err := s.view.Snapshot().Tool(p, tool); err != nil {
		s.refuse(w, http.StatusNotFound, "Not Found: "+err.Error())
		return
	}
	if r.Method != http.MethodPost && isStateless(r.Header.Get(headerProtocolVersion)) {
		// 2026-07-28 has neither the GET stream nor sessions to delete.
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: protocol version "+version20260728+" has no "+r.Method+"; change notifications come from subscriptions/listen")
		return
	}
	switch r.Method {
	case http.MethodGet:
		s.serveGet(w, r, p, tool)
	case http.MethodDelete:
		sess, ok := s.requireSession(w, r, p, tool, jsonrpc.ID{})
		if !ok {
			return
		}
		s.endSession(sess.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		s.servePost(w, r, p, tool)
	}
}

// requireSession finds the session a request names in Mcp-Session-Id: 400 without
// one, 404 for one that ended, expired or never was. The refusal answers rpcID, the
// JSON-RPC request the HTTP request carries, when it carries one: a client matches
// an error to its call by the id.
func (s *Server) requireSession(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string, rpcID jsonrpc.ID) (*registry.Session, bool) {
	refuse := func(status int, msg string) {
		writeJSON(w, status, encodeError(rpcID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}))
	}
	id := r.Header.Get(headerSessionID)
	if id == "" {
		refuse(http.StatusBadRequest, "Bad Request: Mcp-Session-Id header required; initialize first")
		return nil, false
	}
	sess, err := s.session(r.Context(), p, tool, id)
	if errors.Is(err, registry.ErrNotFound) {
		refuse(http.StatusNotFound, "Not Found: session ended or expired; initialize a new one")
		return nil, false
	}
	if err != nil {
		refuse(http.StatusServiceUnavailable, "the session store is unavailable; retry")
		return nil, false
	}
	s.touch(r.Context(), sess)
	return sess, true
}

// checkVersionHeader applies MCP-Protocol-Version to a session's request: absent
// means 2025-03-26, which did not send it; anything else must be a revision of this
// kind.
func (s *Server) checkVersionHeader(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get(headerProtocolVersion)
	if v == "" || slices.Contains(legacyVersions, v) {
		return true
	}
	writeRPCError(w, jsonrpc.ID{}, unsupportedVersion(v))
	return false
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	if a := parseAccept(r.Header.Get("Accept")); !a.events {
		s.refuse(w, http.StatusNotAcceptable, "Not Acceptable: the GET stream is text/event-stream")
		return
	}
	if !s.checkVersionHeader(w, r) {
		return
	}
	sess, ok := s.requireSession(w, r, p, tool, jsonrpc.ID{})
	if !ok {
		return
	}
	var resume *eventID
	if h := r.Header.Get(headerLastEventID); h != "" {
		last, ok := parseEventID(h)
		if !ok || last.session != sess.ID {
			s.refuse(w, http.StatusBadRequest, "Bad Request: Last-Event-ID names no event of this session")
			return
		}
		if last.post != "" {
			s.replayPost(w, r, sess, last)
			return
		}
		resume = &last
	}
	s.holdStandalone(w, r, sess, resume, false, func(ew *eventWriter, at string) error {
		if !sess.Stream {
			s.streamHeld(sess, true)
		}
		return ew.prime(at, s.cfg.RetryAfter)
	}, func(why streamEnd) {
		if why == endClient || why == endServer {
			s.closeStandalone(sess)
			s.streamHeld(sess, false)
		}
	})
}

func (s *Server) servePost(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	accept := parseAccept(r.Header.Get("Accept"))
	if !accept.json && !accept.events {
		s.refuse(w, http.StatusNotAcceptable, "Not Acceptable: answers are application/json or text/event-stream")
		return
	}
	raw, msg, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	req, isReq := msg.(*jsonrpc.Request)
	rr := &rpcRequest{p: p, tool: tool, req: req}
	if isReq && (isStateless(r.Header.Get(headerProtocolVersion)) || req.Method != methodInitialize && isStateless(rr.metaVersion())) {
		s.serveStateless(w, r, p, tool, req, accept)
		return
	}
	if !s.checkVersionHeader(w, r) {
		return
	}
	// Close cancels the calls it finds running (callSet); the rest is quick.
	ctx := r.Context()
	if isReq && req.Method == methodInitialize && req.IsCall() {
		result, err := s.handle(ctx, rr)
		if rr.sess != nil {
			w.Header().Set(headerSessionID, rr.sess.ID)
		}
		s.answer(w, accept, req.ID, result, err)
		return
	}
	var rpcID jsonrpc.ID
	if isReq {
		rpcID = req.ID
	}
	sess, ok := s.requireSession(w, r, p, tool, rpcID)
	if !ok {
		return
	}
	if !isReq {
		if err := s.relayAnswer(sess, msg.(*jsonrpc.Response), raw); err != nil {
			writeRPCError(w, jsonrpc.ID{}, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	rr.sess = sess
	if s.log.Enabled(ctx, slog.LevelDebug) { // spares every request the arguments' allocations
		s.log.Debug("request", "session", sess.ID, "method", req.Method, "id", req.ID.Raw())
	}
	if !req.IsCall() {
		s.notification(rr)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	defer s.sustain(sess)()
	if req.Method == methodToolsCall && accept.events {
		if !accept.json {
			s.streamCall(ctx, w, rr, raw, nil, nil)
			return
		}
		s.callJSONOrStream(ctx, w, accept, rr, raw)
		return
	}
	result, err := s.handle(ctx, rr)
	s.answer(w, accept, req.ID, result, err)
}

// relayToolMessages writes to a call's stream the messages the tool put on it (its
// requests to the client, related to the call), as f takes them, until stop is
// closed; then it writes what f holds already, so that what the tool sent before its
// answer goes before the answer.
func (s *Server) relayToolMessages(ctx context.Context, ew *eventWriter, sess *registry.Session, post string, f *registry.Follower, stop <-chan struct{}) {
	deliver := func(rec registry.Record) bool {
		if rec.Header.Get(headerEvent) != "" || rec.Header.Get(headerOrigin) != "" {
			return false // this edge's own, written already, or a record that steers
		}
		_ = ew.event(eventID{session: sess.ID, post: post, seq: rec.Seq}.String(), "message", rec.Data)
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

// A postStream is the stream of the POST of a session's tools/call: its subject in
// the event log, and, for a call that runs before its stream opens (callJSONOrStream),
// what opens it early.
type postStream struct {
	post, subject string
	// f follows subject, from before the tool could put anything there: what the tool
	// sends the client about the call (its requests) it puts there. nil when nothing
	// follows it (the tool was not told of the stream).
	f *registry.Follower
	// wake, when not nil, is told of the call's first notification or of the tool's
	// first record on the stream: something to send, so the stream must open.
	wake  func(*postStream)
	woken atomic.Bool

	opened   chan struct{} // closed once send is set, or once the call will not stream
	settling sync.Once
	send     func(msg []byte, final bool)
}

// newPostStream names a new POST stream of sess; with follow it follows the stream's
// subject in the log from now on. wake, if not nil, is called once, when the call
// has something to send before the stream opens.
func (s *Server) newPostStream(sess *registry.Session, follow bool, wake func(*postStream)) *postStream {
	post := registry.NewID("")
	ps := &postStream{post: post, subject: s.events.PostSubject(sess.Tool, sess.ID, post), wake: wake, opened: make(chan struct{})}
	if follow {
		f, err := s.events.FollowPost(sess.Tool, sess.ID, post, ps.awake)
		if err != nil {
			s.log.Warn("following a call stream", "session", sess.ID, "err", err)
		} else {
			ps.f = f
		}
	}
	return ps
}

// settle sets how the call's notifications are sent: on the stream, or (nil) not at
// all, the call answering without one.
func (ps *postStream) settle(send func(msg []byte, final bool)) {
	ps.settling.Do(func() {
		ps.send = send
		close(ps.opened)
	})
}

// awake tells wake, once, that the call has something to send.
func (ps *postStream) awake() {
	if ps.wake != nil && ps.woken.CompareAndSwap(false, true) {
		ps.wake(ps)
	}
}

// note sends a notification of the call (progress, a log message) on the stream,
// once it is open; the first one opens it.
func (ps *postStream) note(msg []byte) {
	ps.awake()
	<-ps.opened
	if ps.send != nil {
		ps.send(msg, false)
	}
}

// sentBefore reports whether the call sent anything for the stream (a notification,
// a record of the tool's) before it opened.
func (ps *postStream) sentBefore() bool { return ps.woken.Load() }

// stop ends the following of the stream's subject.
func (ps *postStream) stop() {
	if ps.f != nil {
		ps.f.Stop()
	}
}

// callJSONOrStream runs a session's tools/call whose client takes either type. An
// answer that comes first within StreamAfter is plain JSON, with nothing in the event
// log. The call turns into a stream (primed with an event id; its client resumes it
// with Last-Event-ID should the connection break while the call runs on) when it runs
// longer, or as soon as it has something for the client before its answer: progress,
// a log message, or a request of the tool (sampling, elicitation, roots; a client that
// declared one has its call's tool told of the stream, whose subject this edge
// follows), which then go on the stream in the order they came, the answer last.
//
// The call runs on the request's own goroutine, whose stack has grown to what a call
// takes on the connection's earlier requests: a goroutine per call grew its stack on
// every call, copying it each time (a tenth of the edge's CPU per call). The call must
// outlive the POST once it streams, so it runs on the server's context and is
// cancelled here while it would answer with JSON. The stream, once something starts
// it, is written by the goroutine that did (the timer's, or one the tool's first
// message starts) while this one is in the call; this one returns only once the
// stream is done with the response.
func (s *Server) callJSONOrStream(reqCtx context.Context, w http.ResponseWriter, accept accepts, rr *rpcRequest, raw []byte) {
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan handled, 1)
	call := &running{cancel: cancel, done: done}
	st := &jsonOrStream{}
	// stream answers the call on ps from now on (a new stream if nil), unless it is
	// answered already.
	stream := func(ps *postStream) {
		if !st.begin(reqCtx) {
			return
		}
		defer close(st.streaming)
		if ps == nil {
			ps = s.newPostStream(rr.sess, false, nil)
		}
		s.streamCall(reqCtx, w, rr, raw, call, ps)
	}
	var ps *postStream
	if s.mayNotify(rr) {
		ps = s.newPostStream(rr.sess, asksClient(rr.sess), func(ps *postStream) { go stream(ps) })
		rr.notify = ps.note
		if ps.f != nil {
			rr.post = ps.post
		}
	}
	timer := time.AfterFunc(s.cfg.StreamAfter, func() { stream(ps) })
	// The client left before a stream it could resume was opened: that is a
	// cancellation.
	stopLeave := context.AfterFunc(reqCtx, func() {
		if !st.isStreaming() {
			cancel()
		}
	})
	// noStream ends what was set up for a stream that will not be.
	noStream := func() {
		timer.Stop()
		cancel()
		if ps != nil {
			ps.settle(nil)
			ps.stop()
		}
	}
	ended := false
	defer func() {
		if ended {
			return
		}
		// The call panicked: the recovery above this handler answers, so no stream may
		// start now, and one that did must end before the handler returns.
		stopLeave()
		if streamed := st.end(); streamed != nil {
			timer.Stop()
			done <- handled{err: errCallPanicked}
			<-streamed
			return
		}
		noStream()
	}()
	result, err := s.handle(ctx, rr)
	ended = true
	done <- handled{result, err}
	stopLeave()
	if streamed := st.end(); streamed != nil {
		timer.Stop()
		<-streamed
		return
	}
	if ps != nil && ps.sentBefore() && reqCtx.Err() == nil {
		// The tool sent something before it answered, and the call ended before the
		// stream that takes it began: the answer follows it there.
		timer.Stop()
		s.streamCall(reqCtx, w, rr, raw, call, ps)
		return
	}
	noStream()
	if reqCtx.Err() != nil {
		return // nobody to answer
	}
	s.answer(w, accept, rr.req.ID, result, err)
}

// errCallPanicked answers, on its stream, a call whose handling panicked.
var errCallPanicked = errors.New("sse: the call failed on the edge")

// jsonOrStream is how a call of callJSONOrStream is answered: once it ended before a
// stream began, with JSON; once streaming is made, on the stream, which closes it when
// it is done with the response.
type jsonOrStream struct {
	mu        sync.Mutex
	answered  bool
	streaming chan struct{}
}

// begin makes the call's answer a stream, unless it is answered already, streams
// already, or its client left; false if not.
func (st *jsonOrStream) begin(reqCtx context.Context) bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.answered || st.streaming != nil || reqCtx.Err() != nil {
		return false
	}
	st.streaming = make(chan struct{})
	return true
}

func (st *jsonOrStream) isStreaming() bool {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.streaming != nil
}

// end records that the call ended, and returns the stream it is answered on, nil for
// none.
func (st *jsonOrStream) end() chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.answered = true
	return st.streaming
}

// mayNotify reports whether a session's tools/call may send its client anything
// before the answer: progress, when the call carries a progressToken, or log
// messages, once the session set a level; or requests of the tool (sampling,
// elicitation, roots), when the client declared a capability for one, which travel
// on the call's stream. A call that cannot is answered without a stream unless it
// runs past StreamAfter, and costs nothing to watch.
func (s *Server) mayNotify(rr *rpcRequest) bool {
	params, err := rr.callParams()
	if err != nil {
		return false // answered with an error at once
	}
	return params.Meta["progressToken"] != nil || s.logLevel(rr, false) != "" || asksClient(rr.sess)
}

// answer writes a request's answer as JSON, or as a one-event stream to a client
// that takes only streams.
func (s *Server) answer(w http.ResponseWriter, accept accepts, id jsonrpc.ID, result []byte, err error) {
	var body []byte
	status := http.StatusOK
	if err != nil {
		body, status = encodeError(id, rpcError(err)), httpStatus(err)
	} else {
		body = encodeResult(id, result)
	}
	if accept.json || status != http.StatusOK {
		writeJSON(w, status, body)
		return
	}
	_ = startEvents(w, status).event("", "message", body)
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

// streamCall answers a session's tools/call with a stream, so that progress and log
// notifications reach the client while the call runs. The stream's events are kept
// in the event log, and a client that loses the connection resumes the stream on any
// edge with Last-Event-ID (the transport's rule: a broken connection is not a
// cancellation). A client that is gone and does not resume within ResumeGrace has
// gone away: its call is cancelled.
//
// call, when not nil, is the call already running on ps (callJSONOrStream), answered
// on the stream from now on; else streamCall starts it, on a new stream.
func (s *Server) streamCall(reqCtx context.Context, w http.ResponseWriter, rr *rpcRequest, raw []byte, call *running, ps *postStream) {
	sess := rr.sess
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
		s.refuse(w, http.StatusServiceUnavailable, "the event log is unavailable; retry")
		return
	}
	if call == nil {
		call = s.startStreamedCall(rr, ps.post, cs.send)
	}
	ps.settle(cs.send)

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
		cs.watch(reqCtx, finished, func() {
			abandoned.Store(true)
			cancelCall()
		})
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
	ew            *eventWriter
}

// openCallStream stores the call's request (raw) at the start of its stream ps and
// opens the stream, primed. running says whether the call runs already
// (callJSONOrStream).
func (s *Server) openCallStream(w http.ResponseWriter, sess *registry.Session, ps *postStream, raw []byte, running bool) (*callStream, error) {
	ctx, cancel := s.detached()
	start, err := s.events.Append(ctx, ps.subject, raw, nats.Header{headerEvent: {eventRequest}}, "")
	cancel()
	if err != nil {
		return nil, err
	}
	cs := &callStream{s: s, sess: sess, post: ps.post, subject: ps.subject, start: start, ew: startEvents(w, http.StatusOK)}
	// A client resuming from the priming event gets what came after it. A call that
	// ran before its stream opened may have had the tool put records on the stream
	// before its request record: they come after the stream's start.
	at := start
	if running && ps.f != nil {
		at = 0
	}
	_ = cs.ew.prime(eventID{session: sess.ID, post: ps.post, seq: at}.String(), s.cfg.RetryAfter)
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
		id = eventID{session: cs.sess.ID, post: cs.post, seq: seq}.String()
	}
	_ = cs.ew.event(id, "message", msg)
}

// watch keeps the stream alive while its client is there, until finished is closed;
// once the client's connection breaks, it waits for the client to resume the stream
// and calls abandon if it does not.
func (cs *callStream) watch(reqCtx context.Context, finished <-chan struct{}, abandon func()) {
	keepAlive := time.NewTicker(cs.s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-keepAlive.C:
			_ = cs.ew.keepAlive(cs.s.cfg.KeepAlive)
		case <-reqCtx.Done():
			if !cs.s.awaitResume(cs.subject, cs.start+1, finished) {
				abandon()
			}
			return
		case <-finished:
			return
		}
	}
}

// startStreamedCall runs rr on the server's context, answered on the stream of post
// through send.
func (s *Server) startStreamedCall(rr *rpcRequest, post string, send func(msg []byte, final bool)) *running {
	sess := rr.sess
	rr.notify = func(msg []byte) { send(msg, false) }
	rr.replyTo = s.subj.StreamAnswer(sess.Tool, sess.ID, post) // an edge logs it at replySubject
	rr.post = post
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan handled, 1)
	go func() {
		result, err := s.handle(ctx, rr)
		done <- handled{result, err}
	}()
	return &running{cancel: cancel, done: done}
}

// answer puts the call's outcome h on the stream, as its last event.
func (cs *callStream) answer(rr *rpcRequest, h handled, abandoned bool) {
	result, err := h.result, h.err
	cs.s.log.Debug("answer", "session", cs.sess.ID, "id", rr.req.ID.Raw(), "err", err)
	switch {
	case errors.Is(err, context.Canceled) && abandoned:
		// Nobody waits; but should the client resume after all, it learns what
		// became of its request instead of waiting for ever.
		cs.send(encodeError(rr.req.ID, rpcError(fmt.Errorf("%w: the client left and did not resume the stream within %v", context.Canceled, cs.s.cfg.ResumeGrace))), true)
	case errors.Is(err, context.Canceled):
		// Cancelled by the client: no answer is owed.
	case err != nil:
		cs.send(encodeError(rr.req.ID, rpcError(err)), true)
	default:
		cs.send(encodeResult(rr.req.ID, result), true)
	}
}
