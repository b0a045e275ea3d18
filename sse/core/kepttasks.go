package core

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Kept tasks: the tasks of a tool whose server knows nothing of them, kept by the
// gateway in the record of a call that outlives its request (package calls, bucket
// tg-calls), so that any edge answers for them. A tool whose server makes tasks
// itself (a bridged server declaring the tasks capability of 2025-11-25, or the
// tasks extension at 2026-07-28) keeps its own, as tasks.go says: the gateway tells
// the two apart by what the server declared, since only a server that declared tasks
// can answer their methods. For every other tool each method may run as a task
// (wire.Method.TaskSupport: optional by default, required, or forbidden).
//
// At 2026-07-28 (the tasks extension) a client that declares the extension in a
// request's _meta gets a task for a tools/call whose call runs longer than
// --mcp-stream-after (a shorter one is answered at once, as the extension allows),
// and always for a method whose task support is required, which a client declaring
// nothing is refused (-32021). At 2025-11-25 a session's tools/call with params.task
// gets a task (CreateTaskResult) at once; tasks/get, tasks/result, tasks/list and
// tasks/cancel read the record. A task's id is its record's: only the account and key
// (or link) that made it read or cancel it; anyone else's id is unknown (-32602).

// keepsTasks reports whether this edge keeps the tasks of tool t for a client of
// this kind (stateless: 2026-07-28): it has the calls' records, and t's server does
// not make its own.
func (s *Server) keepsTasks(t *registry.Tool, stateless bool) bool {
	if s.cfg.Tasks == nil {
		return false
	}
	if stateless {
		return !carriesTasksExtension(t.Capabilities)
	}
	return !carriesTasks(t.Capabilities)
}

// taskSupport is method m's task support as MCP's ToolExecution names it.
func taskSupport(m *registry.Method) string { return cmp.Or(m.TaskSupport, wire.TaskOptional) }

// keptTaskCall makes a tools/call of m a kept task when it is one: ok reports that it
// answered the call (with a task, the call's own result, or a refusal).
func (s *Server) keptTaskCall(ctx context.Context, r *Request, t *registry.ToolEntry, m *registry.Method, params *mcp.CallToolParamsRaw) (any, bool, error) {
	support := taskSupport(m)
	if support == wire.TaskForbidden || !s.keepsTasks(t.Tool, r.Stateless) {
		return nil, false, nil
	}
	if r.Stateless {
		if strings.HasPrefix(params.RequestState, roundPrefix) {
			return nil, false, nil // a retry with the client's answers to a round's worker
		}
		if !declaresTasks(r.Meta) {
			if support == wire.TaskRequired {
				return nil, true, missingTasksCapability("tools/call " + params.Name)
			}
			return nil, false, nil
		}
		header, err := s.statelessHeaders(ctx, r, params)
		if err != nil {
			return nil, true, err
		}
		res, err := s.startKeptTask(ctx, r, t, m, params, header, statelessShortcut(support))
		return res, true, err
	}
	if r.Session == nil {
		return nil, false, nil
	}
	var augmented struct {
		Task json.RawMessage `json:"task"`
	}
	_ = json.Unmarshal(r.RPC.Params, &augmented)
	if len(augmented.Task) == 0 || string(augmented.Task) == "null" {
		if support == wire.TaskRequired {
			return nil, true, Failure(gateway.KindRPCMethodNotFound, http.StatusOK, "tools/call "+params.Name+": this tool must be called as a task (params.task)", nil)
		}
		return nil, false, nil
	}
	res, err := s.startKeptTask(ctx, r, t, m, params, nil, nil)
	return res, true, err
}

// statelessShortcut says which first answers of a 2026-07-28 call of a method of
// this task support are answered at once rather than as a task: a method that may
// run as a task answers a complete result at once (the extension lets a short call
// skip its task), and makes a task of a call whose tool asks for input, so that its
// client answers through tasks/update; a method that must run as a task gathers its
// input before its task begins (a round of input_required, then a task on the retry
// that asks no more, SEP-2663's composition of the two), and answers nothing else at
// once.
func statelessShortcut(support string) func(any) bool {
	if support == wire.TaskRequired {
		return func(res any) bool { _, asks := resultOfType(res, "input_required"); return asks }
	}
	return func(res any) bool { _, asks := resultOfType(res, "input_required"); return !asks }
}

// startKeptTask checks the call as any call is checked (a refused call is refused
// now, as it would be without a task), records it and runs it to its end on this
// edge, whatever becomes of the request (keptTaskRun). With shortcut, the call's
// first answer within --mcp-stream-after is the request's own answer when shortcut
// takes it; otherwise the answer is the task.
func (s *Server) startKeptTask(ctx context.Context, r *Request, t *registry.ToolEntry, m *registry.Method, params *mcp.CallToolParamsRaw, header nats.Header, shortcut func(any) bool) (any, error) {
	if r.Args != nil { // a task's record holds its call's params whole
		if err := s.HoldArgs(ctx, r); err != nil {
			return nil, err
		}
		params, _ = r.callParams()
	}
	args := []byte(params.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	mc := sessionContext(r.Session, header, s.instanceOf(r))
	if r.Stateless {
		mc.ClientCapabilities = metaCapabilities(r.Meta.ClientCapabilities)
		mc.ClientCapabilityObject = compactObject(r.Meta.ClientCapabilities)
	}
	mc.Progress = true // the record takes the tool's progress
	run := &keptTaskRun{s: s, r: r, m: m, shortcut: shortcut, first: make(chan any, 1),
		call: &gateway.Call{Principal: r.Principal, Tool: r.Tool, Method: m.Name, Params: args,
			Entry: t.Method(m.Name), MCPContext: mc, Transport: r.Transport}}
	entry, err := s.gw.Check(ctx, run.call)
	if err != nil {
		return toolAnswer(r.Tool, m, nil, s.gw.Refuse(ctx, run.call, err))
	}
	run.entry, run.timeout = entry, s.gw.AsyncTimeout(entry.Method, 0)
	rec, err := approvals.StartCall(ctx, s.cfg.Approvals, s.gw, s.cfg.Tasks, run.call, calls.Record{
		Tool: r.Tool, Method: m.Name, Deadline: time.Now().Add(run.timeout), Protocol: calls.ProtocolMCP,
	}, run.run, run.ended)
	if err != nil {
		return nil, s.gw.Refuse(ctx, run.call, err)
	}
	if shortcut != nil {
		wait := time.NewTimer(s.cfg.StreamAfter)
		defer wait.Stop()
		select {
		case res := <-run.first:
			return res, nil
		case <-wait.C:
		case <-ctx.Done():
		}
	}
	if !run.announce() {
		return <-run.first, nil // handed over meanwhile
	}
	return s.createTaskResult(rec, r.Stateless), nil
}

// taskOutcome is how a task's call ended, as its record keeps it: completed with the
// CallToolResult the call would have had, an isError one when the tool reported a
// failure of its own; failed, with a JSON-RPC error object, when the call failed in
// the protocol (the tool's JSON-RPC error, no worker, a worker lost, a timeout).
func taskOutcome(tool string, m *registry.Method, reply *wire.Reply, err error) calls.Outcome {
	var rpcErr *wire.RPCError
	switch {
	case errors.As(err, &rpcErr):
		body, _ := json.Marshal(rpcErr)
		return calls.Outcome{Status: calls.Failed, Body: body, Answer: calls.Answer{Status: 200, ContentType: "application/json"}}
	case err != nil && classify(err).Kind != gateway.KindToolError:
		body, _ := json.Marshal(taskError(err, m.Name))
		return calls.Outcome{Status: calls.Failed, Body: body, Answer: calls.Answer{Status: 200, ContentType: "application/json", Code: classify(err).Code}}
	}
	res, aerr := toolAnswer(tool, m, reply, err)
	if aerr != nil {
		body, _ := json.Marshal(RPCError(aerr))
		return calls.Outcome{Status: calls.Failed, Body: body, Answer: calls.Answer{Status: 200, ContentType: "application/json"}}
	}
	body, _ := json.Marshal(res)
	return calls.Outcome{Status: calls.Completed, Body: body, Answer: calls.Answer{Status: 200, ContentType: "application/json"}}
}

// taskError is RPCError for a call's failure, its message the text an isError
// result of method would have carried, which says what happened to the call.
func taskError(err error, method string) *wire.RPCError {
	e := RPCError(err)
	msg := e.Message
	if text, ok := toolFailure(method, err); ok {
		msg = text
	}
	return &wire.RPCError{Code: e.Code, Message: msg, Data: e.Data}
}

// taskPollInterval is how often a client is told to poll a kept task.
const taskPollInterval = 500 * time.Millisecond

// keptTaskFields are a kept task's fields of both revisions: the extension's
// (ttlMs, pollIntervalMs) or 2025-11-25's (ttl, pollInterval), both in milliseconds.
type keptTaskFields struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          *int64 `json:"ttlMs,omitempty"`
	PollIntervalMs *int64 `json:"pollIntervalMs,omitempty"`
	TTL            *int64 `json:"ttl,omitempty"`
	PollInterval   *int64 `json:"pollInterval,omitempty"`
}

// taskFieldsOf describes rec as a task of a stateless or a session's client.
func (s *Server) taskFieldsOf(rec *calls.Record, stateless bool) keptTaskFields {
	stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
	f := keptTaskFields{TaskID: rec.ID, Status: string(rec.Status), CreatedAt: stamp(rec.CreatedAt), LastUpdatedAt: stamp(rec.CreatedAt)}
	if !rec.EndedAt.IsZero() {
		f.LastUpdatedAt = stamp(rec.EndedAt)
	}
	if rec.Overdue(time.Now()) {
		f.Status, f.StatusMessage = string(calls.Failed), "the call timed out"
	}
	if rec.Progress != nil && rec.Progress.Message != "" && f.Status == string(calls.Working) {
		f.StatusMessage = rec.Progress.Message
	}
	if f.Status == string(calls.AwaitingApproval) {
		// MCP has no such status: the task works, its call waiting for a person.
		f.Status, f.StatusMessage = string(calls.Working), "awaiting approval "+rec.Approval
	}
	ttl, poll := s.cfg.Tasks.TTL().Milliseconds(), taskPollInterval.Milliseconds()
	if stateless {
		f.TTLMs, f.PollIntervalMs = &ttl, &poll
	} else {
		f.TTL, f.PollInterval = &ttl, &poll
	}
	return f
}

// createTaskResult answers a tools/call made a task: at 2026-07-28 the task's fields
// flat beside resultType "task", at 2025-11-25 under "task".
func (s *Server) createTaskResult(rec *calls.Record, stateless bool) any {
	f := s.taskFieldsOf(rec, stateless)
	if stateless {
		return struct {
			ResultType string `json:"resultType"`
			keptTaskFields
		}{"task", f}
	}
	return struct {
		Task keptTaskFields `json:"task"`
	}{f}
}

// capabilities are a tool's capabilities (see the function), with the tasks this edge
// keeps for it declared: at 2026-07-28 the extension, at 2025-11-25 the tasks
// capability (listing, cancelling, and task-augmented tools/call).
func (s *Server) capabilities(t *registry.Tool, stateless bool) json.RawMessage {
	raw := capabilities(t, stateless)
	if !s.keepsTasks(t, stateless) {
		return raw
	}
	var c map[string]json.RawMessage
	if json.Unmarshal(raw, &c) != nil {
		return raw
	}
	if stateless {
		ext := map[string]json.RawMessage{}
		_ = json.Unmarshal(c["extensions"], &ext)
		ext[tasksExtension] = json.RawMessage(`{}`)
		c["extensions"], _ = json.Marshal(ext)
	} else {
		c["tasks"] = json.RawMessage(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
	}
	b, err := json.Marshal(c)
	if err != nil {
		return raw
	}
	return b
}

// withTaskSupport is a tools/list result whose tools say, in execution.taskSupport
// (2025-11-25), whether they may be called as tasks: each method's TaskSupport.
func withTaskSupport(tools []*mcp.Tool, methods []registry.Method) any {
	out := struct {
		Tools []json.RawMessage `json:"tools"`
	}{Tools: make([]json.RawMessage, 0, len(tools))}
	for i, t := range tools {
		b, err := json.Marshal(t)
		var fields map[string]json.RawMessage
		if err != nil || json.Unmarshal(b, &fields) != nil {
			continue
		}
		fields["execution"], _ = json.Marshal(map[string]string{"taskSupport": taskSupport(&methods[i])})
		if b, err = json.Marshal(fields); err == nil {
			out.Tools = append(out.Tools, b)
		}
	}
	return out
}
