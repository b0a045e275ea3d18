package mcpbridge

import (
	"context"
	"encoding/json"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/workers"
)

// The tasks extension (io.modelcontextprotocol/tasks, 2026-07-28): a server that
// declares it may answer a tools/call of a client that declares it with a task
// (resultType "task"), which the client follows with tasks/get, answers with
// tasks/update and stops with tasks/cancel. The call goes to the bridge's upstream
// session of that revision (callStateless), which hands the CreateTaskResult back as
// the server made it; the edge stores the server's task id and gives the client one
// of its own (sse/core/tasks.go). The three methods come back, with the server's task id
// in their params, on tg.mcp, and go to the same upstream session with their params
// as the client sent them (its _meta declares what it takes), the answer as the
// server made it.
//
// The SDK has no method for them: they are sent as custom methods, which it makes on
// any transport.

// taskMethods are the tasks methods the bridge makes as custom methods: the
// extension's, and those of 2025-11-25 (on a remote server's session: a stdio
// server's get them written on its connection, see rawCall).
var taskMethods = []string{"tasks/get", "tasks/update", "tasks/cancel", "tasks/result", "tasks/list"}

// rawParams are a request's params as the client sent them, for a method the SDK
// has no type for; the SDK sees their _meta (to add what a request of its revision
// must carry), the rest goes as it came.
type rawParams struct {
	mcp.ParamsBase
	rest map[string]json.RawMessage
}

func newRawParams(data []byte) (*rawParams, error) {
	p := &rawParams{rest: map[string]json.RawMessage{}}
	if len(data) == 0 {
		return p, nil
	}
	if err := json.Unmarshal(data, &p.rest); err != nil {
		return nil, err
	}
	if meta, ok := p.rest["_meta"]; ok {
		delete(p.rest, "_meta")
		if err := json.Unmarshal(meta, &p.Meta); err != nil {
			return nil, err
		}
	}
	return p, nil
}

func (p *rawParams) MarshalJSON() ([]byte, error) {
	out := maps.Clone(p.rest)
	if out == nil {
		out = map[string]json.RawMessage{}
	}
	if len(p.Meta) > 0 {
		meta, err := json.Marshal(p.Meta)
		if err != nil {
			return nil, err
		}
		out["_meta"] = meta
	}
	return json.Marshal(out)
}

// rawResult is a result as the server sent it.
type rawResult struct {
	mcp.ResultBase
	raw json.RawMessage
}

func (r *rawResult) UnmarshalJSON(data []byte) error {
	r.raw = append(json.RawMessage(nil), data...)
	return nil
}

// addTaskMethods lets c send the extension's methods.
func addTaskMethods(c *mcp.Client) {
	for _, m := range taskMethods {
		if err := mcp.AddSendingCustomMethod[*rawParams, *rawResult](c, m); err != nil {
			panic(err) // only a standard method's name is refused
		}
	}
}

// customCall makes method, one the SDK has no method for, on cs with params as they
// are, and returns the server's result as it is.
func customCall(ctx context.Context, cs *mcp.ClientSession, method string, params []byte) (json.RawMessage, error) {
	p, err := newRawParams(params)
	if err != nil {
		return nil, &workers.RPCError{Code: workers.RPCInvalidParams, Message: method + ": params must be an object: " + err.Error()}
	}
	res, err := mcp.CallCustomMethod[*rawParams, *rawResult](ctx, cs, method, p)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	if res == nil || len(res.raw) == 0 {
		return json.RawMessage("{}"), nil
	}
	return res.raw, nil
}

// statelessTask makes a tasks method of a client of StatelessRevision on the upstream
// session of that revision, where its task was made.
func (b *Bridge) statelessTask(ctx context.Context, c *workers.Call, method string) (any, error) {
	s := b.statelessSession()
	if s == nil {
		return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: method + ": the server does not speak " + StatelessRevision}
	}
	in := b.enter(ctx, c, s)
	defer b.release(in)
	if in.cs == nil {
		return nil, &workers.RPCError{Code: workers.RPCInternalError, Message: "the upstream session ended; retry shortly"}
	}
	return customCall(ctx, in.cs, method, c.Params)
}

// A task-augmented tools/call of 2025-11-25 carries a "task" member the SDK's
// CallToolParams does not have. On a remote server's session the bridge makes it
// with the SDK's CallTool, whose params a sending middleware swaps, just before they
// are sent, for the client's as they came (withParams); the server's
// CreateTaskResult is read raw (withRaw), as every forwarded result is.

type paramsKey struct{}

// withParams returns a context whose next tools/call is sent with p as its params.
func withParams(ctx context.Context, p *rawParams) context.Context {
	return context.WithValue(ctx, paramsKey{}, p)
}

// swapParams is the sending middleware that does what withParams asks.
func swapParams(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := ctx.Value(paramsKey{}).(*rawParams); ok && method == "tools/call" {
			if cs, ok := req.GetSession().(*mcp.ClientSession); ok {
				req = &mcp.ClientRequest[*rawParams]{Session: cs, Params: p}
			}
		}
		return next(ctx, method, req)
	}
}

// remoteTaskRequest makes a tasks request of 2025-11-25 (a task-augmented tools/call,
// or a tasks method) on a remote server's session, with the client's params as they
// are, and returns the server's result as it is.
func remoteTaskRequest(ctx context.Context, in *inflight, method string, params []byte) (json.RawMessage, error) {
	if method != "tools/call" {
		return customCall(ctx, in.cs, method, params)
	}
	p, err := newRawParams(params)
	if err != nil {
		return nil, &workers.RPCError{Code: workers.RPCInvalidParams, Message: "tools/call: params must be an object: " + err.Error()}
	}
	var named struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(params, &named)
	rctx, sink := withRaw(withParams(ctx, p))
	_, err = in.cs.CallTool(rctx, &mcp.CallToolParams{Name: named.Name})
	in.s.raw.forget(sink)
	raw := sink.raw()
	if err != nil && raw == nil {
		return nil, rpcError(ctx, err)
	}
	if raw == nil {
		return nil, &workers.RPCError{Code: workers.RPCInternalError, Message: "tools/call: the server's result was not seen"}
	}
	return raw, nil
}
