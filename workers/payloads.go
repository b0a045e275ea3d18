package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// A request or reply past one NATS message travels as a claim check (wire.Payload):
// the SDK reads a request's parts, and stores a large reply's, by asking an edge for
// each (wire.Subjects.AskPayload), so that a handler sees its params and returns its
// result as it would for a small call.

// partWait bounds the wait for one part's ask: the edge's own bound and a little.
const partWait = wire.AskTimeout + 2*time.Second

// takePayload replaces the body of a request that carries a payload with the
// payload's bytes, read part by part from the edges.
func (w *Worker) takePayload(ctx context.Context, in *inbound) error {
	p, ok, err := wire.PayloadOf(in.header)
	if !ok || err != nil {
		return err
	}
	data := make([]byte, 0, p.Size)
	for n := range p.Parts {
		part, err := w.askPart(ctx, w.cfg.subjects.AskPayloadMsg(w.tool.ID, wire.PayloadGet, p.ID, n, nil))
		if err != nil {
			return fmt.Errorf("workers: the request's payload, part %d of %d: %w", n, p.Parts, err)
		}
		if int64(len(data)+len(part)) > p.Size {
			return fmt.Errorf("workers: the request's payload holds more than the %d bytes named", p.Size)
		}
		data = append(data, part...)
	}
	if int64(len(data)) != p.Size {
		return fmt.Errorf("workers: the request's payload holds %d bytes, not the %d named", len(data), p.Size)
	}
	in.data, in.payload = data, true
	delete(in.header, wire.HeaderPayload)
	return nil
}

// storePayload makes msg, a reply past the bus's max_payload, a claim check: its body
// stored in parts through the edges, the message naming them. A body past the
// caller's limit (limit) is not stored: the reply is payload_too_large instead.
func (w *Worker) storePayload(ctx context.Context, msg *nats.Msg, limit int64) (*nats.Msg, error) {
	if int64(len(msg.Data)) > limit {
		return nil, &Error{Code: CodePayloadTooLarge, Status: 413,
			Message: fmt.Sprintf("the reply of %d bytes is past the %d bytes the caller takes", len(msg.Data), limit)}
	}
	size := wire.PayloadPartSize(w.nc.MaxPayload())
	p := wire.Payload{ID: nuid.Next(), Size: int64(len(msg.Data))}
	for rest := msg.Data; len(rest) > 0; p.Parts++ {
		part := rest[:min(size, len(rest))]
		rest = rest[len(part):]
		if _, err := w.askPart(ctx, w.cfg.subjects.AskPayloadMsg(w.tool.ID, wire.PayloadPut, p.ID, p.Parts, part)); err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("the reply of %d bytes could not be stored: %v", len(msg.Data), err)}
		}
	}
	msg.Header.Set(wire.HeaderPayload, p.String())
	msg.Data = nil
	return msg, nil
}

// askPart sends one payload ask and returns its answer's body.
func (w *Worker) askPart(ctx context.Context, msg *nats.Msg) ([]byte, error) {
	if w.inbox == nil {
		return nil, fmt.Errorf("the worker is not running")
	}
	ctx, cancel := context.WithTimeout(ctx, partWait)
	defer cancel()
	answer, err := w.inbox.request(ctx, msg)
	if err != nil {
		return nil, err
	}
	body, _, err := wire.ReadAskReply(answer)
	return body, err
}
