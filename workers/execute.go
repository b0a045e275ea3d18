package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

// call runs one call and replies, in a slot of w.slots.
func (w *Worker) call(m *Method, st *methodStats, in inbound) {
	st.inFlight.Add(1)
	defer st.inFlight.Add(-1)
	start := time.Now()

	respond := reply
	if m.mcp {
		respond = mcpReply
	}
	req, readErr := w.cfg.subjects.ReadRequest(in.subject, in.header, in.data)
	method := m.Name
	if m.mcp {
		method = req.Method
	}
	c := &Call{
		Tool: w.tool.ID, Method: method, Params: in.data, Header: in.header,
		Account: req.Account, RequestID: req.RequestID, CallID: req.CallID, Session: req.Session,
		Deadline: req.Deadline, LogLevel: req.LogLevel, w: w, req: req, progress: req.Progress,
	}
	if len(req.ClientCapabilityObject) > 0 && json.Valid(req.ClientCapabilityObject) {
		c.ClientCapabilities = json.RawMessage(req.ClientCapabilityObject)
	}

	ctx := wire.Propagator.Extract(w.base, wire.HeaderCarrier(in.header))
	var span trace.Span = noop.Span{}
	if wire.Tracing() { // without a tracer provider the span would record nothing
		spanName := "tool.call " + w.tool.ID + "." + m.Name
		if m.mcp {
			spanName = "tool.mcp " + w.tool.ID + " " + method
		}
		ctx, span = tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("messaging.system", "nats"),
				attribute.String("toolgate.tool", w.tool.ID),
				attribute.String("toolgate.method", method),
				attribute.String("toolgate.request_id", c.RequestID),
				attribute.String("toolgate.call_id", c.CallID),
				attribute.String("toolgate.account", c.Account),
				attribute.String("toolgate.instance", w.cfg.instance),
			))
		defer span.End()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	switch {
	case !c.Deadline.IsZero():
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, c.Deadline)
		defer stop()
	case m.Timeout > 0:
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, m.Timeout)
		defer stop()
	}
	rc := w.track(c.CallID, cancel)
	defer w.untrack(c.CallID, rc)

	var result any
	var err error
	switch {
	case readErr != nil:
		// Only a gateway breaking the contract sends one: say so rather than guess.
		err = &Error{Code: wire.CodeBadRequest, Message: readErr.Error()}
		w.log.Warn("call not run: the request breaks the wire contract", "method", method, "err", readErr)
	case ctx.Err() == nil:
		result, err = w.invoke(ctx, m, c)
	case errors.Is(context.Cause(ctx), ErrCancelled):
		// Cancelled while it waited for a slot: nobody waits for the answer, and the
		// handler must not act on a request its caller gave up.
		err = &Error{Code: CodeCancelled, Message: "the caller cancelled the call before it started"}
		w.log.Info("call not run: cancelled before it started", "method", method, "request_id", c.RequestID)
	default:
		err = &Error{Code: CodeTimeout, Message: "the call's deadline passed before it started", Status: 504}
		w.log.Info("call not run: its deadline passed while it waited", "method", method, "request_id", c.RequestID)
	}
	msg := respond(in.reply, result, err)
	if max := w.nc.MaxPayload(); max > 0 {
		if size := wire.MessageSize(msg); size > max {
			err = &Error{Code: CodeReplyTooLarge, Message: fmt.Sprintf("the reply of %d bytes exceeds the bus's max_payload of %d", size, max), Status: 502}
			msg = respond(in.reply, nil, err)
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
	st.calls.Add(1)
	st.nanos.Add(int64(time.Since(start)))
	if err != nil {
		st.errors.Add(1)
		te := toolError(err)
		status, code := te.Error(), te.Code
		var asRPC *RPCError
		if m.mcp || errors.As(err, &asRPC) {
			re := rpcError(err)
			status, code = re.Error(), strconv.FormatInt(re.Code, 10)
		}
		span.SetStatus(codes.Error, status)
		span.SetAttributes(attribute.String("toolgate.error_code", code))
		var own *Error
		var rpc *RPCError
		if !errors.As(err, &own) && !errors.As(err, &rpc) {
			w.log.Warn("call failed", "method", method, "request_id", c.RequestID, "trace_id", trace.SpanContextFromContext(ctx).TraceID(), "err", err)
		}
	}
	if in.reply == "" {
		return // published without a reply subject: nobody waits
	}
	if err != nil && !c.Deadline.IsZero() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller's deadline has passed and the caller reports its own timeout; an
		// error reply would race its timer and make the same timeout look like the tool's.
		return
	}
	if err := w.nc.PublishMsg(msg); err != nil {
		w.log.Warn("reply not sent", "method", method, "request_id", c.RequestID, "err", err)
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
