package registry

import (
	"context"
	"fmt"
	"io"
	"math"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/payloads"
)

// A record past one NATS message (a large tool result on a session's stream, the
// request of a large call) is kept in the payloads bucket, and the log keeps a
// reference to it (wire.HeaderPayload): what the log stores, republishes and is
// read again for a resumption is the reference; a record's bytes are read back as
// it is delivered. The payload expires with the bucket's TTL (payloads.TTL), longer
// than the log's default retention; it is not removed when first delivered, since a
// client may resume the stream and be sent it again.

// eventsOwner names the payloads of the event log in the bucket: no tool id has a
// '~', so no worker's ask reaches them.
const eventsOwner = "~events"

// KeepLarge keeps the records past one message in store (without it, such a record
// fails to append as the server refuses it).
func (l *EventLog) KeepLarge(store *payloads.Store) { l.large = store }

// claimCheck makes msg a reference to a payload of its bytes when they are past one
// message.
func (l *EventLog) claimCheck(ctx context.Context, msg *nats.Msg) error {
	if l.large == nil || int64(len(msg.Data)) <= wire.PayloadThreshold(l.nc.MaxPayload()) {
		return nil
	}
	p, err := l.large.Write(ctx, eventsOwner, msg.Data, nil, math.MaxInt64)
	if err != nil {
		return fmt.Errorf("registry: event log: a large record: %w", err)
	}
	msg.Header.Set(wire.HeaderPayload, p.String())
	msg.Data = nil
	return nil
}

// whole is a record's bytes: its data, or the payload it names.
func (l *EventLog) whole(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	p, ok, err := wire.PayloadOf(h)
	if !ok {
		return data, nil
	}
	if err != nil || l.large == nil {
		return nil, fmt.Errorf("registry: event log: a record names a payload it cannot be read from: %v", err)
	}
	b, err := l.large.Read(ctx, eventsOwner, p)
	if err != nil {
		return nil, fmt.Errorf("registry: event log: a large record: %w", err)
	}
	return b, nil
}

// StoreLarge stores what r holds, to its end, as the payload of a large record (a
// large tool result framed as its response, written as it is read): the record
// appended with the reference in its header (wire.HeaderPayload: p.String()) and no
// data is then that message. Nothing of it is held whole.
func (l *EventLog) StoreLarge(ctx context.Context, r io.Reader) (wire.Payload, error) {
	if l.large == nil {
		return wire.Payload{}, fmt.Errorf("registry: event log: no payloads bucket for a large record")
	}
	p, err := l.large.Write(ctx, eventsOwner, nil, r, math.MaxInt64)
	if err != nil {
		return wire.Payload{}, fmt.Errorf("registry: event log: a large record: %w", err)
	}
	return p, nil
}

// WriteLarge writes the bytes of a large record (Record.Large) to w as they are read.
func (l *EventLog) WriteLarge(ctx context.Context, w io.Writer, p wire.Payload) error {
	if l.large == nil {
		return fmt.Errorf("registry: event log: no payloads bucket for a large record")
	}
	if err := l.large.WriteTo(ctx, w, eventsOwner, p); err != nil {
		return fmt.Errorf("registry: event log: a large record: %w", err)
	}
	return nil
}

// record is the record of seq delivered to f: its bytes whole, or, for a follower
// that leaves large records to be streamed (LeaveLarge), the payload a large one names.
func (f *Follower) record(ctx context.Context, seq uint64, h nats.Header, data []byte) (Record, error) {
	if f.LeaveLarge && f.log.large != nil {
		if p, ok, err := wire.PayloadOf(h); ok && err == nil {
			return Record{Seq: seq, Header: h, Large: &p}, nil
		}
	}
	data, err := f.log.whole(ctx, h, data)
	return Record{Seq: seq, Header: h, Data: data}, err
}
