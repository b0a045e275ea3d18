package sse

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/registry"
)

// ServeSSE serves GET on a link's legacy SSE endpoint (HTTP+SSE, 2024-11-05): it
// opens a session and its stream, whose first event names the endpoint to POST
// messages to: messagesPath with the session in the query, relative, so that the
// client posts to whatever host it reached this one by. Responses to those POSTs
// come back on this stream.
//
// A client that reconnects with Last-Event-ID gets its session back, with the events
// it missed, on any edge.
func (s *Server) ServeSSE(w http.ResponseWriter, r *http.Request, p registry.Principal, tool, messagesPath string) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: open the stream with GET; POST messages to the endpoint it names")
		return
	}
	if !s.guard(w, r) {
		return
	}
	if a := parseAccept(r.Header.Get("Accept")); !a.events {
		s.refuse(w, http.StatusNotAcceptable, "Not Acceptable: this endpoint answers text/event-stream")
		return
	}
	if _, err := s.view.Snapshot().Tool(p, tool); err != nil {
		s.refuse(w, http.StatusNotFound, "Not Found: "+err.Error())
		return
	}

	var sess *registry.Session
	var resume *eventID
	newSession := false
	if last, ok := parseEventID(r.Header.Get(headerLastEventID)); ok && last.post == "" {
		if cur, err := s.session(r.Context(), p, tool, last.session); err == nil {
			sess, resume = cur, &last
		}
	}
	if sess == nil {
		var err error
		sess, err = s.newSession(r.Context(), p, tool, version20241105, nil, nil, true)
		if err != nil {
			writeRPCError(w, jsonrpc.ID{}, err)
			return
		}
		newSession = true
	}
	endpoint := messagesPath + "?session_id=" + url.QueryEscape(sess.ID)
	s.holdStandalone(w, r, sess, resume, newSession, func(ew *eventWriter, at string) error {
		return ew.event(at, "endpoint", []byte(endpoint))
	}, func(why streamEnd) {
		// On this transport the stream is the session: a client that leaves ends it,
		// which cancels its calls wherever they run, and so does a stream that never
		// opened, whose client never learned the session. A draining edge leaves the
		// session for the client to resume elsewhere.
		switch {
		case why == endClient, why == endRefused && newSession:
			s.endSession(sess.ID)
		case why == endServer:
			s.closeStandalone(sess)
		}
	})
}

// ServeMessages serves POST on a link's legacy messages endpoint: the client's
// JSON-RPC messages for the session named by the session_id query parameter. It
// answers 202 at once; responses go to the session's stream, held by whichever edge
// the client's GET reached.
func (s *Server) ServeMessages(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: POST JSON-RPC messages here")
		return
	}
	if !s.guard(w, r) {
		return
	}
	id := r.URL.Query().Get("session_id")
	if id == "" {
		id = r.URL.Query().Get("sessionId") // an older spelling some clients send
	}
	if id == "" {
		s.refuse(w, http.StatusBadRequest, "Bad Request: session_id query parameter required")
		return
	}
	sess, err := s.session(r.Context(), p, tool, id)
	if errors.Is(err, registry.ErrNotFound) {
		s.refuse(w, http.StatusNotFound, "Not Found: no such session; open a new stream")
		return
	}
	if err != nil {
		s.refuse(w, http.StatusServiceUnavailable, "the session store is unavailable; retry")
		return
	}
	raw, msg, ok := s.readMessage(w, r)
	if !ok {
		return
	}
	s.touch(r.Context(), sess)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if err := s.relayAnswer(sess, m, raw); err != nil {
			writeRPCError(w, jsonrpc.ID{}, err)
			return
		}
	case *jsonrpc.Request:
		rr := &rpcRequest{p: p, tool: tool, sess: sess, req: m}
		if !m.IsCall() {
			s.notification(rr)
			break
		}
		rr.notify = func(b []byte) { s.sendToSession(sess, b) }
		s.pending.add()
		s.runners.Go(func() {
			defer s.pending.done()
			// The request outlives the POST: it ends with its answer, its
			// cancellation or its session.
			result, err := s.handle(s.ctx, rr)
			if errors.Is(err, context.Canceled) {
				return // a cancelled request is not answered
			}
			if err != nil {
				s.sendToSession(sess, encodeError(m.ID, rpcError(err)))
				return
			}
			s.sendToSession(sess, encodeResult(m.ID, result))
		})
	}
	w.WriteHeader(http.StatusAccepted)
}

// sendToSession appends a message to a session's standalone stream, waiting out a
// log that cannot take it for a while (appendSure): the client has no other way to
// get it.
func (s *Server) sendToSession(sess *registry.Session, msg []byte) {
	if _, err := s.events.AppendSure(s.ctx, s.events.StandaloneSubject(sess.Tool, sess.ID), msg, nil); err != nil {
		s.log.Error("sending to session", "session", sess.ID, "err", err)
	}
}
