package mcpbridge

//lint:file-ignore SA1019 log messages are forwarded for the revisions that have them (deprecated only from 2026-07-28).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// callTool is the handler of the method for the server's tool name: tools/call on
// an upstream session, with the call's deadline and cancellation (a cancelled call
// sends notifications/cancelled upstream), answered with the server's CallToolResult.
func (b *Bridge) callTool(name string) workers.Handler {
	return func(ctx context.Context, c *workers.Call) (any, error) {
		if stateless(c) && !b.perAccount {
			if s := b.statelessSession(); s != nil {
				return b.callStateless(ctx, c, s, name)
			}
		}
		in, err := b.acquire(ctx, c, name)
		if err != nil {
			return nil, err
		}
		defer b.release(in)
		if err := b.offers(ctx, in, name); err != nil {
			return nil, err
		}
		params := &mcp.CallToolParams{Name: name, Arguments: argumentsOf(c)}
		if in.token != "" {
			params.SetProgressToken(in.token)
		}
		res, err := b.callOn(ctx, in, params)
		if err != nil && b.oauth != nil {
			err = b.oauthAcquired(in.s.values, err)
		}
		return res, err
	}
}

// argumentsOf is a call's parameters as a tool's arguments.
func argumentsOf(c *workers.Call) json.RawMessage {
	if len(c.Params) == 0 {
		return json.RawMessage("{}")
	}
	return json.RawMessage(c.Params)
}

// callOn sends tools/call on in's session and answers with the server's result.
func (b *Bridge) callOn(ctx context.Context, in *inflight, params *mcp.CallToolParams) (any, error) {
	if conn := b.rawConn(in); conn != nil {
		// The bridge answers with the server's result as it is: the SDK's client
		// would decode it into its types only for the bridge to throw them away.
		body, err := json.Marshal(params)
		if err != nil {
			return nil, fmt.Errorf("encode the call's params: %w", err)
		}
		// A call whose caller follows its progress takes its result only after the
		// notifications the server sent before it.
		res, err := conn.rawCall(ctx, "tools/call", body, in.token == "")
		if err != nil {
			return nil, upstreamError(ctx, err)
		}
		return workers.MCPResult(res), nil
	}
	rctx, sink := withRaw(ctx)
	res, err := in.cs.CallTool(rctx, params)
	in.s.raw.forget(sink)
	if err != nil {
		return nil, upstreamError(ctx, err)
	}
	if raw := sink.raw(); raw != nil {
		return workers.MCPResult(raw), nil // as the server sent it
	}
	body, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("encode the server's result: %w", err)
	}
	return workers.MCPResult(body), nil
}

// rawConn is the connection the bridge writes in's tools/call on itself: a stdio
// server's, in a session of a revision that has sessions (at StatelessRevision the
// SDK's client puts what the revision asks for in every request). nil when the SDK's
// client makes the call.
func (b *Bridge) rawConn(in *inflight) *observedConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	if in.s.revision == StatelessRevision {
		return nil
	}
	return in.s.conn
}

// acquire picks the session c runs on, and counts c as running on it: the upstream
// session of c's client session; or, for a call without one or when the server keeps
// no session state, the least busy shared session that has the tool (any when tool
// is "").
func (b *Bridge) acquire(ctx context.Context, c *workers.Call, tool string) (*inflight, error) {
	own := b.own(c)
	values, err := b.valuesOf(c)
	if err != nil {
		return nil, err
	}
	if b.oauth != nil && tokenOf(values) == "" {
		return nil, notConnected()
	}
	if own || values != nil {
		var in *inflight
		if own {
			in, err = b.acquireClient(ctx, c)
		} else {
			in, err = b.acquireAccount(ctx, c, values)
		}
		if err != nil {
			return nil, b.oauthAcquired(values, err)
		}
		if tool != "" && c.Header.Get(wire.HeaderProgress) != "" {
			b.mu.Lock()
			in.token = "tg-" + nuid.Next()
			b.progress[in.token] = in
			b.mu.Unlock()
		}
		return in, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var best *session
	n := len(b.sessions)
	start := b.next
	b.next++
	for i := range n {
		s := b.sessions[(start+i)%n]
		if s.cs == nil || (tool != "" && s.tools[tool] == nil) {
			continue
		}
		if best == nil || len(s.calls) < len(best.calls) {
			best = s
		}
	}
	if best == nil {
		what := "no upstream session of the server is running"
		if tool != "" {
			what = fmt.Sprintf("no running upstream session of the server offers %q", tool)
		}
		return nil, &workers.Error{Code: CodeUnavailable, Message: what + "; retry shortly", Status: 503}
	}
	in := &inflight{c: c, ctx: ctx, s: best, cs: best.cs}
	best.calls[in] = struct{}{}
	if tool != "" && c.Header.Get(wire.HeaderProgress) != "" {
		in.token = "tg-" + nuid.Next()
		b.progress[in.token] = in
	}
	return in, nil
}

func (b *Bridge) release(in *inflight) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(in.s.calls, in)
	if in.token != "" {
		delete(b.progress, in.token)
	}
}

// upstreamError is how a failed upstream request looks to the caller: the call's own
// end (deadline, cancellation) as it is; the server's JSON-RPC error as that same
// JSON-RPC error (code, message and data), which an MCP client through the link gets
// as it would from the server; anything else is the session failing under the call,
// as when the child process dies, which is tool_unavailable.
func upstreamError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if re := serverError(err); re != nil {
		return re
	}
	return &workers.Error{Code: CodeUnavailable, Message: "the upstream MCP session failed: " + err.Error(), Status: 503}
}

// serverError is the server's JSON-RPC error in err, as the worker answers with it;
// nil when err is none.
func serverError(err error) *workers.RPCError {
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		return nil
	}
	return &workers.RPCError{Code: e.Code, Message: e.Message, Data: e.Data}
}

// sole returns the one call running on s, or why there is none to give a message or
// request to.
func (b *Bridge) sole(s *session) (*inflight, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var only *inflight
	for in := range s.calls {
		only = in
	}
	switch len(s.calls) {
	case 0:
		return nil, errors.New("no call is running on this session")
	case 1:
		return only, nil
	}
	return nil, fmt.Errorf("%d calls are running on this session, and MCP does not say which one this is for", len(s.calls))
}

// ask forwards a server's request (sampling, elicitation, roots) to the MCP client of
// the call running on the session it came on, on that call's stream, or, on a
// client's session with no single call running, to the client on its session's
// standalone stream; and decodes the client's result into out.
func (b *Bridge) ask(ctx context.Context, cs *mcp.ClientSession, method string, params json.RawMessage, out any) error {
	b.mu.Lock()
	s := b.byClient[cs]
	b.mu.Unlock()
	if s == nil {
		return fmt.Errorf("%s: the session is not running", method)
	}
	in, err := b.sole(s)
	if err != nil && s.client != "" {
		raw, err := b.askClient(ctx, s, method, params)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s: the client's result: %w", method, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: no caller to ask: %w", method, err)
	}
	if in.c.Session == "" {
		return fmt.Errorf("%s: the call came through the HTTP API, not an MCP session: there is no client to ask", method)
	}
	if s.client == "" {
		// On a shared session nobody else could answer: the question ends with the
		// call as well as with the server's own cancellation. On a client's, the
		// call it came during may not be what it is about (a server asks for roots
		// once initialized, whatever runs): it lives as long as the server awaits it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(in.ctx, cancel)()
	}
	raw, err := in.c.Request(ctx, method, params)
	if err != nil {
		var re *workers.RPCError
		if errors.As(err, &re) {
			return &jsonrpc.Error{Code: re.Code, Message: re.Message, Data: re.Data}
		}
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s: the client's result: %w", method, err)
	}
	return nil
}

// onProgress forwards a progress notification to the call whose token it carries.
func (b *Bridge) onProgress(p *mcp.ProgressNotificationParams) {
	token, _ := p.ProgressToken.(string)
	b.mu.Lock()
	in := b.progress[token]
	b.mu.Unlock()
	if in == nil {
		return
	}
	if err := in.c.Progress(p.Progress, p.Total, p.Message); err != nil {
		b.log.Debug("progress not forwarded", "err", err)
	}
}

// onLog forwards a log message of s's server to the call running on s, if only one
// is and its caller follows it; else, on a client's session, to the client's session,
// as the server sent it.
func (b *Bridge) onLog(s *session, p *mcp.LoggingMessageParams, raw json.RawMessage) {
	if in, err := b.sole(s); err == nil && (s.client == "" || in.c.Header.Get(wire.HeaderProgress) != "") {
		if err := in.c.Log(string(p.Level), p.Logger, p.Data); err != nil {
			b.log.Debug("log message not forwarded", "err", err)
		}
		return
	}
	if s.client != "" {
		b.toClient(s, "notifications/message", raw)
		return
	}
	b.log.Debug("upstream log message", "level", p.Level, "logger", p.Logger, "data", p.Data)
}
