package core

import (
	"encoding/json"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// replyInstance is the worker instance that named itself in reply, if any.
func replyInstance(reply *wire.Reply) string {
	if reply == nil {
		return ""
	}
	return reply.Header.Get(wire.HeaderInstance)
}

// toolAnswer is the tools/call result of a call of method m of tool, from what the bus
// gave back. The edge running a call and an edge that finishes the call's stream for it
// (finishStream) make the same answer from the same reply.
func toolAnswer(tool string, m *registry.Method, reply *wire.Reply, err error) (any, error) {
	if err != nil {
		if text, ok := toolFailure(m.Name, err); ok {
			return newToolResult(text, true), nil
		}
		return nil, err
	}
	if reply.MCPResult && json.Valid(reply.Data) {
		return json.RawMessage(reply.Data), nil
	}
	res := newToolResult(string(reply.Data), reply.Status >= 400)
	if !res.IsError && len(m.OutputSchema) > 0 && json.Valid(reply.Data) {
		res.StructuredContent = json.RawMessage(reply.Data)
	}
	return res, nil
}

// toolResult is the CallToolResult of a call: the tool's answer as text content,
// and as structuredContent when the method declares an output schema. It encodes as
// mcp.CallToolResult does, without that type's custom encoders, which marshal every
// piece on its own and then the whole again.
type toolResult struct {
	Content           []textContent   `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func newToolResult(text string, isError bool) *toolResult {
	return &toolResult{Content: []textContent{{Type: "text", Text: text}}, IsError: isError}
}
