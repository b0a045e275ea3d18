package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// The tasks extension (io.modelcontextprotocol/tasks, SEP-2663) at 2026-07-28: a
// tool's server that declares it may answer a tools/call of a client that declares it
// (in its request's _meta) with a task, resultType "task", which the client follows
// with tasks/get, answers with tasks/update and stops with tasks/cancel. A link
// carries it for a bridged server (a tool whose workers declare what their MCP
// server declared) that declares it; the link then declares it too.
//
// The task lives with the tool's server. The edge that hands the client a task stores
// the server's task id in the event log, with the account that made the call and the
// worker instance that answered (the one whose upstream session holds the task), and
// gives the client a task id naming the record ("tgt1."): any edge serving a later
// tasks method opens the record, which must be of the caller's account and of the
// link's tool, and sends the method to that instance with the server's id; the
// answer's taskId is the client's again. A made-up id, or one of another account or
// tool, names no record and is refused as unknown (-32602). The record lives as long
// as the log keeps events (--mcp-event-retention): the task's ttlMs the client is
// told is at most that.

// tasksExtension names the extension in capabilities.extensions.
const tasksExtension = "io.modelcontextprotocol/tasks"

// taskPrefix begins every task id a link hands out.
const taskPrefix = "tgt1."

// eventTask is the record of a task.
const eventTask = "task"

// taskMethods are the extension's methods a link forwards.
var taskMethods = map[string]bool{"tasks/get": true, "tasks/update": true, "tasks/cancel": true}

// taskRecord is what a task's record holds: the tool method whose call made it, and
// the server's task id.
type taskRecord struct {
	Name   string `json:"name"`
	TaskID string `json:"taskId"`
}

// carriesTasksExtension reports whether a tool's workers carry the tasks extension to
// its MCP server: a bridged server (its workers declare what it declared) that
// declares the extension.
func carriesTasksExtension(c registry.Capabilities) bool {
	return len(c.MCP) > 0 && declaresExtension(c.MCP, tasksExtension)
}

// declaresTasks reports whether a 2026-07-28 request's capabilities take tasks.
func declaresTasks(meta RequestMeta) bool {
	return declaresExtension(meta.ClientCapabilities, tasksExtension)
}

// declaresExtension reports whether a capabilities object names extension name.
func declaresExtension(caps json.RawMessage, name string) bool {
	var c struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	if json.Unmarshal(caps, &c) != nil {
		return false
	}
	_, ok := c.Extensions[name]
	return ok
}

func missingTasksCapability(method string) error {
	return Failure(gateway.KindMissingCapability, http.StatusBadRequest,
		method+": the client did not declare the capability "+tasksExtension+" in this request's _meta",
		map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{tasksExtension: struct{}{}}}})
}

// sealTask hands the client a tool's CreateTaskResult with the server's task id
// stored and replaced by one naming the record; instance is the worker instance that
// answered. Any other result is left as it is.
func (s *Server) sealTask(r *Request, name string, res any, instance string) (any, error) {
	fields, ok := resultOfType(res, "task")
	if !ok {
		return res, nil
	}
	var id string
	if json.Unmarshal(fields["taskId"], &id) != nil || id == "" {
		return nil, fmt.Errorf("sse: the tool answered %s with a task without a taskId", name)
	}
	rec, err := json.Marshal(taskRecord{Name: name, TaskID: id})
	if err != nil {
		return nil, err
	}
	hdr := nats.Header{}
	if wire.ValidToken(instance) {
		hdr.Set(wire.HeaderInstance, instance)
	}
	// Stored before the client hears of the task: a tasks/get right after, on any
	// edge, finds it (the extension wants the task durable once announced).
	ref, err := s.storeRef(r, taskPrefix, eventTask, rec, hdr)
	if err != nil {
		return nil, fmt.Errorf("sse: storing a task: %w", err)
	}
	fields["taskId"], _ = json.Marshal(ref)
	s.boundTTL(fields)
	return fields, nil
}

// boundTTL keeps a task's ttlMs within how long the event log keeps the task's
// record: null (unlimited) or more becomes the log's retention.
func (s *Server) boundTTL(fields map[string]json.RawMessage) {
	keep := s.events.Retention().Milliseconds()
	if keep <= 0 {
		return
	}
	raw, ok := fields["ttlMs"]
	if !ok {
		return
	}
	var ttl *float64
	if json.Unmarshal(raw, &ttl) != nil || ttl == nil || *ttl > float64(keep) {
		fields["ttlMs"] = json.RawMessage(fmt.Sprint(keep))
	}
}

// openTask is the record a client's task id names, and the instance holding the task,
// once checked to be of the caller's account and the link's tool.
func (s *Server) openTask(ctx context.Context, r *Request, id string) (taskRecord, string, error) {
	refused := InvalidParams("%s: no task %q of this link: unknown, expired, or never made here", r.RPC.Method, id)
	msg := s.openRef(ctx, r, taskPrefix, eventTask, id)
	if msg == nil {
		return taskRecord{}, "", refused
	}
	var rec taskRecord
	if json.Unmarshal(msg.Data, &rec) != nil || rec.TaskID == "" {
		return taskRecord{}, "", refused
	}
	return rec, msg.Header.Get(wire.HeaderInstance), nil
}

// taskRoute is where a tasks method goes: the task by the client's id and the
// server's, and the worker instance holding it.
type taskRoute struct {
	client, server, instance string
}

// forwardedTask is a tasks method as it goes to the worker: the server's task id in
// place of the client's, the revision in a header, to the instance holding the task.
// The client must have declared the extension in its request.
func (s *Server) forwardedTask(ctx context.Context, r *Request) ([]byte, nats.Header, *taskRoute, error) {
	if !declaresTasks(r.Meta) {
		return nil, nil, nil, missingTasksCapability(r.RPC.Method)
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(r.RPC.Params, &fields) != nil || fields == nil {
		return nil, nil, nil, InvalidParams("%s: params must be an object", r.RPC.Method)
	}
	var id string
	if json.Unmarshal(fields["taskId"], &id) != nil || id == "" {
		return nil, nil, nil, InvalidParams("%s: params.taskId must be a string", r.RPC.Method)
	}
	rec, instance, err := s.openTask(ctx, r, id)
	if err != nil {
		return nil, nil, nil, err
	}
	fields["taskId"], _ = json.Marshal(rec.TaskID)
	params, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, nil, err
	}
	return params, nats.Header{wire.HeaderProtocolVersion: {r.Meta.ProtocolVersion}}, &taskRoute{client: id, server: rec.TaskID, instance: instance}, nil
}

// hide keeps the server's task id out of the error a tasks method got: the server
// names the task by its id ("no task ..." once the process holding it is gone), the
// client knows it by its own.
func (t *taskRoute) hide(err error) error {
	var re *wire.RPCError
	if errors.As(err, &re) && strings.Contains(re.Message, t.server) {
		shown := *re
		shown.Message = strings.ReplaceAll(re.Message, t.server, t.client)
		return &shown
	}
	return err
}

// unsealTask is a tasks method's answer as the client gets it: the task it describes
// named by the client's id, its ttlMs bounded as at its creation.
func (s *Server) unsealTask(data []byte, id string) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(data, &fields) != nil || fields == nil {
		return nil, fmt.Errorf("sse: the tool's answer to a tasks method is not an object")
	}
	if _, ok := fields["taskId"]; ok {
		fields["taskId"], _ = json.Marshal(id)
	}
	s.boundTTL(fields)
	return json.Marshal(fields)
}
