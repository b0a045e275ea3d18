package workers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// inbox is where a worker waits for the answers to what it asks of the edges (its
// record, its presence, its state, its session requests). It is one subscription
// under the tool's own inbox root (wire.WorkerInbox), made by the worker whatever
// inbox prefix its connection has, so that a worker's credentials need grant it only
// its own tool's inbox, never the whole of _INBOX.
type inbox struct {
	nc     *nats.Conn
	prefix string // <tool's inbox root><nuid>.
	sub    *nats.Subscription

	mu    sync.Mutex
	waits map[string]chan *nats.Msg
}

func openInbox(nc *nats.Conn, tool string) (*inbox, error) {
	b := &inbox{nc: nc, prefix: wire.WorkerInbox(tool) + nuid.Next() + ".", waits: map[string]chan *nats.Msg{}}
	sub, err := nc.Subscribe(b.prefix+"*", b.deliver)
	if err != nil {
		return nil, fmt.Errorf("subscribe to its inbox: %w", err)
	}
	b.sub = sub
	return b, nil
}

func (b *inbox) deliver(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, b.prefix)
	b.mu.Lock()
	ch := b.waits[token]
	delete(b.waits, token)
	b.mu.Unlock()
	if ch != nil {
		ch <- m // buffered for one
	}
}

// request publishes msg with a reply subject of the inbox and returns the answer, or
// ctx's error.
func (b *inbox) request(ctx context.Context, msg *nats.Msg) (*nats.Msg, error) {
	token := nuid.Next()
	ch := make(chan *nats.Msg, 1)
	b.mu.Lock()
	b.waits[token] = ch
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.waits, token)
		b.mu.Unlock()
	}()
	msg.Reply = b.prefix + token
	if err := b.nc.PublishMsg(msg); err != nil {
		return nil, err
	}
	select {
	case m := <-ch:
		return m, nil
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("no answer on %s: %w", msg.Subject, ctx.Err())
		}
		return nil, ctx.Err()
	}
}

func (b *inbox) close() { _ = b.sub.Unsubscribe() }
