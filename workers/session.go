package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/toolgate/toolgate/bus"
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
	res, err := bus.SessionRequest(ctx, c.nc, c.subjects, c.Session, method, params)
	var ce *bus.ClientError
	if errors.As(err, &ce) {
		return nil, &RPCError{Code: ce.Code, Message: ce.Message, Data: ce.Data}
	}
	if err != nil {
		return nil, fmt.Errorf("workers: %s: %w", method, err)
	}
	return res, nil
}
