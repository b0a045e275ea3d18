package mcpfixture

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of the tasks extension's scenarios (io.modelcontextprotocol/tasks,
// SEP-2663, 2026-07-28). A task-supporting tool called by a client that declares the
// extension in its request's capabilities is answered with a CreateTaskResult; the
// task then runs in the server's memory, and the client follows it with tasks/get,
// answers its input requests with tasks/update and stops it with tasks/cancel. A
// client that does not declare the extension gets a plain result from a tool whose
// task support is optional, and error -32021 from one that requires a task.

// TasksExtension names the tasks extension in capabilities.extensions.
const TasksExtension = "io.modelcontextprotocol/tasks"

// CodeMissingCapability is the JSON-RPC error of a request that needs a capability
// its client did not declare.
const CodeMissingCapability = -32021

// Task timings the fixture announces: how long a task is kept after it was created,
// and how often a client should poll.
const (
	TaskTTL          = 10 * time.Minute
	TaskPollInterval = 100 * time.Millisecond
)

// Task statuses.
const (
	taskWorking       = "working"
	taskInputRequired = "input_required"
	taskCompleted     = "completed"
	taskFailed        = "failed"
	taskCancelled     = "cancelled"
)

// taskFields are those of the extension's Task.
type taskFields struct {
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	StatusMessage  string `json:"statusMessage,omitempty"`
	CreatedAt      string `json:"createdAt"`
	LastUpdatedAt  string `json:"lastUpdatedAt"`
	TTLMs          int64  `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
}

// createTaskResult answers a tools/call with a task: Result & Task, flat.
type createTaskResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskFields
}

// detailedTask answers tasks/get: the task, with its input requests, result or error
// as its status has them.
type detailedTask struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
	taskFields
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	Result        json.RawMessage            `json:"result,omitempty"`
	Error         *jsonrpc.Error             `json:"error,omitempty"`
}

// ackResult answers tasks/update and tasks/cancel.
type ackResult struct {
	mcp.ResultBase
	ResultType string `json:"resultType"`
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	mcp.ParamsBase
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses,omitempty"`
}

// task is one task of the fixture.
type task struct {
	id               string
	created, updated time.Time
	status           string
	pending          map[string]json.RawMessage // the input requests not yet answered
	answered         map[string]json.RawMessage
	wake             chan struct{} // signalled when an answer comes
	result           json.RawMessage
	err              *jsonrpc.Error
	cancel           context.CancelFunc
}

// taskJob is what a task runs: it may ask its client for input (ask) and ends with
// the tool's result or a protocol error.
type taskJob func(ctx context.Context, args json.RawMessage, ask asker) (*mcp.CallToolResult, error)

// asker asks the task's client's user (elicitation/create) for input: requests by
// key, answered with tasks/update; it returns the answers once every key has one.
type asker func(ctx context.Context, requests map[string]*mcp.ElicitParams) (map[string]json.RawMessage, error)

// taskTool is a tool that may run as a task.
type taskTool struct {
	required bool
	job      taskJob
}

type taskStore struct {
	mu    sync.Mutex
	tasks map[string]*task
	tools map[string]taskTool
}

func newTaskID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// fields is t's Task; the store's lock is held.
func (t *task) fields() taskFields {
	return taskFields{TaskID: t.id, Status: t.status, CreatedAt: stamp(t.created), LastUpdatedAt: stamp(t.updated),
		TTLMs: TaskTTL.Milliseconds(), PollIntervalMs: TaskPollInterval.Milliseconds()}
}

func terminal(status string) bool {
	return status == taskCompleted || status == taskFailed || status == taskCancelled
}

// declaresTasks reports whether the capabilities a request carries name the tasks
// extension: those of its _meta (2026-07-28), or its session's.
func declaresTasks(meta mcp.Meta, ss *mcp.ServerSession) bool {
	if raw, ok := meta[mcp.MetaKeyClientCapabilities]; ok {
		b, _ := json.Marshal(raw)
		var caps struct {
			Extensions map[string]json.RawMessage `json:"extensions"`
		}
		_ = json.Unmarshal(b, &caps)
		_, ok := caps.Extensions[TasksExtension]
		return ok
	}
	if ss != nil {
		if p := ss.InitializeParams(); p != nil && p.Capabilities != nil {
			_, ok := p.Capabilities.Extensions[TasksExtension]
			return ok
		}
	}
	return false
}

func missingTasksCapability(what string) error {
	data, _ := json.Marshal(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{TasksExtension: map[string]any{}}}})
	return &jsonrpc.Error{Code: CodeMissingCapability, Message: what + " needs the client capability " + TasksExtension, Data: data}
}

// addTaskTools adds the tools of the tasks scenarios, the middleware that turns their
// calls into tasks, and the tasks methods.
func (f *fixture) addTaskTools() {
	st := &taskStore{tasks: map[string]*task{}, tools: map[string]taskTool{}}
	f.taskStore = st
	f.addGreet()
	st.addTimedJobs(f.server)
	st.addAskingJobs(f.server)
	if !f.opts.NoTasks {
		st.serve(f.server)
	}
}

// addGreet adds a tool that never runs as a task.
func (f *fixture) addGreet() {
	f.addTool("greet", "Greets name (never a task)",
		json.RawMessage(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`),
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Name string `json:"name"`
			}
			if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
			}
			return text(fmt.Sprintf("Hello, %s!", in.Name)), nil
		})
}

// addTool adds a tool that may run as a task: called without a task, its job runs
// during the call (asking nothing: a job that must ask runs as a task only, or has a
// handler of its own, sync).
func (st *taskStore) addTool(s *mcp.Server, name, description, schema string, tt taskTool, sync mcp.ToolHandler) {
	st.tools[name] = tt
	if sync == nil {
		sync = func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return tt.job(ctx, req.Params.Arguments, func(context.Context, map[string]*mcp.ElicitParams) (map[string]json.RawMessage, error) {
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: name + " asks for input only as a task"}
			})
		}
	}
	s.AddTool(&mcp.Tool{Name: name, Description: description, InputSchema: json.RawMessage(schema)}, sync)
}

// addTimedJobs adds the task tools that ask nothing: one that answers after a while,
// one that fails as a tool, one that ends in a protocol error.
func (st *taskStore) addTimedJobs(s *mcp.Server) {
	st.addTool(s, "slow_compute", "Sleeps seconds, then answers with label (a task when the client takes tasks)",
		`{"type":"object","properties":{"seconds":{"type":"number"},"label":{"type":"string"}}}`,
		taskTool{job: func(ctx context.Context, args json.RawMessage, _ asker) (*mcp.CallToolResult, error) {
			var in struct {
				Seconds float64 `json:"seconds"`
				Label   string  `json:"label"`
			}
			if len(args) > 0 {
				if err := json.Unmarshal(args, &in); err != nil {
					return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
				}
			}
			if err := sleep(ctx, time.Duration(in.Seconds*float64(time.Second))); err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("computed %s after %gs", in.Label, in.Seconds)), nil
		}}, nil)
	st.addTool(s, "failing_job", "Fails as a tool after a second (a task always)", string(noArgs),
		taskTool{required: true, job: func(ctx context.Context, _ json.RawMessage, _ asker) (*mcp.CallToolResult, error) {
			if err := sleep(ctx, time.Second); err != nil {
				return nil, err
			}
			res := text("the job failed")
			res.IsError = true
			return res, nil
		}}, nil)
	st.addTool(s, "protocol_error_job", "Ends in a protocol error (a task when the client takes tasks)", string(noArgs),
		taskTool{job: func(ctx context.Context, _ json.RawMessage, _ asker) (*mcp.CallToolResult, error) {
			if err := sleep(ctx, 200*time.Millisecond); err != nil {
				return nil, err
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "the job broke down"}
		}}, nil)
}

// addAskingJobs adds the task tools that ask their client's user for input.
func (st *taskStore) addAskingJobs(s *mcp.Server) {
	st.addTool(s, "confirm_delete", "Asks the user to confirm, then deletes filename (a task when the client takes tasks)",
		`{"type":"object","properties":{"filename":{"type":"string"}}}`,
		taskTool{job: func(ctx context.Context, args json.RawMessage, ask asker) (*mcp.CallToolResult, error) {
			var in struct {
				Filename string `json:"filename"`
			}
			_ = json.Unmarshal(args, &in)
			answers, err := ask(ctx, confirmDelete(in.Filename))
			if err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("delete %s: %s", in.Filename, answers["confirm"])), nil
		}},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var in struct {
				Filename string `json:"filename"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			if r, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult); ok {
				return text(fmt.Sprintf("delete %s: %s", in.Filename, r.Action)), nil
			}
			asks := mcp.InputRequestMap{}
			for k, v := range confirmDelete(in.Filename) {
				asks[k] = v
			}
			return &mcp.CallToolResult{InputRequests: asks}, nil
		})
	st.addTool(s, "multi_input", "Asks two questions at once, then answers with both (a task always)", string(noArgs),
		taskTool{required: true, job: func(ctx context.Context, _ json.RawMessage, ask asker) (*mcp.CallToolResult, error) {
			answers, err := ask(ctx, map[string]*mcp.ElicitParams{"first": askFor("First name?", "name"), "second": askFor("Second name?", "name")})
			if err != nil {
				return nil, err
			}
			return text(fmt.Sprintf("first=%s second=%s", answers["first"], answers["second"])), nil
		}},
		// Called without a task (a server without tasks: NoTasks), it asks both as a
		// request with input, and answers once both are given.
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			first, ok1 := req.Params.InputResponses["first"].(*mcp.ElicitResult)
			second, ok2 := req.Params.InputResponses["second"].(*mcp.ElicitResult)
			if ok1 && ok2 {
				return text(fmt.Sprintf("first=%v second=%v", first.Content["name"], second.Content["name"])), nil
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"first": askFor("First name?", "name"), "second": askFor("Second name?", "name")}}, nil
		})
	// test_tool_with_task asks the user's name as a request with input (SEP-2322),
	// and, once given it, answers with a task whose result greets them.
	st.tools["test_tool_with_task"] = taskTool{required: true, job: func(ctx context.Context, args json.RawMessage, _ asker) (*mcp.CallToolResult, error) {
		var in struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(args, &in)
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
		return text(fmt.Sprintf("Hello, %s! (a task started once you answered)", in.Name)), nil
	}}
	s.AddTool(&mcp.Tool{Name: "test_tool_with_task", Description: "Asks the user's name (key user_name), then greets them from a task", InputSchema: noArgs},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			// With a task, the name's answer makes the task (middleware); without
			// (NoTasks), it is the call's retry, answered as the task would be.
			if r, ok := req.Params.InputResponses["user_name"].(*mcp.ElicitResult); ok {
				args, _ := json.Marshal(map[string]any{"name": r.Content["name"]})
				return st.tools["test_tool_with_task"].job(ctx, args, nil)
			}
			return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"user_name": askFor("What is your name?", "name")}}, nil
		})
}

// confirmDelete asks the user to confirm filename's deletion.
func confirmDelete(filename string) map[string]*mcp.ElicitParams {
	return map[string]*mcp.ElicitParams{"confirm": {Message: "Delete " + filename + "?", RequestedSchema: map[string]any{
		"type": "object", "properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}, "required": []string{"confirm"}}}}
}

// serve turns the calls of the task tools into tasks and answers the tasks methods.
func (st *taskStore) serve(s *mcp.Server) {
	s.AddReceivingMiddleware(st.middleware)
	must := func(err error) {
		if err != nil {
			panic(err)
		}
	}
	must(mcp.AddReceivingCustomMethod(s, "tasks/get", func(_ context.Context, ss *mcp.ServerSession, p *taskParams) (*detailedTask, error) {
		if !declaresTasks(p.Meta, ss) {
			return nil, missingTasksCapability("tasks/get")
		}
		return st.get(p.TaskID)
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/update", func(_ context.Context, ss *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		if !declaresTasks(p.Meta, ss) {
			return nil, missingTasksCapability("tasks/update")
		}
		return st.update(p.TaskID, p.InputResponses)
	}))
	must(mcp.AddReceivingCustomMethod(s, "tasks/cancel", func(_ context.Context, ss *mcp.ServerSession, p *taskParams) (*ackResult, error) {
		if !declaresTasks(p.Meta, ss) {
			return nil, missingTasksCapability("tasks/cancel")
		}
		return st.cancelTask(p.TaskID)
	}))
}

// middleware answers a call of a task tool with a task when its client declared the
// extension, and refuses it when the tool needs a task and the client did not.
func (st *taskStore) middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		call, ok := req.(*mcp.CallToolRequest)
		if method != "tools/call" || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		tt, ok := st.tools[call.Params.Name]
		if !ok {
			return next(ctx, method, req)
		}
		declared := declaresTasks(call.Params.Meta, call.Session)
		switch {
		case !declared && tt.required:
			return nil, missingTasksCapability(call.Params.Name)
		case !declared:
			return next(ctx, method, req)
		}
		args := call.Params.Arguments
		if call.Params.Name == "test_tool_with_task" {
			// The name first, asked as a request with input; the task once it is given.
			r, ok := call.Params.InputResponses["user_name"].(*mcp.ElicitResult)
			if !ok {
				return next(ctx, method, req)
			}
			args, _ = json.Marshal(map[string]any{"name": r.Content["name"]})
		}
		return st.start(tt.job, args), nil
	}
}

// start creates a task that runs job, and answers with it once it is stored.
func (st *taskStore) start(job taskJob, args json.RawMessage) *createTaskResult {
	now := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	t := &task{id: newTaskID(), created: now, updated: now, status: taskWorking, wake: make(chan struct{}, 1), cancel: cancel}
	st.mu.Lock()
	for id, old := range st.tasks {
		if now.Sub(old.created) > TaskTTL {
			old.cancel()
			delete(st.tasks, id)
		}
	}
	st.tasks[t.id] = t
	res := &createTaskResult{ResultType: "task", taskFields: t.fields()}
	st.mu.Unlock()
	go st.run(ctx, t, job, args)
	return res
}

// run runs a task's job and records how it ended, unless it was cancelled.
func (st *taskStore) run(ctx context.Context, t *task, job taskJob, args json.RawMessage) {
	defer t.cancel()
	res, err := job(ctx, args, func(ctx context.Context, requests map[string]*mcp.ElicitParams) (map[string]json.RawMessage, error) {
		return st.ask(ctx, t, requests)
	})
	st.mu.Lock()
	defer st.mu.Unlock()
	if terminal(t.status) {
		return
	}
	t.updated = time.Now()
	t.pending = nil
	switch {
	case ctx.Err() != nil:
		t.status = taskCancelled
	case err != nil:
		t.status = taskFailed
		if we, ok := err.(*jsonrpc.Error); ok {
			t.err = we
		} else {
			t.err = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
	default:
		t.status = taskCompleted
		t.result, _ = json.Marshal(res)
	}
}

// ask puts t in input_required with requests until each has its answer.
func (st *taskStore) ask(ctx context.Context, t *task, requests map[string]*mcp.ElicitParams) (map[string]json.RawMessage, error) {
	st.mu.Lock()
	t.pending, t.answered = map[string]json.RawMessage{}, map[string]json.RawMessage{}
	for k, params := range requests {
		t.pending[k], _ = json.Marshal(map[string]any{"method": "elicitation/create", "params": params})
	}
	t.status, t.updated = taskInputRequired, time.Now()
	st.mu.Unlock()
	for {
		st.mu.Lock()
		if len(t.pending) == 0 {
			answers := t.answered
			if !terminal(t.status) {
				t.status, t.updated = taskWorking, time.Now()
			}
			st.mu.Unlock()
			return answers, nil
		}
		st.mu.Unlock()
		select {
		case <-t.wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// task returns the task id names, locked: the caller unlocks the store.
func (st *taskStore) task(id string) (*task, error) {
	st.mu.Lock()
	t := st.tasks[id]
	if t == nil {
		st.mu.Unlock()
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("no task %q", id)}
	}
	return t, nil
}

func (st *taskStore) get(id string) (*detailedTask, error) {
	t, err := st.task(id)
	if err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	d := &detailedTask{ResultType: "complete", taskFields: t.fields()}
	switch t.status {
	case taskInputRequired:
		d.InputRequests = t.pending
	case taskCompleted:
		d.Result = t.result
	case taskFailed:
		d.Error = t.err
		d.StatusMessage = t.err.Message
	}
	return d, nil
}

// update hands a task the answers to its pending input requests; answers to no
// pending request are left aside.
func (st *taskStore) update(id string, answers map[string]json.RawMessage) (*ackResult, error) {
	t, err := st.task(id)
	if err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	took := false
	for k, v := range answers {
		if _, ok := t.pending[k]; ok {
			delete(t.pending, k)
			t.answered[k] = v
			took = true
		}
	}
	if took {
		t.updated = time.Now()
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
	return &ackResult{ResultType: "complete"}, nil
}

// cancelTask cancels a task that has not ended; one that has is left as it is.
func (st *taskStore) cancelTask(id string) (*ackResult, error) {
	t, err := st.task(id)
	if err != nil {
		return nil, err
	}
	defer st.mu.Unlock()
	if !terminal(t.status) {
		t.status, t.updated, t.pending = taskCancelled, time.Now(), nil
		t.cancel()
	}
	return &ackResult{ResultType: "complete"}, nil
}
