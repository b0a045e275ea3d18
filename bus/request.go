package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/bus/wire"
)

var tracer = otel.Tracer("github.com/toolgate/toolgate/bus")

// Do sends req to its tool's workers and waits for the reply or ctx's end. It maps the
// ways a call fails into ErrNoResponders, ErrTimeout, *PayloadTooLargeError, and the
// tool's own *wire.ToolError or *wire.RPCError; when the caller goes away or the
// deadline passes first, it publishes the call's cancel so the worker stops working
// on an answer nobody will read.
func Do(ctx context.Context, nc *nats.Conn, subjects wire.Subjects, req *wire.Request) (*wire.Reply, error) {
	var span trace.Span = noop.Span{}
	if wire.Tracing() {
		ctx, span = tracer.Start(ctx, "tool.request "+subjects.Subject(req), trace.WithSpanKind(trace.SpanKindClient))
		defer span.End()
	}
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", subjects.Subject(req)),
			attribute.String("toolgate.call_id", req.CallID),
			attribute.String("toolgate.request_id", req.RequestID),
		)
	}

	if dl, ok := ctx.Deadline(); !req.Deadline.IsZero() && (!ok || dl.After(req.Deadline)) {
		// A context bounded at the deadline already (Watcher.Send's) needs no layer more.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	msg := subjects.Msg(ctx, req)
	if max := nc.MaxPayload(); max > 0 {
		if size := wire.MessageSize(msg); size > max {
			err := &PayloadTooLargeError{Size: size, Max: max}
			span.SetStatus(codes.Error, err.Error())
			return nil, err
		}
	}
	sent := time.Now()
	var reply *nats.Msg
	var err error
	if req.ReplyTo == "" {
		reply, err = nc.RequestMsgWithContext(ctx, msg)
	} else {
		reply, err = requestTo(ctx, nc, msg, req.ReplyTo)
	}
	elapsed := time.Since(sent)
	if err != nil {
		err = mapRequestError(ctx, err)
		if (errors.Is(err, ErrTimeout) || errors.Is(err, context.Canceled)) && req.CallID != "" {
			// Best effort: the worker may already be done.
			_ = nc.Publish(subjects.Cancel(req.Tool, req.CallID), nil)
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	r, err := wire.ReadReply(reply)
	if err != nil {
		var te *wire.ToolError
		if errors.As(err, &te) {
			te.Elapsed = elapsed
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	r.Elapsed = elapsed
	if span.IsRecording() {
		span.SetAttributes(attribute.Int("toolgate.status", r.Status))
	}
	return r, nil
}

// requestTo sends msg as a request whose reply goes to subject. A server that finds
// no subscriber for msg answers, on this connection's subscription to subject, with
// the no-responders status, as it does to an inbox.
func requestTo(ctx context.Context, nc *nats.Conn, msg *nats.Msg, subject string) (*nats.Msg, error) {
	replies, err := wire.SubscribeReplies(nc, subject)
	if err != nil {
		return nil, err
	}
	defer replies.Unsubscribe()
	msg.Reply = subject
	if err := nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	reply, err := replies.Next(ctx)
	if err != nil {
		return nil, err
	}
	if len(reply.Data) == 0 && reply.Header.Get("Status") == "503" {
		return nil, nats.ErrNoResponders
	}
	return reply, nil
}

func mapRequestError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return ErrNoResponders
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return ErrTimeout
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w: %v", ErrPayloadTooLarge, err)
	case errors.Is(err, context.Canceled):
		return context.Canceled
	}
	if ctx.Err() != nil {
		return mapRequestError(ctx, ctx.Err())
	}
	return fmt.Errorf("bus: request: %w", err)
}
