package mcpbridge

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/workers"
)

// serveMCP answers the MCP requests the edge sends on the tool's tg.mcp subject by
// making them on an upstream session.
func (b *Bridge) serveMCP(ctx context.Context, c *workers.Call, method string) (any, error) {
	switch method {
	case "resources/list":
		return forward(ctx, b, c, (*mcp.ClientSession).ListResources)
	case "resources/templates/list":
		return forward(ctx, b, c, (*mcp.ClientSession).ListResourceTemplates)
	case "resources/read":
		return forward(ctx, b, c, (*mcp.ClientSession).ReadResource)
	case "prompts/list":
		return forward(ctx, b, c, (*mcp.ClientSession).ListPrompts)
	case "prompts/get":
		return forward(ctx, b, c, (*mcp.ClientSession).GetPrompt)
	case "completion/complete":
		return forward(ctx, b, c, (*mcp.ClientSession).Complete)
	case "resources/subscribe", "resources/unsubscribe":
		own := b.own(c)
		switch {
		case own && method == "resources/subscribe":
			return forward(ctx, b, c, noResult((*mcp.ClientSession).Subscribe))
		case own:
			return forward(ctx, b, c, noResult((*mcp.ClientSession).Unsubscribe))
		case method == "resources/subscribe":
			return b.subscribe(ctx, c)
		}
		return b.unsubscribe(ctx, c)
	case "logging/setLevel":
		return b.serveSetLevel(ctx, c)
	case "tools/list":
		return b.sessionTools(ctx, c)
	case "tasks/get", "tasks/update", "tasks/cancel":
		if stateless(c) {
			// The tasks extension's (tasks.go).
			return b.statelessTask(ctx, c, method)
		}
		if method == "tasks/update" {
			break
		}
		return b.rawRequest(ctx, c, method)
	case "tools/call", "tasks/result", "tasks/list":
		// A task-augmented tools/call and the tasks of 2025-11-25, which the SDK
		// does not make: as they are, on the client session's upstream session.
		return b.rawRequest(ctx, c, method)
	}
	return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: "method not found: " + method}
}

// forward makes one request on the least busy session. The request counts as a call
// running there, so that a server's sampling or elicitation while it answers (a
// prompt that asks the user) reaches the caller.
func forward[P any, R any](ctx context.Context, b *Bridge, c *workers.Call, request func(*mcp.ClientSession, context.Context, *P) (R, error)) (any, error) {
	params := new(P)
	if err := c.Bind(params); err != nil {
		return nil, err
	}
	var in *inflight
	if stateless(c) && (c.Method == "prompts/get" || c.Method == "resources/read") {
		// A client of StatelessRevision takes the server's input_required result.
		if s := b.statelessSession(); s != nil {
			in = b.enter(ctx, c, s)
			if in.cs == nil {
				b.release(in)
				in = nil
			}
		}
	}
	if in == nil {
		var err error
		if in, err = b.acquire(ctx, c, ""); err != nil {
			return nil, rpcError(ctx, err)
		}
	}
	defer b.release(in)
	rctx, sink := withRaw(ctx)
	res, err := request(in.cs, rctx, params)
	in.s.raw.forget(sink)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	if raw := sink.raw(); raw != nil {
		return raw, nil // as the server sent it
	}
	return res, nil
}

// noResult adapts a request whose result is empty to forward.
func noResult[P any](request func(*mcp.ClientSession, context.Context, *P) error) func(*mcp.ClientSession, context.Context, *P) (struct{}, error) {
	return func(cs *mcp.ClientSession, ctx context.Context, p *P) (struct{}, error) {
		return struct{}{}, request(cs, ctx, p)
	}
}

// serveSetLevel passes a client's logging/setLevel on to its upstream session, which
// it opens if need be: the server filters what it sends the client by it, as it
// would directly. Shared sessions keep the level that lets everything through.
func (b *Bridge) serveSetLevel(ctx context.Context, c *workers.Call) (any, error) {
	var p mcp.SetLoggingLevelParams
	if err := c.Bind(&p); err != nil {
		return nil, err
	}
	own := b.own(c)
	if !own || p.Level == "" {
		return struct{}{}, nil
	}
	c.LogLevel = string(p.Level)
	in, err := b.acquire(ctx, c, "")
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	b.release(in)
	return struct{}{}, nil
}

// sessionTools answers tools/list for a client session: every page of what its own
// upstream session lists, as the server sent it, so that the client sees the tools
// the server offers a client that declared what it did. A client session that shares
// the pool gets the list of a pool's session, which declares every capability.
func (b *Bridge) sessionTools(ctx context.Context, c *workers.Call) (any, error) {
	if b.oauth != nil && !b.own(c) {
		return b.accountTools(ctx, c)
	}
	if c.Session == "" {
		return nil, &workers.RPCError{Code: workers.RPCMethodNotFound, Message: "method not found: tools/list"} // the registry lists the methods to callers without a client session
	}
	in, err := b.acquire(ctx, c, "")
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	defer b.release(in)
	tools := []json.RawMessage{}
	typed := map[string]*mcp.Tool{}
	params := &mcp.ListToolsParams{}
	for range maxToolPages {
		rctx, sink := withRaw(ctx)
		res, err := in.cs.ListTools(rctx, params)
		in.s.raw.forget(sink)
		if err != nil {
			return nil, rpcError(ctx, err)
		}
		var page struct {
			Tools []json.RawMessage `json:"tools"`
		}
		if raw := sink.raw(); raw == nil || json.Unmarshal(raw, &page) != nil {
			page.Tools = nil
			for _, t := range res.Tools {
				page.Tools = append(page.Tools, rawJSON(t))
			}
		}
		tools = append(tools, page.Tools...)
		for _, t := range res.Tools {
			typed[t.Name] = t
		}
		if res.NextCursor == "" {
			break
		}
		params = &mcp.ListToolsParams{Cursor: res.NextCursor}
	}
	// What the session lists counts among the tool's methods (see methods); for a
	// server that requires OAuth, even the same list again: it keeps its account's
	// list, which may have been forgotten (Config.AccountLists).
	b.mu.Lock()
	changed := !sameTools(in.s.tools, typed) || b.oauth != nil
	in.s.tools, in.s.listedAt = typed, time.Now()
	b.mu.Unlock()
	if changed {
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	return map[string]any{"tools": tools}, nil
}

// sameTools reports whether two lists name the same tools.
func sameTools(a, b map[string]*mcp.Tool) bool {
	if len(a) != len(b) {
		return false
	}
	for name := range a {
		if b[name] == nil {
			return false
		}
	}
	return true
}

// rawRequest makes a request as the client sent it on its client session's upstream
// session, and answers with the server's result as it is.
func (b *Bridge) rawRequest(ctx context.Context, c *workers.Call, method string) (any, error) {
	own := b.own(c)
	if !own {
		return nil, &workers.RPCError{Code: jsonrpc.CodeInvalidRequest, Message: method + ": tasks belong to an MCP session of a server that keeps sessions"}
	}
	in, err := b.acquire(ctx, c, "")
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	defer b.release(in)
	b.mu.Lock()
	conn := in.s.conn
	b.mu.Unlock()
	if conn == nil {
		// A remote server's session: through the SDK (tasks.go).
		return remoteTaskRequest(ctx, in, method, c.Params)
	}
	params := json.RawMessage(c.Params)
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	res, err := conn.rawCall(ctx, method, params, false)
	if err != nil {
		return nil, rpcError(ctx, err)
	}
	return res, nil
}

// maxToolPages bounds the pages of tools/list read for one client session.
const maxToolPages = 100

// rpcError is a failed upstream request as the MCP client sees it: the server's own
// JSON-RPC error as it is, anything else an internal error.
func rpcError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if re := serverError(err); re != nil {
		return re
	}
	var we *workers.Error
	if errors.As(err, &we) {
		return &workers.RPCError{Code: workers.RPCInternalError, Message: we.Message}
	}
	return &workers.RPCError{Code: workers.RPCInternalError, Message: "the upstream MCP session failed: " + err.Error()}
}

// subscribe records that the caller's session wants updates of a resource, and
// subscribes upstream on the first session (which holds every subscription, and
// renews them when it restarts) when it is the first to.
func (b *Bridge) subscribe(ctx context.Context, c *workers.Call) (any, error) {
	var p mcp.SubscribeParams
	if err := c.Bind(&p); err != nil {
		return nil, err
	}
	if c.Session == "" {
		return nil, &workers.RPCError{Code: jsonrpc.CodeInvalidRequest, Message: "resources/subscribe needs an MCP session to send updates to"}
	}
	b.mu.Lock()
	set := b.subs[p.URI]
	if set == nil {
		set = map[string]bool{}
		b.subs[p.URI] = set
	}
	set[c.Session] = true
	first := len(set) == 1
	home := b.sessions[0].cs
	b.mu.Unlock()
	if !first {
		return struct{}{}, nil
	}
	err := errors.New("the session that holds subscriptions is restarting")
	if home != nil {
		err = home.Subscribe(ctx, &p)
	}
	if err != nil {
		b.mu.Lock()
		delete(b.subs[p.URI], c.Session)
		if len(b.subs[p.URI]) == 0 {
			delete(b.subs, p.URI)
		}
		b.mu.Unlock()
		return nil, rpcError(ctx, err)
	}
	return struct{}{}, nil
}

func (b *Bridge) unsubscribe(ctx context.Context, c *workers.Call) (any, error) {
	var p mcp.UnsubscribeParams
	if err := c.Bind(&p); err != nil {
		return nil, err
	}
	b.mu.Lock()
	delete(b.subs[p.URI], c.Session)
	last := b.subs[p.URI] != nil && len(b.subs[p.URI]) == 0
	if last {
		delete(b.subs, p.URI)
	}
	home := b.sessions[0].cs
	b.mu.Unlock()
	if last && home != nil {
		if err := home.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: p.URI}); err != nil {
			return nil, rpcError(ctx, err)
		}
	}
	return struct{}{}, nil
}

// resubscribe renews every subscription on a restarted first session.
func (b *Bridge) resubscribe(ctx context.Context, cs *mcp.ClientSession) {
	b.mu.Lock()
	var uris []string
	for uri := range b.subs {
		uris = append(uris, uri)
	}
	b.mu.Unlock()
	for _, uri := range uris {
		if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri}); err != nil {
			b.log.Warn("resource subscription not renewed", "uri", uri, "err", err)
		}
	}
}

// onResourceUpdated tells every MCP session subscribed to the resource, forgetting
// the sessions that have ended.
func (b *Bridge) onResourceUpdated(ctx context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	b.mu.Lock()
	s := b.byClient[req.Session]
	b.mu.Unlock()
	if s == nil || s.client != "" {
		return // a client's session's updates go to its client as they come (observe)
	}
	b.mu.Lock()
	var sessions []string
	for id := range b.subs[req.Params.URI] {
		sessions = append(sessions, id)
	}
	b.mu.Unlock()
	for _, id := range sessions {
		if err := b.w.Notify(ctx, id, "notifications/resources/updated", req.Params); err != nil {
			b.log.Warn("resource update not sent", "session", id, "err", err)
		}
	}
}
