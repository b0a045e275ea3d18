package core

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
func (s *Server) callTool(ctx context.Context, r *Request) (any, error) {
	res, err := s.runTool(ctx, r)
	if re := (*wire.RPCError)(nil); errors.As(err, &re) {
		// The tool answered with a JSON-RPC error (a bridged server's): the client
		// gets that error, as it would from the server, not an isError result.
		return nil, workerRPCError(re, r.Stateless)
	}
	if err != nil || !r.Stateless {
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
func (s *Server) runTool(ctx context.Context, r *Request) (any, error) {
	params, err := r.callParams()
	if err != nil {
		return nil, err
	}
	t, m, err := s.toolMethod(r, params.Name)
	if err != nil {
		return nil, err
	}
	if s.taskAugmented(r, t) {
		// A task-augmented call, sent as the client sent it (through the gateway's
		// checks of a forwarded request: visibility, rate), for the server's
		// CreateTaskResult; the server checks its arguments.
		return s.forward(ctx, r)
	}
	var header nats.Header
	if r.Stateless {
		if strings.HasPrefix(params.RequestState, roundPrefix) {
			return s.resumeRound(ctx, r, params, m)
		}
		if header, err = s.statelessHeaders(ctx, r, params); err != nil {
			return nil, err
		}
	}
	c, err := s.startToolCall(ctx, r, t, m, params, header)
	if err != nil {
		return nil, err
	}
	defer c.release()
	s.inflight.add()
	if c.notes == nil && c.rd == nil {
		// Nothing to relay while it runs, and nothing to hand over: the call runs
		// here, as its request's.
		c.run()
		return c.answer(<-c.done)
	}
	go c.run()
	return c.await()
}

// toolMethod finds the tool of r and its method that MCP clients call name.
func (s *Server) toolMethod(r *Request, name string) (*registry.ToolEntry, *registry.Method, error) {
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	if err != nil {
		return nil, nil, err
	}
	for i := range t.Tool.Methods {
		if MCPName(&t.Tool.Methods[i]) == name {
			return t, &t.Tool.Methods[i], nil
		}
	}
	return nil, nil, fmt.Errorf("%w: unknown tool %q", ErrUnknownTool, name)
}

// taskAugmented reports whether r is a session's tools/call that asks for a task of
// 2025-11-25 (params.task), of a tool whose workers carry tasks to its server.
func (s *Server) taskAugmented(r *Request, t *registry.ToolEntry) bool {
	if r.Session == nil || r.Stateless || !entryCarriesTasks(t) {
		return false
	}
	var augmented struct {
		Task json.RawMessage `json:"task"`
	}
	return json.Unmarshal(r.RPC.Params, &augmented) == nil && len(augmented.Task) > 0 && string(augmented.Task) != "null"
}

// statelessHeaders are the headers a 2026-07-28 call takes to its worker
// (inputHeaders), with the tool's own requestState a retry's state names, if any.
func (s *Server) statelessHeaders(ctx context.Context, r *Request, params *mcp.CallToolParamsRaw) (nats.Header, error) {
	var state string
	if params.RequestState != "" {
		var err error
		if state, err = s.openToolState(ctx, r, params.Name, params.RequestState); err != nil {
			return nil, err
		}
	}
	return inputHeaders(r, state)
}

// A toolCall is a tools/call on its way through the gateway: the call as sent, what
// cancels it, and, while it runs, where its notifications and, for a stateless call
// whose worker may ask its client for input, its worker's requests arrive.
type toolCall struct {
	s      *Server
	r      *Request
	m      *registry.Method
	call   *gateway.Call
	reqCtx context.Context // the request's: the call's own outlives it when it has a round
	ctx    context.Context
	cancel context.CancelFunc

	token any    // the client's progressToken, if any
	level string // the least severe log level the client wants, "" for none
	notes chan *nats.Msg
	sub   *nats.Subscription // fills notes

	rd       *round             // a stateless call's, when its client may be asked for input
	requests *registry.Follower // the round's worker requests
	handoff  handoff
	done     chan toolOutcome
}

type toolOutcome struct {
	reply *wire.Reply
	err   error
}

// startToolCall names a call of method m of tool t and makes what it runs with:
// its cancellation, among this edge's calls; its round, for a stateless call whose
// client may be asked; the subscription to its notifications, made before the call
// is sent, or the first could be missed.
func (s *Server) startToolCall(ctx context.Context, r *Request, t *registry.ToolEntry, m *registry.Method, params *mcp.CallToolParamsRaw, header nats.Header) (*toolCall, error) {
	c := &toolCall{s: s, r: r, m: m, reqCtx: ctx, token: params.Meta["progressToken"], done: make(chan toolOutcome, 1)}
	c.level = s.logLevel(r, c.token != nil)
	wantNotes := r.Notify != nil && (c.token != nil || c.level != "")
	mc := sessionContext(r.Session, header, s.instanceOf(r))
	if r.Stateless {
		mc.ClientCapabilities = metaCapabilities(r.Meta.ClientCapabilities)
		mc.ClientCapabilityObject = compactObject(r.Meta.ClientCapabilities)
	}
	mc.Progress, mc.ReplyTo, mc.Post = wantNotes, r.ReplyTo, r.Post
	c.ctx, c.cancel = context.WithCancel(ctx)
	callID, err := c.name(&mc)
	if err != nil {
		return nil, err
	}
	s.calls.add(callID, sessionID(r.Session), c.cancel)
	if s.ctx.Err() != nil {
		c.cancel() // the edge closed after this request passed its guard
	}
	if wantNotes {
		// A channel subscription is filled by the connection's reader in arrival
		// order, so every notification the worker sent before its reply is in it when
		// the reply arrives.
		c.notes = make(chan *nats.Msg, 1024)
		if c.sub, err = s.nc.ChanSubscribe(s.subj.Progress(r.Tool, callID), c.notes); err != nil {
			c.cancel()
			s.calls.remove(callID)
			c.release()
			return nil, fmt.Errorf("sse: subscribe to progress: %w", err)
		}
	}
	args := []byte(params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	c.call = &gateway.Call{
		Principal: r.Principal, Tool: r.Tool, Method: m.Name, Params: args, Entry: t.Method(m.Name),
		CallID: callID, RequestID: callID, MCPContext: mc,
	}
	return c, nil
}

// name returns the call's id. Another edge that receives the client's
// notifications/cancelled publishes the cancel of the call, which this edge follows
// for all its calls; a session's call ids are derived for that, from the session's
// id, a secret the gateway made, and the client's JSON-RPC id.
//
// A stateless call's worker may ask its client for input when the client declared
// something it could be asked: the call gets a round (see mrtr.go), whose session
// its worker's requests name, and outlives its request when it does, until its
// deadline. A client that declared nothing it could be asked has no round, and its
// call costs no more than a session's.
func (c *toolCall) name(mc *wire.MCPContext) (string, error) {
	s, r := c.s, c.r
	if r.Stateless && mayBeAsked(mc.ClientCapabilities) {
		c.cancel()
		c.ctx, c.cancel = context.WithTimeout(s.ctx, s.gw.Timeout(c.m, 0))
		var err error
		if c.rd, c.requests, err = s.openRound(r); err != nil {
			c.cancel()
			return "", err
		}
		mc.Session = c.rd.session
	} else if r.Session != nil {
		return callRequestID(r.Session.ID, r.RPC.ID), nil
	}
	return registry.NewID("mcp-"), nil
}

// release ends the following of the call's notifications and requests, once nothing
// waits on them here.
func (c *toolCall) release() {
	if c.sub != nil {
		_ = c.sub.Unsubscribe()
	}
	if c.requests != nil {
		c.requests.Stop()
	}
}

// run sends the call and hands its outcome to done, or, for a stateless call whose
// client was asked for input meanwhile, stores it for the client's retry.
func (c *toolCall) run() {
	s := c.s
	defer s.inflight.done()
	defer s.calls.remove(c.call.CallID)
	defer c.cancel()
	instance := c.call.Instance
	reply, err := s.gw.Call(c.ctx, c.call)
	s.pin(c.ctx, c.r, instance, reply)
	if c.rd != nil && c.handoff.finish() {
		// Nobody here waits: the client's retry does, on any edge.
		s.storeAnswer(c.r, c.rd, c.m, reply, err)
	}
	c.done <- toolOutcome{reply, err}
}

// await relays the call's notifications while it runs and returns its answer; or,
// when its worker asks the client for input first, the input_required result that
// hands the client the worker's requests, the call running on.
func (c *toolCall) await() (any, error) {
	s := c.s
	var asked chan []workerRequest
	if c.rd != nil {
		asked = make(chan []workerRequest, 1)
		go func() { asked <- s.awaitRequests(c.ctx, c.requests, nil, false) }()
	}
	reqCtx := c.reqCtx
	var out toolOutcome
wait:
	for {
		select {
		case msg := <-c.notes:
			s.relayNote(c.r, c.token, c.level, msg)
		case out = <-c.done:
			break wait
		case reqs := <-asked:
			if len(reqs) > 0 && c.handoff.hand() {
				// The call runs on, waiting for the client's answers.
				if err := s.storeRound(c.r, c.rd); err != nil {
					c.cancel()
					return nil, err
				}
				return s.askInput(*c.rd, reqs), nil
			}
		case <-reqCtx.Done():
			if c.rd != nil {
				// At 2026-07-28 a client cancels by closing its request.
				c.cancel()
			}
			reqCtx = context.Background() // wait for the call to end
		}
	}
	for len(c.notes) > 0 {
		s.relayNote(c.r, c.token, c.level, <-c.notes)
	}
	return c.answer(out)
}

// answer is the call's tools/call result.
func (c *toolCall) answer(out toolOutcome) (any, error) {
	c.r.answeredBy = replyInstance(out.reply)
	return toolAnswer(c.r.Tool, c.m, out.reply, out.err)
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
		if text, ok := toolFailure(m.Name, err); ok {
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
func (s *Server) logLevel(r *Request, progress bool) string {
	switch {
	case r.Stateless:
		return r.Meta.LogLevel
	case r.Session != nil && r.Session.LogLevel != "":
		return r.Session.LogLevel
	case progress:
		return "info"
	}
	return ""
}

// relayNote turns a worker's notification into the client's notifications/progress
// or notifications/message.
func (s *Server) relayNote(r *Request, token any, level string, msg *nats.Msg) {
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
		r.Notify(EncodeNotification(notifyProgress, &mcp.ProgressNotificationParams{
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
		r.Notify(EncodeNotification(notifyMessage, &mcp.LoggingMessageParams{
			Level: mcp.LoggingLevel(lvl), Logger: n.Logger, Data: data,
		}))
	}
}
