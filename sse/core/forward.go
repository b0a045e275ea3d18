package core

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcphttp"
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
	"tasks/get":                carriesTasks,
	"tasks/result":             carriesTasks,
	"tasks/list":               carriesTasks,
	"tasks/cancel":             carriesTasks,
}

// carriesTasks reports whether a tool's workers carry the tasks of 2025-11-25 to its
// MCP server: a server that lists its tools per session (a bridged one) and declares
// tasks.
func carriesTasks(c registry.Capabilities) bool {
	if !c.SessionTools || len(c.MCP) == 0 {
		return false
	}
	var caps struct {
		Tasks json.RawMessage `json:"tasks"`
	}
	return json.Unmarshal(c.MCP, &caps) == nil && len(caps.Tasks) > 0 && string(caps.Tasks) != "null"
}

// tasksCarried is the key of carriesTasks's answer in a tool's registry entry.
type tasksCarried struct{}

// entryCarriesTasks is carriesTasks for a tool's entry, worked out once per entry:
// every tools/call of a session asks.
func entryCarriesTasks(t *registry.ToolEntry) bool {
	return t.Derived(tasksCarried{}, func(tool *registry.Tool) any { return carriesTasks(tool.Capabilities) }).(bool)
}

// forwards reports whether r is a request the tool's workers answer. At 2026-07-28
// the tasks methods are the extension's (tasks.go), those of 2025-11-25 unknown.
func (s *Server) forwards(r *Request) bool {
	declared, ok := forwarded[r.RPC.Method]
	if r.Stateless && strings.HasPrefix(r.RPC.Method, "tasks/") {
		declared, ok = carriesTasksExtension, taskMethods[r.RPC.Method]
	}
	if !ok {
		return false
	}
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	return err == nil && declared(t.Tool.Capabilities)
}

// forward sends r to the tool's workers through the gateway (visibility, rate,
// timeout) on tg.mcp.<tool> and returns their result as it is. A worker's JSON-RPC
// error reaches the client unchanged: its code travels as a number (workerRPCError).
//
// At 2026-07-28, a prompt or resource of the tool's server may ask for input: its
// input_required result reaches the client with its requestState sealed, as a
// tool call's does (see mrtr.go).
func (s *Server) forward(ctx context.Context, r *Request) (json.RawMessage, error) {
	params, name := []byte(r.RPC.Params), ""
	var header nats.Header
	instance := s.instanceOf(r)
	var task *taskRoute
	switch {
	case r.Stateless && taskMethods[r.RPC.Method]:
		var err error
		if params, header, task, err = s.forwardedTask(ctx, r); err != nil {
			return nil, err
		}
		instance = task.instance
	case r.Stateless && inputRequiredMethods[r.RPC.Method]:
		name, _ = mcphttp.Name(r.RPC.Method, r.RPC.Params)
		var err error
		if params, header, err = s.forwardedInput(ctx, r, name); err != nil {
			return nil, err
		}
	}
	reply, err := s.gw.Forward(ctx, &gateway.Call{
		Principal: r.Principal, Tool: r.Tool, Method: r.RPC.Method, Params: params,
		MCPContext: sessionContext(r.Session, header, instance), Transport: r.Transport,
	})
	s.pin(ctx, r, instance, reply)
	if task != nil {
		err = task.hide(err)
	}
	var re *wire.RPCError
	switch {
	case errors.As(err, &re):
		return nil, workerRPCError(re, r.Stateless)
	case err != nil:
		return nil, err
	}
	if task != nil {
		return s.unsealTask(reply.Data, task.client)
	}
	if header == nil {
		return reply.Data, nil
	}
	res, err := s.sealInputRequired(r, name, json.RawMessage(reply.Data))
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}
