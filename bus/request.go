package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

var tracer = otel.Tracer("github.com/toolgate/toolgate/bus")

// Request is one message to a tool, with what the worker needs to know about the caller.
type Request struct {
	Subject   string
	RequestID string
	Account   string
	Session   string    // MCP session, if any
	Deadline  time.Time // zero means the context's deadline
	Progress  bool      // the caller wants progress notifications on Progress(RequestID)
	Data      []byte
	Header    nats.Header // extra headers, copied onto the message
	// ReplyTo is where the tool answers, when the answer must be kept where others can
	// read it (an MCP call's stream, in the event log) rather than sent to this
	// connection's inbox alone. Do subscribes to it for the call's length.
	ReplyTo string
}

// Reply is what a tool answered, as it gave it.
type Reply struct {
	Status      int // 200 unless the tool set Tg-Status
	ContentType string
	Data        []byte
	Header      nats.Header
	// Elapsed is the round trip on the bus, from sending the request to holding the
	// reply: the tool's time plus NATS's, without the caller's own.
	Elapsed time.Duration
}

// Do sends req and waits for the reply or ctx's end. It maps the ways a call fails
// into ErrNoResponders, ErrTimeout, *PayloadTooLargeError and *ToolError; when the
// caller goes away or the deadline passes first, it publishes a cancel message so the
// worker stops working on an answer nobody will read.
func Do(ctx context.Context, nc *nats.Conn, subjects Subjects, req Request) (*Reply, error) {
	var span trace.Span = noop.Span{}
	if Tracing() {
		ctx, span = tracer.Start(ctx, "tool.request "+req.Subject, trace.WithSpanKind(trace.SpanKindClient))
		defer span.End()
	}
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(
			attribute.String("messaging.system", "nats"),
			attribute.String("messaging.destination.name", req.Subject),
			attribute.String("toolgate.request_id", req.RequestID),
		)
	}

	if !req.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.Deadline)
		defer cancel()
	}
	msg := Message(ctx, req)
	if max := nc.MaxPayload(); max > 0 {
		if size := MessageSize(msg); size > max {
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
		if errors.Is(err, ErrTimeout) || errors.Is(err, context.Canceled) {
			// Best effort: the worker may already be done.
			_ = nc.Publish(subjects.Cancel(req.RequestID), nil)
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	r, err := ReadReply(reply)
	if err != nil {
		var te *ToolError
		if errors.As(err, &te) {
			te.Elapsed = elapsed
		}
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	r.Elapsed = elapsed
	if recording {
		span.SetAttributes(attribute.Int("toolgate.status", r.Status))
	}
	return r, nil
}

// requestTo sends msg as a request whose reply goes to subject. A server that finds
// no subscriber for msg answers, on this connection's subscription to subject, with
// the no-responders status, as it does to an inbox.
func requestTo(ctx context.Context, nc *nats.Conn, msg *nats.Msg, subject string) (*nats.Msg, error) {
	sub, err := nc.SubscribeSync(subject)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	msg.Reply = subject
	if err := nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	reply, err := sub.NextMsgWithContext(ctx)
	if err != nil {
		return nil, err
	}
	if len(reply.Data) == 0 && reply.Header.Get("Status") == "503" {
		return nil, nats.ErrNoResponders
	}
	return reply, nil
}

// Message builds the NATS message for req, with the trace context of ctx injected.
func Message(ctx context.Context, req Request) *nats.Msg {
	msg := nats.NewMsg(req.Subject)
	msg.Data = req.Data
	for k, v := range req.Header {
		msg.Header[k] = v
	}
	if req.RequestID != "" {
		msg.Header.Set(HeaderRequestID, req.RequestID)
	}
	if req.Account != "" {
		msg.Header.Set(HeaderAccount, req.Account)
	}
	if req.Session != "" {
		msg.Header.Set(HeaderSession, req.Session)
	}
	deadline := req.Deadline
	if deadline.IsZero() {
		deadline, _ = ctx.Deadline()
	}
	if !deadline.IsZero() {
		msg.Header.Set(HeaderDeadline, strconv.FormatInt(deadline.UnixMilli(), 10))
	}
	if req.Progress {
		msg.Header.Set(HeaderProgress, "1")
	}
	Propagator.Inject(ctx, HeaderCarrier(msg.Header))
	return msg
}

// MessageSize is the number of bytes msg takes against the server's max_payload:
// its data plus its encoded headers.
func MessageSize(msg *nats.Msg) int64 {
	size := int64(len(msg.Data))
	if len(msg.Header) > 0 {
		size += int64(len("NATS/1.0\r\n\r\n"))
		for k, vs := range msg.Header {
			for _, v := range vs {
				size += int64(len(k) + len(": ") + len(v) + len("\r\n"))
			}
		}
	}
	return size
}

// ReadReply turns a reply message into a Reply, or a *ToolError when the tool answered
// with the nats micro error headers.
func ReadReply(msg *nats.Msg) (*Reply, error) {
	status := 0
	if s := msg.Header.Get(HeaderStatus); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return nil, &ToolError{Code: "bad_status", Message: fmt.Sprintf("tool sent an invalid %s %q", HeaderStatus, s)}
		}
		status = n
	}
	if code := msg.Header.Get(HeaderErrorCode); code != "" {
		return nil, &ToolError{Code: code, Message: msg.Header.Get(HeaderError), Status: status, Data: msg.Data}
	}
	if status == 0 {
		status = 200
	}
	return &Reply{Status: status, ContentType: msg.Header.Get(HeaderContentType), Data: msg.Data, Header: msg.Header}, nil
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
