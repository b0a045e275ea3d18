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
// session's event log, from which the edge holding the client's stream writes it: on
// the stream of the POST the call is answered on, when it is answered with one (the
// request is related to the call, and a client need not open any other stream), else
// on the session's standalone stream. The edge answers once it is stored, so a request
// nothing stores fails at once instead of waiting for an answer that cannot come. Whichever edge receives the client's answer publishes it on the
// session's reply subject for the request's id. The wait is bounded only by ctx: a
// client that never answers holds the caller until ctx ends, and then the client is
// told the request is cancelled.
func (c *Call) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c.Session == "" {
		return nil, ErrNoSession
	}
	if capability := wire.Capability(method); capability != "" && !c.req.Declared(capability) {
		return nil, fmt.Errorf("workers: %s: the caller's MCP client does not support %s: %w", method, capability, ErrNotDeclared)
	}
	post := ""
	if c.req.Post != "" && wire.ValidToken(c.req.Post) {
		post = c.req.Post
	}
	return c.w.request(ctx, c.Session, post, method, params)
}

// SessionRequest sends a JSON-RPC request to the client of an MCP session of the
// worker's tool, on the session's standalone stream: a request related to no call
// (a server asking its client something on its own). It answers as Call.Request;
// a client that holds no standalone stream gets the request once it opens one.
func (w *Worker) SessionRequest(ctx context.Context, session, method string, params any) (json.RawMessage, error) {
	if !wire.ValidToken(session) {
		return nil, ErrNoSession
	}
	return w.request(ctx, session, "", method, params)
}

// Notify sends a JSON-RPC notification (notifications/message,
// notifications/resources/updated, ...) to the client of an MCP session of the
// worker's tool, on the session's standalone stream, and returns once the session's
// event log has stored it.
func (w *Worker) Notify(ctx context.Context, session, method string, params any) error {
	if !wire.ValidToken(session) {
		return ErrNoSession
	}
	body, err := wire.SessionNotification(method, params)
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	if w.inbox == nil {
		return fmt.Errorf("workers: %s: the worker is not running", method)
	}
	if err := w.ask(ctx, w.sessionMsg(session, "", body)); err != nil {
		if errors.Is(err, wire.ErrNotStored) {
			return fmt.Errorf("workers: %s: %w", method, ErrNoSessionLog)
		}
		return fmt.Errorf("workers: %s: %w", method, err)
	}
	return nil
}

// ListChanged tells the edges that one of the tool's lists changed outside any MCP
// session: list is wire.ListTools, wire.ListPrompts or wire.ListResources. Every edge
// sends the matching notifications/<list>/list_changed on the 2026-07-28
// subscriptions/listen streams of the tool that asked for it. (A change of the tool's
// methods needs no call: the edges hear it from the registry.)
func (w *Worker) ListChanged(list string) error {
	switch list {
	case wire.ListTools, wire.ListPrompts, wire.ListResources:
	default:
		return fmt.Errorf("workers: list_changed of %q: not tools, prompts or resources", list)
	}
	if err := w.nc.Publish(w.cfg.subjects.ListChanged(w.tool.ID), []byte(list)); err != nil {
		return fmt.Errorf("workers: list_changed of %s: %w", list, err)
	}
	return nil
}

// OnSessionEnd has f called with the id of every MCP session of the tool that ends
// (its client deleted it, or it expired) while the worker runs, so that a worker
// holding something for a session can let it go. f may be called more than once for
// a session, and runs on the connection's goroutine: it must not block. Call it
// before Run.
func (w *Worker) OnSessionEnd(f func(session string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("workers: OnSessionEnd called after Run")
	}
	w.sessionEnd = f
}

// request sends a request for session's client, on the stream of POST post when it
// names one, and waits for its answer.
func (w *Worker) request(ctx context.Context, session, post, method string, params any) (json.RawMessage, error) {
	// The id becomes a subject token; nuid is alphanumeric.
	id := "tg-" + nuid.Next()
	body, err := wire.SessionRequest(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("workers: %w", err)
	}
	subj := w.cfg.subjects
	if w.inbox == nil {
		return nil, fmt.Errorf("workers: %s: the worker is not running", method)
	}

	// Subscribe before sending so that a fast answer is not missed.
	replies, err := wire.SubscribeReplies(w.nc, subj.SessionReply(w.tool.ID, session, id))
	if err != nil {
		return nil, fmt.Errorf("workers: %s: subscribe: %w", method, err)
	}
	defer replies.Unsubscribe()

	if err := w.ask(ctx, w.sessionMsg(session, post, body)); err != nil {
		if ctx.Err() != nil {
			w.cancelRequest(ctx, session, post, id) // it may have been stored
			return nil, fmt.Errorf("workers: %s: %w", method, ctx.Err())
		}
		if errors.Is(err, wire.ErrNotStored) {
			return nil, fmt.Errorf("workers: %s: %w", method, ErrNoSessionLog)
		}
		return nil, fmt.Errorf("workers: %s: send: %w", method, err)
	}
	answer, err := replies.Next(ctx)
	if err != nil {
		if ctx.Err() != nil {
			w.cancelRequest(ctx, session, post, id)
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

// cancelRequest tells the session's client, on the stream the request went on, that
// request id is no longer awaited, so it can stop asking its user.
func (w *Worker) cancelRequest(ctx context.Context, session, post, id string) {
	_ = w.nc.PublishMsg(w.sessionMsg(session, post, wire.SessionCancel(id, context.Cause(ctx).Error()))) // best effort: an edge stores it
}

// sessionMsg is the ask that has an edge store body for session's client: on the
// stream of POST post when it names one, else on the session's standalone stream.
func (w *Worker) sessionMsg(session, post string, body []byte) *nats.Msg {
	msg := nats.NewMsg(w.cfg.subjects.AskSession(w.tool.ID, session))
	msg.Data = body
	if post != "" {
		msg.Header.Set(wire.HeaderPost, post)
	}
	return msg
}

// onSessionEnd hands the end of a session to the function OnSessionEnd set.
func (w *Worker) onSessionEnd(msg *nats.Msg) {
	tool, session, ok := w.cfg.subjects.ParseSessionEnd(msg.Subject)
	if !ok || tool != w.tool.ID {
		return
	}
	w.mu.Lock()
	f := w.sessionEnd
	w.mu.Unlock()
	if f != nil {
		f(session)
	}
}
