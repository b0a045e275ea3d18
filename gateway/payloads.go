package gateway

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/payloads"
)

// WithPayloads lets calls carry requests and replies past one NATS message, up to
// limit bytes (an account's own limit may be lower), as payloads in store: the claim
// check (package payloads). Without it, such a call fails as the bus refuses it.
func WithPayloads(store *payloads.Store, limit int64) Option {
	return func(g *Gateway) { g.payloads, g.payloadLimit = store, limit }
}

// Payloads is the payloads bucket calls use (nil without WithPayloads).
func (g *Gateway) Payloads() *payloads.Store { return g.payloads }

// MaxPayload is the deployment's limit on a call's request and reply: what any
// account may send at most.
func (g *Gateway) MaxPayload() int64 {
	if g.payloadLimit <= 0 {
		return wire.DefaultPayloadLimit
	}
	return g.payloadLimit
}

// PayloadLimit is the largest request or reply of account's calls: the deployment's
// limit, or the account's own when lower.
func (g *Gateway) PayloadLimit(account string) int64 {
	limit := g.MaxPayload()
	if a := g.view.Snapshot().Account(account); a != nil && a.Limits.PayloadBytes > 0 {
		limit = min(limit, a.Limits.PayloadBytes)
	}
	return limit
}

// TooLarge is the failure of a request or reply of size bytes past limit.
func TooLarge(what string, size, limit int64) error {
	return Fail(KindPayloadTooLarge, "the %s of %d bytes is past the %d bytes the account may send or receive", what, size, limit)
}

// storeParams makes the request of c a claim check when its params are past one
// message, or were stored by its caller already (c.Payload): the request then names
// the payload. It also says the largest reply the caller takes, when that is not the
// default. It returns what it stored, to remove once the call is over.
func (g *Gateway) storeParams(ctx context.Context, c *Call, req *wire.Request) (stored *wire.Payload, err error) {
	if g.payloads == nil {
		return nil, nil
	}
	limit := g.PayloadLimit(c.Principal.Account)
	if limit != wire.DefaultPayloadLimit {
		req.Header = withHeader(req.Header, wire.HeaderPayloadLimit, strconv.FormatInt(limit, 10))
	}
	if c.Payload != nil { // stored by the caller, which removes it
		req.Header = withHeader(req.Header, wire.HeaderPayload, c.Payload.String())
		req.Data = nil
		return nil, nil
	}
	if int64(len(req.Data)) <= wire.PayloadThreshold(g.nc.MaxPayload()) {
		return nil, nil
	}
	if int64(len(req.Data)) > limit {
		return nil, TooLarge("request", int64(len(req.Data)), limit)
	}
	p, err := g.payloads.Write(ctx, c.Tool, req.Data, nil, limit)
	if err != nil {
		return nil, fmt.Errorf("gateway: the request's payload: %w", err)
	}
	req.Header = withHeader(req.Header, wire.HeaderPayload, p.String())
	req.Data = nil
	return &p, nil
}

// TakeReply is what a call's caller gets of reply: its bytes whole, read from the
// payload it names (and the payload removed), or a failure when they are past the
// caller's limit. For a reply read after the call (the answer to a call whose edge
// died, kept in the MCP event log); the gateway's own calls take theirs as they end.
func (g *Gateway) TakeReply(ctx context.Context, c *Call, reply *wire.Reply) (*wire.Reply, error) {
	return g.takeReply(ctx, c, reply)
}

// PeekReply is TakeReply leaving the payload in the bucket: for a reply read by an
// edge other than the one whose call it answers (the end of a call whose edge may have
// died, recorded by whichever edge reads it first), as that edge removes the payload
// once it took it, or the bucket's TTL does.
// It fails with ErrPayloadUnread when the payload cannot be read (the edge running the
// call took it), for its reader to leave the reply to that edge.
func (g *Gateway) PeekReply(ctx context.Context, c *Call, reply *wire.Reply) (*wire.Reply, error) {
	r, err := g.readReply(ctx, c, reply, false)
	if te, ok := errors.AsType[*wire.ToolError](err); ok && te.Code == wire.CodeBadReply {
		return nil, fmt.Errorf("%w: %s", ErrPayloadUnread, te.Message)
	}
	return r, err
}

// ErrPayloadUnread is PeekReply's failure to read the payload a reply names.
var ErrPayloadUnread = errors.New("gateway: the reply's payload could not be read")

// takeReply checks a reply that names a payload against the caller's limit, and,
// unless its caller streams it (c.StreamReply), reads it whole into the reply and
// removes it. A streamed reply's payload is its caller's to remove (Payloads().Delete).
func (g *Gateway) takeReply(ctx context.Context, c *Call, reply *wire.Reply) (*wire.Reply, error) {
	return g.readReply(ctx, c, reply, true)
}

// readReply is takeReply, which removes the payload it read only when remove is set.
func (g *Gateway) readReply(ctx context.Context, c *Call, reply *wire.Reply, remove bool) (*wire.Reply, error) {
	p, ok, err := wire.PayloadOf(reply.Header)
	if !ok {
		if g.payloads != nil && int64(len(reply.Data)) > g.PayloadLimit(c.Principal.Account) {
			return nil, TooLarge("reply", int64(len(reply.Data)), g.PayloadLimit(c.Principal.Account))
		}
		return reply, nil
	}
	if err != nil || g.payloads == nil {
		return nil, &wire.ToolError{Code: wire.CodeBadReply, Message: fmt.Sprintf("tool sent a payload it cannot send: %v", err)}
	}
	if limit := g.PayloadLimit(c.Principal.Account); p.Size > limit {
		if remove {
			g.payloads.Delete(context.WithoutCancel(ctx), c.Tool, p)
		}
		return nil, TooLarge("reply", p.Size, limit)
	}
	reply.Payload = &p
	if c.StreamReply {
		return reply, nil
	}
	if remove {
		defer g.payloads.Delete(context.WithoutCancel(ctx), c.Tool, p)
	}
	if reply.Data, err = g.payloads.Read(ctx, c.Tool, p); err != nil {
		return nil, &wire.ToolError{Code: wire.CodeBadReply, Message: fmt.Sprintf("the reply's payload could not be read: %v", err)}
	}
	reply.Payload = nil
	return reply, nil
}

// withHeader is h with key set to v, copied so that the caller's header (shared by
// the call's sends) is left as it was.
func withHeader(h nats.Header, key, v string) nats.Header {
	out := make(nats.Header, len(h)+1)
	for k, vs := range h {
		out[k] = vs
	}
	out[key] = []string{v}
	return out
}
