package sse

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/registry"
)

// forwarded are the MCP methods a tool's own workers answer, each with the capability
// the tool must declare for the edge to send it on.
var forwarded = map[string]func(registry.Capabilities) bool{
	"resources/list":           func(c registry.Capabilities) bool { return c.Resources },
	"resources/templates/list": func(c registry.Capabilities) bool { return c.Resources },
	"resources/read":           func(c registry.Capabilities) bool { return c.Resources },
	"resources/subscribe":      func(c registry.Capabilities) bool { return c.Resources },
	"resources/unsubscribe":    func(c registry.Capabilities) bool { return c.Resources },
	"prompts/list":             func(c registry.Capabilities) bool { return c.Prompts },
	"prompts/get":              func(c registry.Capabilities) bool { return c.Prompts },
	"completion/complete":      func(c registry.Capabilities) bool { return c.Completions },
}

// forwards reports whether r is a request the tool's workers answer.
func (s *Server) forwards(r *rpcRequest) bool {
	declared, ok := forwarded[r.req.Method]
	if !ok {
		return false
	}
	t, err := s.view.Snapshot().Tool(r.p, r.tool)
	return err == nil && declared(t.Tool.Capabilities)
}

// forward sends r to the tool's workers on tg.mcp.<tool> and returns their result as
// it is. A worker's JSON-RPC error comes back as the micro error code (a decimal
// JSON-RPC code) and message, and reaches the client unchanged.
func (s *Server) forward(ctx context.Context, r *rpcRequest) (json.RawMessage, error) {
	params := []byte(r.req.Params)
	if len(params) == 0 || string(params) == "null" {
		params = []byte("{}")
	}
	reply, err := bus.Do(ctx, s.nc, s.subj, bus.Request{
		Subject:   s.subj.MCP(r.tool),
		RequestID: registry.NewID("mcp-"),
		Account:   r.p.Account,
		Session:   sessionID(r.sess),
		Deadline:  time.Now().Add(s.gw.Timeout(nil, 0)),
		Data:      params,
		Header:    nats.Header{bus.HeaderMethod: {r.req.Method}},
	})
	var te *bus.ToolError
	switch {
	case errors.As(err, &te):
		code, perr := strconv.ParseInt(te.Code, 10, 64)
		if perr != nil {
			code = jsonrpc.CodeInternalError
		}
		pe := &protocolError{code: code, status: http.StatusOK, message: te.Message}
		if len(te.Data) > 0 && json.Valid(te.Data) {
			pe.data = json.RawMessage(te.Data)
		}
		return nil, pe
	case errors.Is(err, bus.ErrNoResponders):
		return nil, &protocolError{code: jsonrpc.CodeInternalError, status: http.StatusOK, message: "the tool is offline: no worker answers " + r.req.Method}
	case errors.Is(err, bus.ErrTimeout):
		return nil, &protocolError{code: jsonrpc.CodeInternalError, status: http.StatusOK, message: "the tool did not answer " + r.req.Method + " in time"}
	case err != nil:
		return nil, err
	}
	return reply.Data, nil
}
