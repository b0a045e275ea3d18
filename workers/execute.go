package workers

import (
	"context"
	"encoding/json"
	"errors"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/bus/wire"
)

var tracer = otel.Tracer("github.com/toolgate/toolgate/workers")

// call runs one call in a slot of w.slots: a call of one of the tool's methods, or
// a request on the tool's MCP endpoint, whose replies and errors are JSON-RPC's.
func (w *Worker) call(m *Method, st *methodStats, in inbound) {
	if m.mcp {
		w.mcpRequest(m, st, in)
		return
	}
	w.toolCall(m, st, in)
}

// toolCall runs one call of method m and replies with its result or the tool's error.
func (w *Worker) toolCall(m *Method, st *methodStats, in inbound) {
	st.inFlight.Add(1)
	defer st.inFlight.Add(-1)
	start := time.Now()

	req, readErr := w.read(&in)
	c := w.newCall(m.Name, in, &req)
	ctx, span := w.startSpan(c, func() string { return "tool.call " + w.tool.ID + "." + m.Name })
	defer span.End()
	ctx, scope := w.scope(ctx, c, m.Timeout)
	defer scope.end()

	var result any
	err := m.input.check(in, readErr)
	if err == nil {
		result, err = w.execute(ctx, m, c, readErr)
	}
	msg, err := w.answer(ctx, reply, c, in.reply, result, err)
	st.count(start, err)
	if err != nil {
		w.failed(ctx, span, c, err, toolFailure)
	}
	w.send(ctx, c, in.reply, msg, err)
}

// mcpRequest runs one MCP request to the tool other than a tool call (resources,
// prompts, completion: see MCPHandler) and replies with its JSON-RPC result or error.
func (w *Worker) mcpRequest(m *Method, st *methodStats, in inbound) {
	st.inFlight.Add(1)
	defer st.inFlight.Add(-1)
	start := time.Now()

	req, readErr := w.read(&in)
	c := w.newCall(req.Method, in, &req)
	ctx, span := w.startSpan(c, func() string { return "tool.mcp " + w.tool.ID + " " + c.Method })
	defer span.End()
	ctx, scope := w.scope(ctx, c, m.Timeout)
	defer scope.end()

	result, err := w.execute(ctx, m, c, readErr)
	msg, err := w.answer(ctx, mcpReply, c, in.reply, result, err)
	st.count(start, err)
	if err != nil {
		w.failed(ctx, span, c, err, rpcFailure)
	}
	w.send(ctx, c, in.reply, msg, err)
}

// read decodes a request, with its payload's bytes as its body when it carries one.
func (w *Worker) read(in *inbound) (wire.Request, error) {
	req, err := w.cfg.subjects.ReadRequest(in.subject, in.header, in.data)
	if err == nil {
		err = w.takePayload(w.base, in)
		req.Data = in.data
	}
	return req, err
}

// newCall is the request as its handler sees it: method is the method it calls.
func (w *Worker) newCall(method string, in inbound, req *wire.Request) *Call {
	c := &Call{
		Tool: w.tool.ID, Method: method, Params: in.data, Header: in.header,
		Account: req.Account, RequestID: req.RequestID, CallID: req.CallID, Session: req.Session,
		Deadline: req.Deadline, LogLevel: req.LogLevel, w: w, req: *req, progress: req.Progress,
	}
	if len(req.ClientCapabilityObject) > 0 && json.Valid(req.ClientCapabilityObject) {
		c.ClientCapabilities = json.RawMessage(req.ClientCapabilityObject)
	}
	if v := in.header[wire.HeaderCredentials]; len(v) > 0 {
		// Kept from the headers a handler sees (and may log): sealed, but the
		// handler's way to the values is Credentials.
		c.sealed = v[0]
		delete(in.header, wire.HeaderCredentials)
	}
	return c
}

// startSpan continues the caller's trace with the call's span, named by name. Without
// a tracer provider the span would record nothing, so none is started.
func (w *Worker) startSpan(c *Call, name func() string) (context.Context, trace.Span) {
	ctx := wire.Propagator.Extract(w.base, wire.HeaderCarrier(c.Header))
	if !wire.Tracing() {
		return ctx, noop.Span{}
	}
	return tracer.Start(ctx, name(), trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("toolgate.tool", w.tool.ID),
			attribute.String("toolgate.method", c.Method),
			attribute.String("toolgate.request_id", c.RequestID),
			attribute.String("toolgate.call_id", c.CallID),
			attribute.String("toolgate.account", c.Account),
			attribute.String("toolgate.instance", w.cfg.instance),
		))
}

// callScope is what ends with a call: its context, its deadline, and its place among
// the calls a cancel reaches (see track).
type callScope struct {
	w      *Worker
	cancel context.CancelCauseFunc
	stop   context.CancelFunc // the deadline's, when it has one
	callID string
	rc     *runningCall
}

// scope gives the call its context: ended by its caller's cancel, and by the caller's
// deadline or else the method's timeout. A call whose cancel came first starts ended.
func (w *Worker) scope(ctx context.Context, c *Call, timeout time.Duration) (context.Context, callScope) {
	ctx, cancel := context.WithCancelCause(ctx)
	s := callScope{w: w, cancel: cancel, callID: c.CallID}
	switch {
	case !c.Deadline.IsZero():
		ctx, s.stop = context.WithDeadline(ctx, c.Deadline)
	case timeout > 0:
		ctx, s.stop = context.WithTimeout(ctx, timeout)
	}
	s.rc = w.track(c.CallID, cancel)
	return ctx, s
}

// end ends what scope began.
func (s callScope) end() {
	s.w.untrack(s.callID, s.rc)
	if s.stop != nil {
		s.stop()
	}
	s.cancel(nil)
}

// execute runs the call's handler, unless the request could not be read or the call
// ended while it waited for a slot: then it says why without running it.
func (w *Worker) execute(ctx context.Context, m *Method, c *Call, readErr error) (any, error) {
	switch {
	case readErr != nil:
		// Only a gateway breaking the contract sends one: say so rather than guess.
		w.log.Warn("call not run: the request breaks the wire contract", "method", c.Method, "err", readErr)
		return nil, &Error{Code: wire.CodeBadRequest, Message: readErr.Error()}
	case ctx.Err() == nil:
		return w.invoke(ctx, m, c)
	case errors.Is(context.Cause(ctx), ErrCancelled):
		// Cancelled while it waited for a slot: nobody waits for the answer, and the
		// handler must not act on a request its caller gave up.
		w.log.Info("call not run: cancelled before it started", "method", c.Method, "request_id", c.RequestID)
		return nil, &Error{Code: CodeCancelled, Message: "the caller cancelled the call before it started"}
	default:
		w.log.Info("call not run: its deadline passed while it waited", "method", c.Method, "request_id", c.RequestID)
		return nil, &Error{Code: CodeTimeout, Message: "the call's deadline passed before it started", Status: 504}
	}
}

// answer is the reply to the call, made by respond from what the handler returned:
// one past the bus's max_payload stored as a payload (or an error in its place), and
// the instance named on the reply of a call whose session or task may be held here.
func (w *Worker) answer(ctx context.Context, respond func(subject string, result any, err error) *nats.Msg, c *Call, to string, result any, err error) (*nats.Msg, error) {
	msg := respond(to, result, err)
	if max := w.nc.MaxPayload(); max > 0 && wire.MessageSize(msg) > max {
		large, serr := w.storePayload(ctx, msg, wire.PayloadLimitOf(c.Header))
		if msg = large; serr != nil {
			err = serr
			msg = respond(to, nil, err)
		}
	}
	if w.tool.Capabilities.SessionState && (c.Session != "" || c.Header.Get(wire.HeaderProtocolVersion) != "") {
		// A session's instance, and a 2026-07-28 request's, whose answer may name
		// state held here (a bridged server's task).
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header[wire.HeaderInstance] = []string{w.cfg.instance} // see onDirect
	}
	return msg, err
}

// failed marks the call's span with its error, as failure reads it, and logs an error
// that is neither the tool's own nor a JSON-RPC one: those are answers, not failures.
func (w *Worker) failed(ctx context.Context, span trace.Span, c *Call, err error, failure func(error) (status, code string)) {
	status, code := failure(err)
	span.SetStatus(codes.Error, status)
	span.SetAttributes(attribute.String("toolgate.error_code", code))
	var own *Error
	var rpc *RPCError
	if !errors.As(err, &own) && !errors.As(err, &rpc) {
		w.log.Warn("call failed", "method", c.Method, "request_id", c.RequestID, "trace_id", trace.SpanContextFromContext(ctx).TraceID(), "err", err)
	}
}

// toolFailure is a tool call's error as its caller reads it: the tool's error, or
// the JSON-RPC error a handler returned.
func toolFailure(err error) (status, code string) {
	var asRPC *RPCError
	if errors.As(err, &asRPC) {
		return rpcFailure(err)
	}
	te := toolError(err)
	return te.Error(), te.Code
}

// rpcFailure is an MCP request's error as its client reads it: a JSON-RPC error.
func rpcFailure(err error) (status, code string) {
	re := rpcError(err)
	return re.Error(), strconv.FormatInt(re.Code, 10)
}

// send publishes the call's reply, unless nobody waits for it: a call published
// without a reply subject, or one whose caller's deadline has passed.
func (w *Worker) send(ctx context.Context, c *Call, to string, msg *nats.Msg, err error) {
	if to == "" {
		return
	}
	if err != nil && !c.Deadline.IsZero() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller's deadline has passed and the caller reports its own timeout; an
		// error reply would race its timer and make the same timeout look like the tool's.
		return
	}
	if err := w.nc.PublishMsg(msg); err != nil {
		w.log.Warn("reply not sent", "method", c.Method, "request_id", c.RequestID, "err", err)
	}
}

// invoke runs the handler, turning a panic into an error reply: one bad call must
// not take down the instance and every other call it runs.
func (w *Worker) invoke(ctx context.Context, m *Method, c *Call) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("handler panicked", "method", c.Method, "request_id", c.RequestID, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, &Error{Code: CodeInternal, Message: "the handler panicked"}
		}
	}()
	return m.Handler(ctx, c)
}
