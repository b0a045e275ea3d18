package registry

import (
	"context"
	"fmt"
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
