package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/registry"
)

// ErrNoSession means the call did not come through an MCP session, so there is no
// client to send a request to.
var ErrNoSession = errors.New("workers: the call came without an MCP session; there is no client to ask")

// Request sends a JSON-RPC request to the client of the call's MCP session: a
// server-initiated request such as sampling/createMessage or elicitation/create. It
// returns the client's result, or an *RPCError when the client answered with an
// error.
//
// The request travels on the session's out subject into the session's event log, from
// which the edge holding the client's stream writes it; it is sent as a request, so a
// message nothing stores fails at once instead of waiting for an answer that cannot
// come. Whichever edge receives the client's answer publishes it on the session's
// reply subject for the request's id. The wait ends with ctx, and then the client is
// told the request is cancelled.
func (c *Call) Request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if c.Session == "" {
		return nil, ErrNoSession
	}
	// The id becomes a subject token; NewID is base62.
	id := registry.NewID("tg-")
	p, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("workers: %s: encode params: %w", method, err)
	}
	req, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      string          `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params,omitempty"`
	}{"2.0", id, method, p})
	if err != nil {
		return nil, fmt.Errorf("workers: %s: encode: %w", method, err)
	}

	// Subscribe before sending, so that a fast answer is not missed.
	replies, err := c.nc.SubscribeSync(c.subjects.SessionReply(c.Session, id))
	if err != nil {
		return nil, fmt.Errorf("workers: %s: subscribe: %w", method, err)
	}
	defer replies.Unsubscribe()

	ack, err := c.nc.RequestWithContext(ctx, c.subjects.SessionOut(c.Session), req)
	if err != nil {
		if ctx.Err() != nil {
			c.cancelRequest(id, context.Cause(ctx)) // it may have been stored
		}
		if errors.Is(err, nats.ErrNoResponders) {
			return nil, fmt.Errorf("workers: %s: nothing stores messages for MCP sessions on this NATS system", method)
		}
		return nil, fmt.Errorf("workers: %s: send: %w", method, err)
	}
	var stored struct {
		Error *struct {
			Description string `json:"description"`
		} `json:"error"`
	}
	if json.Unmarshal(ack.Data, &stored) == nil && stored.Error != nil {
		return nil, fmt.Errorf("workers: %s: the session's event log refused the request: %s", method, stored.Error.Description)
	}

	msg, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		if ctx.Err() != nil {
			c.cancelRequest(id, context.Cause(ctx))
		}
		return nil, fmt.Errorf("workers: %s: no answer: %w", method, err)
	}
	var answer struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int64           `json:"code"`
			Message string          `json:"message"`
			Data    json.RawMessage `json:"data,omitempty"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &answer); err != nil {
		return nil, fmt.Errorf("workers: %s: undecodable answer: %w", method, err)
	}
	if answer.Error != nil {
		return nil, &RPCError{Code: answer.Error.Code, Message: answer.Error.Message, Data: answer.Error.Data}
	}
	return answer.Result, nil
}

// cancelRequest tells the session's client that the request id is no longer awaited.
func (c *Call) cancelRequest(id string, cause error) {
	note, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": cause.Error()},
	})
	if err == nil {
		_ = c.nc.Publish(c.subjects.SessionOut(c.Session), note) // best effort
	}
}
