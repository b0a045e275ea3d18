package sse

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// callTool runs a tools/call down the gateway's call path. Progress and log
// notifications of the worker are relayed to the client as they come; a failure of
// the call is an isError result, a request that names no tool a JSON-RPC error.
//
// The result is a toolResult, or, when the worker answered with a CallToolResult
// itself (a bridged MCP server does), that result's JSON as the worker sent it.
func (s *Server) callTool(ctx context.Context, r *rpcRequest) (any, error) {
	params, err := r.callParams()
	if err != nil {
		return nil, err
	}
	t, err := s.view.Snapshot().Tool(r.p, r.tool)
	if err != nil {
		return nil, err
	}
	var m *registry.Method
	for i := range t.Tool.Methods {
		if mcpName(&t.Tool.Methods[i]) == params.Name {
			m = &t.Tool.Methods[i]
			break
		}
	}
	if m == nil {
		return nil, fmt.Errorf("%w %q: tool %s has no such method", ErrUnknownTool, params.Name, r.tool)
	}
	args := []byte(params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}

	token := params.Meta["progressToken"]
	level := s.logLevel(r, token != nil)
	wantNotes := r.notify != nil && (token != nil || level != "")

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Another edge that receives the client's notifications/cancelled publishes
	// the cancel of the call, which this edge follows for all its calls; a session's
	// call ids are derived for that, from the session's id, a secret the gateway
	// made, and the client's JSON-RPC id.
	var callID string
	if r.sess != nil {
		callID = callRequestID(r.sess.ID, r.req.ID)
	} else {
		callID = registry.NewID("mcp-")
	}
	s.calls.add(callID, sessionID(r.sess), cancel)
	defer s.calls.remove(callID)
	if s.ctx.Err() != nil {
		cancel() // the edge closed after this request passed its guard
	}

	// Subscribe before calling, or the first notifications could be missed. A
	// channel subscription is filled by the connection's reader in arrival order,
	// so every notification the worker sent before its reply is in it when the
	// reply arrives.
	var notes chan *nats.Msg
	if wantNotes {
		notes = make(chan *nats.Msg, 1024)
		sub, err := s.nc.ChanSubscribe(s.subj.Progress(r.tool, callID), notes)
		if err != nil {
			return nil, fmt.Errorf("sse: subscribe to progress: %w", err)
		}
		defer sub.Unsubscribe()
	}

	s.inflight.add()
	defer s.inflight.done()
	type outcome struct {
		reply *wire.Reply
		err   error
	}
	call := func() outcome {
		reply, err := s.gw.Call(ctx, &gateway.Call{
			Principal: r.p, Tool: r.tool, Method: m.Name, Params: args, Entry: t.Method(m.Name),
			CallID: callID, RequestID: callID, Session: sessionID(r.sess), Progress: wantNotes,
			ClientCapabilities: clientCapabilities(r.sess), ReplyTo: r.replyTo,
		})
		return outcome{reply, err}
	}
	var out outcome
	if notes == nil {
		out = call()
	} else {
		done := make(chan outcome, 1)
		go func() { done <- call() }()
	wait:
		for {
			select {
			case msg := <-notes:
				s.relayNote(r, token, level, msg)
			case out = <-done:
				break wait
			}
		}
		for len(notes) > 0 {
			s.relayNote(r, token, level, <-notes)
		}
	}
	return toolAnswer(r.tool, m, out.reply, out.err)
}

// toolAnswer is the tools/call result of a call of method m of tool, from what the bus
// gave back. The edge running a call and an edge that finishes the call's stream for it
// (finishStream) make the same answer from the same reply.
func toolAnswer(tool string, m *registry.Method, reply *wire.Reply, err error) (any, error) {
	if err != nil {
		if text, ok := toolFailure(tool, m.Name, err); ok {
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

func sessionID(sess *registry.Session) string {
	if sess == nil {
		return ""
	}
	return sess.ID
}

// clientCapabilities are the capabilities a session's client declared, by name, so
// that a worker asks it nothing it cannot answer; nil when unknown.
func clientCapabilities(sess *registry.Session) []string {
	if sess == nil {
		return nil
	}
	capsMu.RLock()
	names, ok := capsCache[string(sess.Capabilities)]
	capsMu.RUnlock()
	if ok {
		return names
	}
	var caps map[string]json.RawMessage
	if json.Unmarshal(sess.Capabilities, &caps) != nil {
		return nil
	}
	names = slices.Sorted(maps.Keys(caps))
	capsMu.Lock()
	if len(capsCache) < maxCachedCaps {
		capsCache[string(sess.Capabilities)] = names
	}
	capsMu.Unlock()
	return names
}

// The capability names of the capabilities objects seen, which few clients make in
// few ways, so that a call does not decode its session's again. The slices are
// shared: their readers only read them. At most maxCachedCaps are kept, so that
// clients that declare many different objects cannot grow it without bound.
var (
	capsMu    sync.RWMutex
	capsCache = map[string][]string{}
)

const maxCachedCaps = 1024

// logLevel is the least severe level of log notification the request's client
// wants, or "" for none. On 2026-07-28 it is what the request's _meta asks for, and
// nothing without. Before, it is what the session set with logging/setLevel, or info
// for a caller that follows the call's progress anyway.
func (s *Server) logLevel(r *rpcRequest, progress bool) string {
	switch {
	case r.modern:
		return r.meta.LogLevel
	case r.sess != nil && r.sess.LogLevel != "":
		return r.sess.LogLevel
	case progress:
		return "info"
	}
	return ""
}

// relayNote turns a worker's notification into the client's notifications/progress
// or notifications/message.
func (s *Server) relayNote(r *rpcRequest, token any, level string, msg *nats.Msg) {
	n, err := wire.ReadNotification(msg.Data)
	if err != nil {
		s.log.Warn("dropping undecodable notification", "subject", msg.Subject, "err", err)
		return
	}
	switch n.Kind {
	case wire.KindProgress:
		if token == nil {
			return
		}
		r.notify(encodeNotification(notifyProgress, &mcp.ProgressNotificationParams{
			ProgressToken: token, Progress: n.Progress, Total: n.Total, Message: n.Message,
		}))
	case wire.KindLog:
		if level == "" || !logAtLeast(n.Level, level) {
			return
		}
		data := n.Data
		if len(data) == 0 {
			data, _ = json.Marshal(n.Message)
		}
		lvl := n.Level
		if lvl == "" {
			lvl = "info"
		}
		r.notify(encodeNotification(notifyMessage, &mcp.LoggingMessageParams{
			Level: mcp.LoggingLevel(lvl), Logger: n.Logger, Data: data,
		}))
	}
}
