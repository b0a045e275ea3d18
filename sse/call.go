package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// callTool runs a tools/call down the gateway's call path. Progress and log
// notifications of the worker are relayed to the client as they come; a failure of
// the call is an isError result, a request that names no tool a JSON-RPC error, and
// so is the tool's own JSON-RPC error.
//
// The result is a toolResult, or, when the worker answered with a CallToolResult
// itself (a bridged MCP server does), that result's JSON as the worker sent it.
func (s *Server) callTool(ctx context.Context, r *rpcRequest) (any, error) {
	res, err := s.runTool(ctx, r)
	if re := (*wire.RPCError)(nil); errors.As(err, &re) {
		// The tool answered with a JSON-RPC error (a bridged server's): the client
		// gets that error, as it would from the server, not an isError result.
		return nil, workerRPCError(re, r.modern)
	}
	if err != nil || !r.modern {
		return res, err
	}
	params, _ := r.callParams()
	if res, err = s.sealTask(r, params.Name, res, r.answeredBy); err != nil {
		return nil, err
	}
	return s.sealInputRequired(r, params.Name, res)
}

// runTool is callTool but for a tool's own input_required result, which it returns
// as the tool made it.
func (s *Server) runTool(ctx context.Context, r *rpcRequest) (any, error) {
	params, err := r.callParams()
	if err != nil {
		return nil, err
	}
	t, err := s.view.Snapshot().Tool(r.p, r.tool)
	if err != nil {
		return nil, err
	}
	var m *registry.Method
	for i := range t.Tool.Methods {
		if mcpName(&t.Tool.Methods[i]) == params.Name {
			m = &t.Tool.Methods[i]
			break
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%w %q: tool %s has no such method", ErrUnknownTool, params.Name, r.tool)
	}
	args := []byte(params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if r.sess != nil && !r.modern && entryCarriesTasks(t) {
		var augmented struct {
			Task json.RawMessage `json:"task"`
		}
		if json.Unmarshal(r.req.Params, &augmented) == nil && len(augmented.Task) > 0 && string(augmented.Task) != "null" {
			// A task-augmented call, sent as the client sent it (through the
			// gateway's checks of a forwarded request: visibility, rate), for the
			// server's CreateTaskResult; the server checks its arguments.
			return s.forward(ctx, r)
		}
	}

	var header nats.Header
	if r.modern {
		var state string
		if strings.HasPrefix(params.RequestState, roundPrefix) {
			return s.resumeRound(ctx, r, params, m)
		} else if params.RequestState != "" {
			if state, err = s.openToolState(ctx, r, params.Name, params.RequestState); err != nil {
				return nil, err
			}
		}
		if header, err = inputHeaders(r, state); err != nil {
			return nil, err
		}
	}

	token := params.Meta["progressToken"]
	level := s.logLevel(r, token != nil)
	wantNotes := r.notify != nil && (token != nil || level != "")

	reqCtx := ctx
	ctx, cancel := context.WithCancel(ctx)
	// Another edge that receives the client's notifications/cancelled publishes
	// the cancel of the call, which this edge follows for all its calls; a session's
	// call ids are derived for that, from the session's id, a secret the gateway
	// made, and the client's JSON-RPC id.
	var callID string
	session, replyTo, capabilities := sessionID(r.sess), r.replyTo, clientCapabilities(r.sess)
	var rd *round
	var requests *follower
	capabilityObj := capabilityObject(r.sess)
	if r.modern {
		capabilities = metaCapabilities(r.meta.ClientCapabilities)
		capabilityObj = compactObject(r.meta.ClientCapabilities)
	}
	if r.modern && mayBeAsked(capabilities) {
		// A stateless call's worker may ask its client for input: the call gets a
		// round (see mrtr.go), and outlives this request when it does, until its
		// deadline. A client that declared nothing it could be asked has no round,
		// and its call costs no more than a session's.
		cancel()
		ctx, cancel = context.WithTimeout(s.ctx, s.gw.Timeout(m, 0))
		var err error
		if rd, requests, err = s.openRound(r); err != nil {
			cancel()
			return nil, err
		}
		defer requests.stop()
		session = rd.session
	} else if r.sess != nil {
		callID = callRequestID(r.sess.ID, r.req.ID)
	}
	if callID == "" {
		callID = registry.NewID("mcp-")
	}
	s.calls.add(callID, sessionID(r.sess), cancel)
	if s.ctx.Err() != nil {
		cancel() // the edge closed after this request passed its guard
	}

	// Subscribe before calling, or the first notifications could be missed. A
	// channel subscription is filled by the connection's reader in arrival order,
	// so every notification the worker sent before its reply is in it when the
	// reply arrives.
	var notes chan *nats.Msg
	if wantNotes {
		notes = make(chan *nats.Msg, 1024)
		sub, err := s.nc.ChanSubscribe(s.subj.Progress(r.tool, callID), notes)
		if err != nil {
			cancel()
			s.calls.remove(callID)
			return nil, fmt.Errorf("sse: subscribe to progress: %w", err)
		}
		defer sub.Unsubscribe()
	}

	type outcome struct {
		reply *wire.Reply
		err   error
	}
	done := make(chan outcome, 1)
	var handoff handoff // a stateless call's, once its client was asked for input
	s.inflight.add()
	run := func() {
		defer s.inflight.done()
		defer s.calls.remove(callID)
		defer cancel()
		instance := s.instanceOf(r)
		mc := sessionContext(r.sess, header, instance)
		mc.Session, mc.ClientCapabilities, mc.ClientCapabilityObject = session, capabilities, capabilityObj
		mc.Progress, mc.ReplyTo, mc.Post = wantNotes, replyTo, r.post
		reply, err := s.gw.Call(ctx, &gateway.Call{
			Principal: r.p, Tool: r.tool, Method: m.Name, Params: args, Entry: t.Method(m.Name),
			CallID: callID, RequestID: callID, MCPContext: mc,
		})
		s.pin(ctx, r, instance, reply)
		if rd != nil && handoff.finish() {
			// Nobody here waits: the client's retry does, on any edge.
			s.storeAnswer(r, rd, m, reply, err)
		}
		done <- outcome{reply, err}
	}
	if notes == nil && rd == nil {
		// Nothing to relay while it runs, and nothing to hand over: the call runs
		// here, as its request's.
		run()
		out := <-done
		r.answeredBy = replyInstance(out.reply)
		return toolAnswer(r.tool, m, out.reply, out.err)
	}
	go run()
	var asked chan []workerRequest
	if rd != nil {
		asked = make(chan []workerRequest, 1)
		go func() { asked <- s.awaitRequests(ctx, requests, nil, false) }()
	}
	var out outcome
wait:
	for {
		select {
		case msg := <-notes:
			s.relayNote(r, token, level, msg)
		case out = <-done:
			break wait
		case reqs := <-asked:
			if len(reqs) > 0 && handoff.hand() {
				// The call runs on, waiting for the client's answers.
				if err := s.storeRound(r, rd); err != nil {
					cancel()
					return nil, err
				}
				return s.askInput(*rd, reqs), nil
			}
		case <-reqCtx.Done():
			if rd != nil {
				// At 2026-07-28 a client cancels by closing its request.
				cancel()
			}
			reqCtx = context.Background() // wait for the call to end
		}
	}
	for len(notes) > 0 {
		s.relayNote(r, token, level, <-notes)
	}
	r.answeredBy = replyInstance(out.reply)
	return toolAnswer(r.tool, m, out.reply, out.err)
}

// replyInstance is the worker instance that named itself in reply, if any.
func replyInstance(reply *wire.Reply) string {
	if reply == nil {
		return ""
	}
	return reply.Header.Get(wire.HeaderInstance)
}

// toolAnswer is the tools/call result of a call of method m of tool, from what the bus
// gave back. The edge running a call and an edge that finishes the call's stream for it
// (finishStream) make the same answer from the same reply.
func toolAnswer(tool string, m *registry.Method, reply *wire.Reply, err error) (any, error) {
	if err != nil {
		if text, ok := toolFailure(tool, m.Name, err); ok {
			return newToolResult(text, true), nil
		}
		return nil, err
	}
	if reply.MCPResult && json.Valid(reply.Data) {
		return json.RawMessage(reply.Data), nil
	}
	res := newToolResult(string(reply.Data), reply.Status >= 400)
	if !res.IsError && len(m.OutputSchema) > 0 && json.Valid(reply.Data) {
		res.StructuredContent = json.RawMessage(reply.Data)
	}
	return res, nil
}

// toolResult is the CallToolResult of a call: the tool's answer as text content,
// and as structuredContent when the method declares an output schema. It encodes as
// mcp.CallToolResult does, without that type's custom encoders, which marshal every
// piece on its own and then the whole again.
type toolResult struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newToolResult(text string, isError bool) *toolResult {
	return &toolResult{Content: []textContent{{Type: "text", Text: text}}, IsError: isError}
}

// sessionContext is what a call of a session's client carries of it to the tool
// (nothing of a request without a session), with the call's extra headers and the
// worker instance it is sent to.
func sessionContext(sess *registry.Session, header nats.Header, instance string) wire.MCPContext {
	mc := wire.MCPContext{Header: header, Instance: instance}
	if sess != nil {
		c := sessionCaps(sess)
		mc.Session, mc.ClientCapabilities, mc.ClientCapabilityObject, mc.LogLevel = sess.ID, c.names, c.compact, sess.LogLevel
	}
	return mc
}

func sessionID(sess *registry.Session) string {
	if sess == nil {
		return ""
	}
	return sess.ID
}

// clientCapabilities are the capabilities a session's client declared, by name, so
// that a worker asks it nothing it cannot answer; nil when unknown.
func clientCapabilities(sess *registry.Session) []string {
	if sess == nil {
		return nil
	}
	return sessionCaps(sess).names
}

// capabilityObject is the capabilities object a session's client sent, compact (a
// header's value is one line); nil when unknown.
func capabilityObject(sess *registry.Session) []byte {
	if sess == nil || len(sess.Capabilities) == 0 {
		return nil
	}
	return sessionCaps(sess).compact
}

// caps is what a call sends of a capabilities object: its names, and the object
// compact.
type caps struct {
	names   []string
	compact []byte
}

// sessionCaps reads the capabilities object of a session once for all its calls,
// and for every session whose client sends the same object.
func sessionCaps(sess *registry.Session) caps {
	capsMu.RLock()
	c, ok := capsCache[string(sess.Capabilities)]
	capsMu.RUnlock()
	if ok {
		return c
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(sess.Capabilities, &fields) == nil {
		c.names = slices.Sorted(maps.Keys(fields))
	}
	if len(sess.Capabilities) > 0 {
		c.compact = compactObject(sess.Capabilities)
	}
	capsMu.Lock()
	if len(capsCache) < maxCachedCaps {
		capsCache[string(sess.Capabilities)] = c
	}
	capsMu.Unlock()
	return c
}

// compactObject is a JSON object compact (a header's value is one line); nil when it
// is no object.
func compactObject(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return nil
	}
	return b.Bytes()
}

// sessionLogLevel is the level a session's client set with logging/setLevel, if any.
func sessionLogLevel(sess *registry.Session) string {
	if sess == nil {
		return ""
	}
	return sess.LogLevel
}

// asksClient reports whether a session's client declared a capability a worker may
// send it a request for (sampling, elicitation, roots): the tool of a call of such a
// client is told the call's POST stream, on which those requests travel.
func asksClient(sess *registry.Session) bool {
	for _, c := range clientCapabilities(sess) {
		if c == "sampling" || c == "elicitation" || c == "roots" {
			return true
		}
	}
	return false
}

// The capability names and compact forms of the capabilities objects seen, which few
// clients make in few ways, so that a call does not decode its session's again. The
// slices are shared: their readers only read them. At most maxCachedCaps are kept, so that
// clients that declare many different objects cannot grow it without bound.
var (
	capsMu    sync.RWMutex
	capsCache = map[string]caps{}
)

const maxCachedCaps = 1024

// logLevel is the least severe level of log notification the request's client
// wants, or "" for none. On 2026-07-28 it is what the request's _meta asks for, and
// nothing without. Before, it is what the session set with logging/setLevel, or info
// for a caller that follows the call's progress anyway.
func (s *Server) logLevel(r *rpcRequest, progress bool) string {
	switch {
	case r.modern:
		return r.meta.LogLevel
	case r.sess != nil && r.sess.LogLevel != "":
		return r.sess.LogLevel
	case progress:
		return "info"
	}
	return ""
}

// relayNote turns a worker's notification into the client's notifications/progress
// or notifications/message.
func (s *Server) relayNote(r *rpcRequest, token any, level string, msg *nats.Msg) {
	n, err := wire.ReadNotification(msg.Data)
	if err != nil {
		s.log.Warn("dropping undecodable notification", "subject", msg.Subject, "err", err)
		return
	}
	switch n.Kind {
	case wire.KindProgress:
		if token == nil {
			return
		}
		r.notify(encodeNotification(notifyProgress, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: n.Progress, Total: n.Total, Message: n.Message,
		}))
	case wire.KindLog:
		if level == "" || !logAtLeast(n.Level, level) {
			return
		}
		data := n.Data
		if len(data) == 0 {
			data, _ = json.Marshal(n.Message)
		}
		lvl := n.Level
		if lvl == "" {
			lvl = "info"
		}
		r.notify(encodeNotification(notifyMessage, &mcp.LoggingMessageParams{
			Level: mcp.LoggingLevel(lvl), Logger: n.Logger, Data: data,
		}))
	}
}
