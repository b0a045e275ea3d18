package core

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"
)

// CallJSONOrStream runs a session's tools/call whose client takes either type (its
// Request.LargeAnswers may be set: both answers write a large result as it is read). An
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
func (s *Server) CallJSONOrStream(reqCtx context.Context, w http.ResponseWriter, accept Accepts, rr *Request, raw []byte) {
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
			ps = s.newPostStream(rr.Session, false, nil)
		}
		s.streamCall(reqCtx, w, rr, raw, call, ps)
	}
	var ps *postStream
	if s.mayNotify(rr) {
		ps = s.newPostStream(rr.Session, asksClient(rr.Session), func(ps *postStream) { go stream(ps) })
		rr.Notify = ps.note
		if ps.f != nil {
			rr.Post = ps.post
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
	result, err := s.Handle(ctx, rr)
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
	s.AnswerRequest(w, accept, rr, result, err)
}

// errCallPanicked answers, on its stream, a call whose handling panicked.
var errCallPanicked = errors.New("sse: the call failed on the edge")

// jsonOrStream is how a call of CallJSONOrStream is answered: once it ended before a
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
func (s *Server) mayNotify(rr *Request) bool {
	params, err := rr.callParams()
	if err != nil {
		return false // answered with an error at once
	}
	return params.Meta["progressToken"] != nil || s.logLevel(rr, false) != "" || asksClient(rr.Session)
}
