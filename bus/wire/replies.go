package wire

import (
	"context"
	"sync"

	"github.com/nats-io/nats.go"
)

// Replies is the subscription of one request sent with a reply subject of its own (an
// edge's call answered on a stream, a worker's request to its session's client), for
// the one reply it waits for. It is a channel subscription with room for a few
// messages: one that SubscribeSync makes gets a channel of the connection's
// SubChanLen, 64k entries (512 KiB) by default, allocated and cleared for every
// request.
type Replies struct {
	sub    *nats.Subscription
	ch     chan *nats.Msg
	closed chan struct{}
}

// replyRoom is how many messages a request's reply subscription holds: one reply is
// expected; more, which nobody sends, would be dropped as a slow consumer's.
const replyRoom = 4

// SubscribeReplies subscribes to subject for a request's reply; subscribe before
// sending the request, so that a fast reply is not missed, and Unsubscribe once done.
func SubscribeReplies(nc *nats.Conn, subject string) (*Replies, error) {
	r := &Replies{ch: make(chan *nats.Msg, replyRoom), closed: make(chan struct{})}
	sub, err := nc.ChanSubscribe(subject, r.ch)
	if err != nil {
		return nil, err
	}
	// A closed connection ends the wait, as it ends a synchronous subscription's.
	var once sync.Once
	sub.SetClosedHandler(func(string) { once.Do(func() { close(r.closed) }) })
	if !sub.IsValid() {
		_ = sub.Unsubscribe()
		return nil, nats.ErrConnectionClosed
	}
	r.sub = sub
	return r, nil
}

// Next waits for the next reply. It fails with ctx's error when ctx ends first, and
// with nats.ErrConnectionClosed when the connection closes first.
func (r *Replies) Next(ctx context.Context) (*nats.Msg, error) {
	select {
	case m := <-r.ch:
		return m, nil
	case <-r.closed:
		select {
		case m := <-r.ch: // it came as the connection closed
			return m, nil
		default:
			return nil, nats.ErrConnectionClosed
		}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Unsubscribe ends the subscription.
func (r *Replies) Unsubscribe() { _ = r.sub.Unsubscribe() }
