// Package legacy serves MCP's HTTP+SSE transport of 2024-11-05: a GET opens a session
// and its stream, whose first event names where the client POSTs its messages; every
// answer comes back on the stream, which is the session. Sessions, calls and the
// stream's events are sse/core's, so a client resumes its stream on any edge.
package legacy

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse/core"
)

// Transport serves a link's legacy endpoints: the stream, and the messages POSTed for
// it. Its calls run on goroutines kept for the next (runners), since a legacy call
// outlives the POST that carried it.
type Transport struct {
	core    *core.Server
	runners *runners
}

// New serves the legacy transport on c.
func New(c *core.Server) *Transport {
	return &Transport{core: c, runners: newRunners(c.Context(), maxIdleRunners)}
}

// ServeSSE serves GET on a link's legacy SSE endpoint (HTTP+SSE, 2024-11-05): it
// opens a session and its stream, whose first event names the endpoint to POST
// messages to: messagesPath with the session in the query, relative, so that the
// client posts to whatever host it reached this one by. Responses to those POSTs
// come back on this stream.
//
// A client that reconnects with Last-Event-ID gets its session back, with the events
// it missed, on any edge.
func (t *Transport) ServeSSE(w http.ResponseWriter, r *http.Request, p registry.Principal, tool, messagesPath string) {
	s := t.core
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		s.Refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: open the stream with GET; POST messages to the endpoint it names")
		return
	}
	if !s.Guard(w, r) {
		return
	}
	if a := core.ParseAccept(r.Header.Get("Accept")); !a.Events {
		s.Refuse(w, http.StatusNotAcceptable, "Not Acceptable: this endpoint answers text/event-stream")
		return
	}
	if _, err := s.View().Snapshot().Tool(p, tool); err != nil {
		s.Refuse(w, http.StatusNotFound, "Not Found: "+err.Error())
		return
	}

	var sess *registry.Session
	var resume *core.EventID
	newSession := false
	if last, ok := core.ParseEventID(r.Header.Get(core.HeaderLastEventID)); ok && last.Post == "" {
		if cur, err := s.Session(r.Context(), p, tool, last.Session); err == nil {
			sess, resume = cur, &last
		}
	}
	if sess == nil {
		var err error
		sess, err = s.NewSession(r.Context(), p, tool, core.Version20241105, nil, nil, true)
		if err != nil {
			core.WriteRPCError(w, jsonrpc.ID{}, err)
			return
		}
		newSession = true
	}
	endpoint := messagesPath + "?session_id=" + url.QueryEscape(sess.ID)
	s.HoldStandalone(w, r, sess, resume, newSession, func(ew *core.EventWriter, at string) error {
		return ew.Event(at, "endpoint", []byte(endpoint))
	}, func(why core.StreamEnd) {
		// On this transport the stream is the session: a client that leaves ends it,
		// which cancels its calls wherever they run, and so does a stream that never
		// opened, whose client never learned the session. A draining edge leaves the
		// session for the client to resume elsewhere.
		switch {
		case why == core.EndClient, why == core.EndRefused && newSession:
			s.EndSession(sess.ID)
		case why == core.EndServer:
			s.CloseStandalone(sess)
		}
	})
}

// ServeMessages serves POST on a link's legacy messages endpoint: the client's
// JSON-RPC messages for the session named by the session_id query parameter. It
// answers 202 at once; responses go to the session's stream, held by whichever edge
// the client's GET reached.
func (t *Transport) ServeMessages(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s := t.core
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.Refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: POST JSON-RPC messages here")
		return
	}
	if !s.Guard(w, r) {
		return
	}
	id := r.URL.Query().Get("session_id")
	if id == "" {
		id = r.URL.Query().Get("sessionId") // an older spelling some clients send
	}
	if id == "" {
		s.Refuse(w, http.StatusBadRequest, "Bad Request: session_id query parameter required")
		return
	}
	sess, err := s.Session(r.Context(), p, tool, id)
	if errors.Is(err, registry.ErrNotFound) {
		s.Refuse(w, http.StatusNotFound, "Not Found: no such session; open a new stream")
		return
	}
	if err != nil {
		s.Refuse(w, http.StatusServiceUnavailable, "the session store is unavailable; retry")
		return
	}
	posted, ok := s.ReadMessage(w, r, p, tool)
	if !ok {
		return
	}
	raw, msg := posted.Raw, posted.Msg
	s.Touch(r.Context(), sess)
	switch m := msg.(type) {
	case *jsonrpc.Response:
		if err := s.RelayAnswer(sess, m, raw); err != nil {
			core.WriteRPCError(w, jsonrpc.ID{}, err)
			return
		}
	case *jsonrpc.Request:
		// Stored arguments (only a tools/call's, which is always handled) are removed
		// once the call is over.
		rr := &core.Request{Principal: p, Tool: tool, Session: sess, RPC: m, Transport: audit.TransportMCPLegacy, Args: posted.Args}
		if !m.IsCall() {
			s.Notification(rr)
			break
		}
		rr.Notify = func(b []byte) { t.sendToSession(sess, b, nil) }
		rr.LargeAnswers = true
		s.Outlive()
		t.runners.Go(func() {
			defer s.Outlived()
			// The request outlives the POST: it ends with its answer, its
			// cancellation or its session.
			result, err := s.Handle(s.Context(), rr)
			if errors.Is(err, context.Canceled) {
				return // a cancelled request is not answered
			}
			if err != nil {
				t.sendToSession(sess, core.EncodeError(m.ID, core.RPCError(err)), nil)
				return
			}
			// The session's stream is kept in the event log, each event for a client
			// that reconnects: a large result is written into a payload of the log as
			// it is read, and the record names it.
			data, hdr, err := s.ResponseRecord(rr, result)
			if err != nil {
				s.Log().Error("storing a large result", "session", sess.ID, "err", err)
				data, hdr = core.EncodeError(m.ID, core.RPCError(err)), nil
			}
			t.sendToSession(sess, data, hdr)
		})
	}
	w.WriteHeader(http.StatusAccepted)
}

// sendToSession appends a message to a session's standalone stream, waiting out a
// log that cannot take it for a while (EventLog.AppendSure): the client has no other way to
// get it.
func (t *Transport) sendToSession(sess *registry.Session, msg []byte, hdr nats.Header) {
	s := t.core
	if _, err := s.Events().AppendSure(s.Context(), s.Events().StandaloneSubject(sess.Tool, sess.ID), msg, hdr); err != nil {
		s.Log().Error("sending to session", "session", sess.ID, "err", err)
	}
}
