package bus

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
//
// The subscription is a channel subscription with room for a few messages: one that
// SubscribeSync makes gets a channel of the connection's SubChanLen, 64k entries
// (512 KiB) by default, allocated and cleared for every call.
func requestTo(ctx context.Context, nc *nats.Conn, msg *nats.Msg, subject string) (*nats.Msg, error) {
	replies := make(chan *nats.Msg, replyRoom)
	sub, err := nc.ChanSubscribe(subject, replies)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	// A closed connection ends the wait, as it ends a synchronous subscription's.
	closed := make(chan struct{})
	var once sync.Once
	sub.SetClosedHandler(func(string) { once.Do(func() { close(closed) }) })
	if !sub.IsValid() {
		return nil, nats.ErrConnectionClosed
	}
	msg.Reply = subject
	if err := nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	var reply *nats.Msg
	select {
	case reply = <-replies:
	case <-closed:
		select {
		case reply = <-replies: // it came as the connection closed
		default:
			return nil, nats.ErrConnectionClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if len(reply.Data) == 0 && reply.Header.Get("Status") == "503" {
		return nil, nats.ErrNoResponders
	}
	return reply, nil
}

// replyRoom is how many messages a call's reply subscription holds: one reply is
// expected; more, which no worker sends, would be dropped as a slow consumer's.
const replyRoom = 4

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
