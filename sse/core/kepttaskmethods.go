package core

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
)

// The tasks methods of kept tasks (kepttasks.go), read from the calls' records on any
// edge.

// keptTaskMethods are the tasks methods of each revision: the extension's at
// 2026-07-28 (which removed tasks/result and tasks/list), 2025-11-25's otherwise.
var keptTaskMethods = map[bool]map[string]bool{
	true:  {"tasks/get": true, "tasks/update": true, "tasks/cancel": true},
	false: {"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true},
}

// answersKeptTask reports whether r is a tasks method of a tool whose tasks this edge
// keeps.
func (s *Server) answersKeptTask(r *Request) bool {
	if !keptTaskMethods[r.Stateless][r.RPC.Method] {
		return false
	}
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	return err == nil && s.keepsTasks(t.Tool, r.Stateless)
}

// keptTask answers a tasks method of a kept task.
func (s *Server) keptTask(ctx context.Context, r *Request) (any, error) {
	if r.Stateless && !declaresTasks(r.Meta) {
		return nil, missingTasksCapability(r.RPC.Method)
	}
	if r.RPC.Method == "tasks/list" {
		return s.listKeptTasks(ctx, r)
	}
	var params struct {
		TaskID string `json:"taskId"`
	}
	if json.Unmarshal(r.RPC.Params, &params) != nil || params.TaskID == "" {
		return nil, badTaskParams(r, "%s: params.taskId must be a string", r.RPC.Method)
	}
	rec, body, err := s.readKeptTask(ctx, r, params.TaskID)
	if err != nil {
		return nil, err
	}
	switch r.RPC.Method {
	case "tasks/get":
		return s.detailedTask(rec, body, r.Stateless), nil
	case "tasks/update":
		return s.updateKeptTask(ctx, r, rec)
	case "tasks/cancel":
		return s.cancelKeptTask(ctx, r, rec)
	default: // tasks/result
		return s.keptTaskResult(ctx, r, rec, body)
	}
}

// readKeptTask reads the task id of r's caller, and its answer once it ended: another
// caller's task, one of another tool, or no task at all are the same unknown id.
func (s *Server) readKeptTask(ctx context.Context, r *Request, id string) (*calls.Record, []byte, error) {
	rec, body, err := s.cfg.Tasks.Get(ctx, r.Principal, id)
	if err == nil && (rec.Tool != r.Tool || rec.Protocol != calls.ProtocolMCP) {
		err = calls.ErrNotFound
	}
	if errors.Is(err, calls.ErrNotFound) {
		return nil, nil, badTaskParams(r, "%s: no task %q of this link: unknown, expired, or another caller's", r.RPC.Method, id)
	}
	return rec, body, err
}

// detailedTask answers tasks/get: the task, and at 2026-07-28 its result or error
// inline once it ended.
func (s *Server) detailedTask(rec *calls.Record, body []byte, stateless bool) any {
	f := s.taskFieldsOf(rec, stateless)
	if !stateless {
		return f
	}
	out := struct {
		keptTaskFields
		InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
		Result        json.RawMessage            `json:"result,omitempty"`
		Error         json.RawMessage            `json:"error,omitempty"`
	}{keptTaskFields: f}
	switch {
	case rec.Status == calls.InputRequired && rec.Input != nil && f.Status == string(calls.InputRequired):
		out.InputRequests = rec.Input.Requests
	case rec.Overdue(time.Now()):
		out.Error, _ = json.Marshal(taskError(gateway.Fail(gateway.KindToolTimeout, ""), rec.Method))
	case rec.Status == calls.Completed:
		out.Result = body
	case rec.Status == calls.Failed:
		out.Error = body
	}
	return out
}

// cancelKeptTask cancels a working task: at 2026-07-28 the answer is an empty
// acknowledgement, whatever the task's status; at 2025-11-25 it is the task, and a
// task that ended already is refused (-32602).
func (s *Server) cancelKeptTask(ctx context.Context, r *Request, rec *calls.Record) (any, error) {
	cancelled, err := s.cfg.Tasks.Cancel(ctx, r.Principal, rec.ID)
	switch {
	case errors.Is(err, calls.ErrEnded):
		if r.Stateless {
			return struct{}{}, nil
		}
		return nil, InvalidParams("tasks/cancel: task %q has ended already (%s)", rec.ID, s.taskFieldsOf(rec, false).Status)
	case err != nil:
		return nil, err
	case r.Stateless:
		return struct{}{}, nil
	}
	return s.taskFieldsOf(cancelled, false), nil
}

// keptTaskResult answers 2025-11-25's tasks/result: once the task ended, what its
// tools/call would have answered (the result, or its JSON-RPC error), waiting for the
// end as long as the request lasts.
func (s *Server) keptTaskResult(ctx context.Context, r *Request, rec *calls.Record, body []byte) (any, error) {
	tick := time.NewTicker(taskPollInterval / 2)
	defer tick.Stop()
	for (rec.Status == calls.Working || rec.Status == calls.AwaitingApproval) && !rec.Overdue(time.Now()) {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		var err error
		if rec, body, err = s.readKeptTask(ctx, r, rec.ID); err != nil {
			return nil, err
		}
	}
	related := json.RawMessage(`{"io.modelcontextprotocol/related-task":{"taskId":` + quote(rec.ID) + `}}`)
	switch {
	case rec.Overdue(time.Now()):
		return nil, workerRPCError(taskError(gateway.Fail(gateway.KindToolTimeout, ""), rec.Method), false)
	case rec.Status == calls.Completed:
		var fields map[string]json.RawMessage
		if json.Unmarshal(body, &fields) != nil || fields == nil {
			return json.RawMessage(body), nil
		}
		fields["_meta"] = related
		return fields, nil
	case rec.Status == calls.Failed:
		var e wire.RPCError
		if json.Unmarshal(body, &e) != nil {
			return nil, InvalidParams("tasks/result: task %q failed", rec.ID)
		}
		return nil, workerRPCError(&e, false)
	}
	return nil, InvalidParams("tasks/result: task %q was cancelled", rec.ID)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// listKeptTasksMax bounds the tasks one tasks/list answers.
const listKeptTasksMax = 100

// listKeptTasks answers 2025-11-25's tasks/list: the caller's tasks of this link's
// tool, newest records first as the bucket lists them, at most listKeptTasksMax.
func (s *Server) listKeptTasks(ctx context.Context, r *Request) (any, error) {
	recs, err := s.cfg.Tasks.List(ctx, r.Principal, listKeptTasksMax)
	if err != nil {
		return nil, err
	}
	out := struct {
		Tasks []keptTaskFields `json:"tasks"`
	}{Tasks: []keptTaskFields{}}
	for _, rec := range recs {
		if rec.Tool == r.Tool && rec.Protocol == calls.ProtocolMCP {
			out.Tasks = append(out.Tasks, s.taskFieldsOf(rec, false))
		}
	}
	return out, nil
}

// badTaskParams is InvalidParams (-32602), with the HTTP status 2026-07-28 gives it.
func badTaskParams(r *Request, format string, args ...any) error {
	status := http.StatusOK
	if r.Stateless {
		status = statelessErrorStatus(jsonrpc.CodeInvalidParams)
	}
	return Failure(gateway.KindInvalidRPCParams, status, fmt.Sprintf(format, args...), nil)
}

// updateKeptTask answers tasks/update: the client's answers to the questions its task
// waits on, an empty acknowledgement whatever they were.
func (s *Server) updateKeptTask(ctx context.Context, r *Request, rec *calls.Record) (any, error) {
	var params struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(r.RPC.Params, &params) != nil {
		return nil, badTaskParams(r, "tasks/update: params.inputResponses must be an object")
	}
	if len(params.InputResponses) > 0 {
		if err := s.cfg.Tasks.Answer(ctx, r.Principal, rec.ID, params.InputResponses); err != nil {
			return nil, err
		}
	}
	return struct{}{}, nil
}
