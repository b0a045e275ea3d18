package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

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
	if r.Args != nil {
		if !r.Args.claim() {
			return nil, errArgsGone
		}
		defer r.Args.remove() // once the worker answered, it has read them
	}
	res, err := s.runTool(ctx, r)
	if re := (*wire.RPCError)(nil); errors.As(err, &re) {
		// The tool answered with a JSON-RPC error (a bridged server's): the client
		// gets that error, as it would from the server, not an isError result.
		return nil, workerRPCError(re, r.Stateless)
	}
	if err != nil || !r.Stateless {
		return res, err
	}
	if lr, ok := res.(*largeResult); ok {
		if !lr.raw {
			lr.extra = s.statelessExtra(r)
			return lr, nil
		}
		// A worker's own result may be a task or ask for input, and has members of
		// its own where this revision adds some: read whole.
		if res, err = lr.whole(ctx); err != nil {
			return nil, err
		}
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
		return s.unlistedTool(ctx, r, params.Name, err)
	}
	if r.Args != nil && r.Args.err != nil {
		return toolAnswer(r.Tool, m, nil, r.Args.err) // past the account's payload limit
	}
	if r.Args != nil && string(params.Arguments) != "{}" {
		// A message that also names its arguments in another way (a key in
		// other case): which it meant is not clear.
		return nil, InvalidParams("tools/call: arguments given twice")
	}
	if res, kept, err := s.keptTaskCall(ctx, r, t, m, params); kept {
		return res, err
	}
	if s.taskAugmented(r, t) {
		// A task-augmented call, sent as the client sent it (through the gateway's
		// checks of a forwarded request: visibility, rate), for the server's
		// CreateTaskResult; the server checks its arguments.
		if r.Args != nil {
			if err := s.HoldArgs(ctx, r); err != nil {
				return nil, err
			}
		}
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

// unlistedTool answers a call of a tool the account's list lacks (err): the
// gateway's connection_required, as an isError result naming the connect URL as
// REST's 409 does, where the tool's methods differ per account and the account has
// not connected (gateway.Unlisted); else err, the JSON-RPC error of an unknown tool.
func (s *Server) unlistedTool(ctx context.Context, r *Request, name string, err error) (any, error) {
	err = s.gw.Unlisted(ctx, &gateway.Call{Principal: r.Principal, Tool: r.Tool, Method: name}, err)
	if text, ok := toolFailure(name, err); ok {
		return newToolResult(text, true), nil
	}
	return nil, err
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
	call   gateway.Call
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
	c.call = gateway.Call{
		Principal: r.Principal, Tool: r.Tool, Method: m.Name, Params: args, Entry: t.Method(m.Name),
		CallID: callID, RequestID: callID, MCPContext: mc, Transport: r.Transport,
		// A reply past one message stays in the bucket for the transport to write as
		// it reads it (a call handed over to its client's retry reads it whole: run).
		StreamReply: r.LargeAnswers,
	}
	if r.Args != nil { // sent as a REST call's large body is, the payload named
		c.call.Params, c.call.Payload = nil, &r.Args.p
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
	reply, err := s.gw.Call(c.ctx, &c.call)
	s.pin(c.ctx, c.r, instance, reply)
	if c.rd != nil && c.handoff.finish() {
		// Nobody here waits: the client's retry does, on any edge, and its answer is
		// stored whole.
		if err == nil && reply.Payload != nil {
			whole := c.call
			whole.StreamReply = false
			reply, err = s.gw.TakeReply(c.ctx, &whole, reply)
		}
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
	if out.reply != nil {
	}
	if out.err == nil && out.reply != nil && out.reply.Payload != nil {
		return c.s.largeAnswer(c.r.Tool, c.m, out.reply), nil
	}
	return toolAnswer(c.r.Tool, c.m, out.reply, out.err)
}
