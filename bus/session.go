package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
)

// ErrNoSessionLog means nothing stores messages for MCP sessions: no edge serving MCP
// has created the session event log on this NATS system.
var ErrNoSessionLog = errors.New("bus: no MCP session event log on this NATS system")

// ClientError is an MCP client's JSON-RPC error answer to a server-initiated request.
type ClientError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *ClientError) Error() string {
	return fmt.Sprintf("mcp client answered error %d: %s", e.Code, e.Message)
}

// SessionRequest sends a JSON-RPC request (sampling/createMessage, elicitation/create,
// roots/list) to the client of an MCP session and waits for the client's answer. A
// worker learns the session from the request's Tg-Session header.
//
// The request travels on SessionOut(session) into the session's event log, from
// which the edge holding the client's stream writes it; whichever edge receives the
// client's answer publishes it on SessionReply(session, id). The wait is bounded only
// by ctx: a client that never answers, or a session without an open stream, holds the
// caller until ctx ends, and then the client is told the request is cancelled. A
// JSON-RPC error from the client is a *ClientError.
func SessionRequest(ctx context.Context, nc *nats.Conn, subjects Subjects, session, method string, params any) (json.RawMessage, error) {
	if session == "" {
		return nil, errors.New("bus: session request: no MCP session (the call did not come from an MCP session)")
	}
	// The id becomes a subject token; nuid is alphanumeric.
	id := "tg-" + nuid.Next()
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("bus: session request: encode params: %w", err)
	}
	req, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      string          `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, p})
	if err != nil {
		return nil, fmt.Errorf("bus: session request: encode: %w", err)
	}

	// Subscribe before sending so that a fast answer is not missed.
	replies, err := nc.SubscribeSync(subjects.SessionReply(session, id))
	if err != nil {
		return nil, fmt.Errorf("bus: session request: subscribe: %w", err)
	}
	defer replies.Unsubscribe()

	// A request (rather than a publish) gets the event log's acknowledgement, so a
	// message nobody stores fails at once instead of waiting for an answer that
	// cannot come.
	ack, err := nc.RequestWithContext(ctx, subjects.SessionOut(session), req)
	if err != nil {
		if ctx.Err() != nil {
			cancelSessionRequest(nc, subjects, session, id, ctx) // it may have been stored
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, ErrNoSessionLog
		}
		return nil, fmt.Errorf("bus: session request: send: %w", mapRequestError(ctx, err))
	}
	var stored struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(ack.Data, &stored); err == nil && stored.Error != nil {
		return nil, fmt.Errorf("bus: session request: event log refused the message: %s", stored.Error.Description)
	}

	msg, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			cancelSessionRequest(nc, subjects, session, id, ctx)
		}
		return nil, fmt.Errorf("bus: session request %s: %w", method, mapRequestError(ctx, err))
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *ClientError    `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &answer); err != nil {
		return nil, fmt.Errorf("bus: session request %s: undecodable answer: %w", method, err)
	}
	if answer.Error != nil {
		return nil, answer.Error
	}
	return answer.Result, nil
}

// cancelSessionRequest tells the session's client that request id is no longer
// awaited, so it can stop asking its user.
func cancelSessionRequest(nc *nats.Conn, subjects Subjects, session, id string, ctx context.Context) {
	note, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": context.Cause(ctx).Error()},
	})
	if err == nil {
		_ = nc.Publish(subjects.SessionOut(session), note) // best effort
	}
}
