package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrNoSession means the call did not come through an MCP session, so there is no
// client to send a request to.
var ErrNoSession = errors.New("workers: the call came without an MCP session; there is no client to ask")

// ErrNotDeclared means the call's MCP client did not declare the capability a request
// needs (sampling, elicitation, roots): it must not be asked.
var ErrNotDeclared = errors.New("workers: the caller's MCP client did not declare the capability")

// ErrNoSessionLog means nothing stores messages for MCP sessions: no edge serving MCP
// has created the session event log on this NATS system.
var ErrNoSessionLog = errors.New("workers: no MCP session event log on this NATS system")

// Request sends a JSON-RPC request to the client of the call's MCP session: a
// server-initiated request such as sampling/createMessage or elicitation/create. It
// returns the client's result, or an *RPCError when the client answered with an
// error.
//
// The worker asks an edge (wire.Subjects.AskSession) to put the request in the
// session's event log, from which the edge holding the client's stream writes it; the
// edge answers once it is stored, so a request nothing stores fails at once instead of
// waiting for an answer that cannot come. Whichever edge receives the client's answer publishes it on the session's
// reply subject for the request's id. The wait is bounded only by ctx: a client that
// never answers holds the caller until ctx ends, and then the client is told the
// request is cancelled.
func (c *Call) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c.Session == "" {
		return nil, ErrNoSession
	}
	if capability := wire.Capability(method); capability != "" && !c.req.Declared(capability) {
		return nil, fmt.Errorf("workers: %s: the caller's MCP client does not support %s: %w", method, capability, ErrNotDeclared)
	}
	// The id becomes a subject token; nuid is alphanumeric.
	id := "tg-" + nuid.Next()
	body, err := wire.SessionRequest(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	w, subj := c.w, c.w.cfg.subjects

	// Subscribe before sending so that a fast answer is not missed.
	replies, err := w.nc.SubscribeSync(subj.SessionReply(c.Tool, c.Session, id))
	if err != nil {
		return nil, fmt.Errorf("workers: %s: subscribe: %w", method, err)
	}
	defer replies.Unsubscribe()

	msg := nats.NewMsg(subj.AskSession(c.Tool, c.Session))
	msg.Data = body
	if err := w.ask(ctx, msg); err != nil {
		if ctx.Err() != nil {
			c.cancelRequest(ctx, id) // it may have been stored
			return nil, fmt.Errorf("workers: %s: %w", method, ctx.Err())
		}
		if errors.Is(err, wire.ErrNotStored) {
			return nil, fmt.Errorf("workers: %s: %w", method, ErrNoSessionLog)
		}
		return nil, fmt.Errorf("workers: %s: send: %w", method, err)
	}
	answer, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			c.cancelRequest(ctx, id)
			return nil, fmt.Errorf("workers: %s: %w", method, ctx.Err())
		}
		return nil, fmt.Errorf("workers: %s: %w", method, err)
	}
	res, err := wire.ReadSessionAnswer(answer.Data)
	var re *RPCError
	if errors.As(err, &re) {
		return nil, re
	}
	if err != nil {
		return nil, fmt.Errorf("workers: %s: %w", method, err)
	}
	return res, nil
}

// cancelRequest tells the session's client that request id is no longer awaited, so
// it can stop asking its user.
func (c *Call) cancelRequest(ctx context.Context, id string) {
	_ = c.w.nc.Publish(c.w.cfg.subjects.AskSession(c.Tool, c.Session), wire.SessionCancel(id, context.Cause(ctx).Error())) // best effort: an edge stores it
}
