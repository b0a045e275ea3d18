// Package streamable serves MCP's Streamable HTTP transport: one endpoint, where POST
// carries a client's messages, GET opens a session's standalone stream and DELETE
// ends the session. Sessions (2025-03-26 to 2025-11-25) are opened with initialize
// and served by any edge; a POST of the stateless revision (2026-07-28) on the same
// endpoint is package stateless's. Calls, sessions and streams are sse/core's.
package streamable

import (
	"errors"
	"log/slog"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse/core"
	"github.com/toolgate/toolgate/sse/stateless"
)

// Transport serves a link's Streamable HTTP endpoint.
type Transport struct {
	core      *core.Server
	stateless *stateless.Transport
}

// New serves Streamable HTTP on c, handing the stateless revision's POSTs to st.
func New(c *core.Server, st *stateless.Transport) *Transport {
	return &Transport{core: c, stateless: st}
}

// Serve serves a link's Streamable HTTP endpoint: POST, GET and DELETE.
// Requests of 2026-07-28 (their _meta or MCP-Protocol-Version says so) are served
// statelessly; the others belong to sessions opened with initialize (2025-03-26 to
// 2025-11-25), which any edge serves.
func (t *Transport) Serve(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s := t.core
	switch r.Method {
	case http.MethodPost, http.MethodGet, http.MethodDelete:
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		s.Refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed")
		return
	}
	if !s.Guard(w, r) {
		return
	}
	if _, err := s.View().Snapshot().Tool(p, tool); err != nil {
		s.Refuse(w, http.StatusNotFound, "Not Found: "+err.Error())
		return
	}
	if r.Method != http.MethodPost && core.IsStateless(r.Header.Get(core.HeaderProtocolVersion)) {
		// 2026-07-28 has neither the GET stream nor sessions to delete.
		w.Header().Set("Allow", http.MethodPost)
		s.Refuse(w, http.StatusMethodNotAllowed, "Method Not Allowed: protocol version "+core.Version20260728+" has no "+r.Method+"; change notifications come from subscriptions/listen")
		return
	}
	switch r.Method {
	case http.MethodGet:
		t.serveGet(w, r, p, tool)
	case http.MethodDelete:
		sess, ok := t.requireSession(w, r, p, tool, jsonrpc.ID{})
		if !ok {
			return
		}
		s.EndSession(sess.ID)
		w.WriteHeader(http.StatusNoContent)
	default:
		t.servePost(w, r, p, tool)
	}
}

// requireSession finds the session a request names in Mcp-Session-Id: 400 without
// one, 404 for one that ended, expired or never was. The refusal answers rpcID, the
// JSON-RPC request the HTTP request carries, when it carries one: a client matches
// an error to its call by the id.
func (t *Transport) requireSession(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string, rpcID jsonrpc.ID) (*registry.Session, bool) {
	s := t.core
	refuse := func(status int, msg string) {
		core.WriteJSON(w, status, core.EncodeError(rpcID, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: msg}))
	}
	id := r.Header.Get(core.HeaderSessionID)
	if id == "" {
		refuse(http.StatusBadRequest, "Bad Request: Mcp-Session-Id header required; initialize first")
		return nil, false
	}
	sess, err := s.Session(r.Context(), p, tool, id)
	if errors.Is(err, registry.ErrNotFound) {
		refuse(http.StatusNotFound, "Not Found: session ended or expired; initialize a new one")
		return nil, false
	}
	if err != nil {
		refuse(http.StatusServiceUnavailable, "the session store is unavailable; retry")
		return nil, false
	}
	s.Touch(r.Context(), sess)
	return sess, true
}

// checkVersionHeader applies MCP-Protocol-Version to a session's request: absent
// means 2025-03-26, which did not send it; anything else must be a revision of this
// kind.
func checkVersionHeader(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get(core.HeaderProtocolVersion)
	if v == "" || slices.Contains(core.SessionVersions, v) {
		return true
	}
	core.WriteRPCError(w, jsonrpc.ID{}, core.UnsupportedVersion(v))
	return false
}

func (t *Transport) serveGet(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s := t.core
	if a := core.ParseAccept(r.Header.Get("Accept")); !a.Events {
		s.Refuse(w, http.StatusNotAcceptable, "Not Acceptable: the GET stream is text/event-stream")
		return
	}
	if !checkVersionHeader(w, r) {
		return
	}
	sess, ok := t.requireSession(w, r, p, tool, jsonrpc.ID{})
	if !ok {
		return
	}
	var resume *core.EventID
	if h := r.Header.Get(core.HeaderLastEventID); h != "" {
		last, ok := core.ParseEventID(h)
		if !ok || last.Session != sess.ID {
			s.Refuse(w, http.StatusBadRequest, "Bad Request: Last-Event-ID names no event of this session")
			return
		}
		if last.Post != "" {
			s.ReplayPost(w, r, sess, last)
			return
		}
		resume = &last
	}
	s.HoldStandalone(w, r, sess, resume, false, func(ew *core.EventWriter, at string) error {
		if !sess.Stream {
			s.StreamHeld(sess, true)
		}
		return ew.Prime(at, s.Config().RetryAfter)
	}, func(why core.StreamEnd) {
		if why == core.EndClient || why == core.EndServer {
			s.CloseStandalone(sess)
			s.StreamHeld(sess, false)
		}
	})
}

func (t *Transport) servePost(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s := t.core
	accept := core.ParseAccept(r.Header.Get("Accept"))
	if !accept.JSON && !accept.Events {
		s.Refuse(w, http.StatusNotAcceptable, "Not Acceptable: answers are application/json or text/event-stream")
		return
	}
	posted, ok := s.ReadMessage(w, r, p, tool)
	if !ok {
		return
	}
	defer posted.Args.Release() // when the request was refused before it was handled
	raw, msg := posted.Raw, posted.Msg
	req, isReq := msg.(*jsonrpc.Request)
	rr := &core.Request{Principal: p, Tool: tool, RPC: req, Transport: audit.TransportMCPStreamable, Args: posted.Args}
	if isReq && (core.IsStateless(r.Header.Get(core.HeaderProtocolVersion)) || req.Method != core.MethodInitialize && core.IsStateless(rr.MetaVersion())) {
		t.stateless.ServePost(w, r, p, tool, req, posted.Args, accept)
		return
	}
	if !checkVersionHeader(w, r) {
		return
	}
	// Close cancels the calls it finds running (callSet); the rest is quick.
	ctx := r.Context()
	if isReq && req.Method == core.MethodInitialize && req.IsCall() {
		result, err := s.Handle(ctx, rr)
		if rr.Session != nil {
			w.Header().Set(core.HeaderSessionID, rr.Session.ID)
		}
		s.Answer(w, accept, req.ID, result, err)
		return
	}
	var rpcID jsonrpc.ID
	if isReq {
		rpcID = req.ID
	}
	sess, ok := t.requireSession(w, r, p, tool, rpcID)
	if !ok {
		return
	}
	if !isReq {
		if err := s.RelayAnswer(sess, msg.(*jsonrpc.Response), raw); err != nil {
			core.WriteRPCError(w, jsonrpc.ID{}, err)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	rr.Session = sess
	if s.Log().Enabled(ctx, slog.LevelDebug) { // spares every request the arguments' allocations
		s.Log().Debug("request", "session", sess.ID, "method", req.Method, "id", req.ID.Raw())
	}
	if !req.IsCall() {
		s.Notification(rr)
		w.WriteHeader(http.StatusAccepted)
		return
	}
	defer s.Sustain(sess)()
	if req.Method == core.MethodToolsCall && accept.Events {
		rr.LargeAnswers = true // a large result is written as it is read, as JSON or on the stream
		if !accept.JSON {
			s.StreamCall(ctx, w, rr, raw)
			return
		}
		s.CallJSONOrStream(ctx, w, accept, rr, raw)
		return
	}
	rr.LargeAnswers = true // a JSON-only client's tools/call
	result, err := s.Handle(ctx, rr)
	s.AnswerRequest(w, accept, rr, result, err)
}
