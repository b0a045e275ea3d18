// Package stateless serves MCP's stateless revision (2026-07-28) on a link's
// Streamable HTTP endpoint: no initialize and no session; each POST carries its
// metadata in params._meta, mirrored in headers that must agree with it, and closing
// a response stream cancels its request. Change notifications come from
// subscriptions/listen streams. Calls, rounds of input and tasks are sse/core's.
package stateless

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcphttp"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse/core"
)

// Transport serves the stateless revision's requests.
type Transport struct {
	core *core.Server
}

// New serves the stateless revision on c.
func New(c *core.Server) *Transport { return &Transport{core: c} }

// ServePost serves a POST of protocol version 2026-07-28: no session, the request's
// metadata in its _meta and mirrored in headers, which must agree with the body.
// Closing a response stream cancels its request.
func (t *Transport) ServePost(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string, req *jsonrpc.Request, args *core.StoredArgs, accept core.Accepts) {
	s := t.core
	defer args.Release() // when the request was refused before it was handled
	if !req.IsCall() {
		// This revision defines no client notifications over HTTP; take them
		// without effect (a client may still send notifications/cancelled).
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if core.RemovedIn2026[req.Method] && (req.Method != core.MethodPing || core.HasMeta(req.Params)) {
		// Methods this revision removed are unknown here, whatever their _meta
		// says: a client probing with initialize learns to drop it.
		core.WriteRPCError(w, req.ID, core.MethodNotFound(req.Method, http.StatusNotFound))
		return
	}
	if req.Method == core.MethodPing {
		// A ping without _meta (some SDKs keep pinging at this revision) asks
		// nothing that needs checking: answer it as the revisions that have it do.
		core.WriteJSON(w, http.StatusOK, core.EncodeResult(req.ID, json.RawMessage(`{}`)))
		return
	}
	rr := &core.Request{Principal: p, Tool: tool, Stateless: true, RPC: req, Transport: audit.TransportMCP2026, Args: args}
	meta, err := checkStatelessHeaders(r.Header, req)
	if err == nil && req.Method == core.MethodToolsCall {
		err = t.checkParamHeaders(r.Context(), r.Header, rr)
	}
	if err != nil {
		core.WriteRPCError(w, req.ID, err)
		return
	}
	rr.Meta, req = meta, rr.RPC
	// Close cancels the calls it finds running (callSet); the rest is quick.
	ctx := r.Context()
	switch {
	case req.Method == core.MethodSubscriptionsListen:
		if !accept.Events {
			s.Refuse(w, http.StatusNotAcceptable, "Not Acceptable: subscriptions/listen answers with text/event-stream")
			return
		}
		t.listen(w, r, rr)
	case req.Method == core.MethodToolsCall && accept.Events:
		// The stream begins with the call's first notification: a call refused
		// before one (a JSON-RPC error of its tool's server) is answered with the
		// HTTP status this revision gives that error.
		ew := core.DeferEvents(w)
		stopKeepAlive := s.KeepAlive(ew)
		rr.Notify = func(msg []byte) { _ = ew.Event("", "message", msg) }
		rr.LargeAnswers = true
		result, err := s.Handle(ctx, rr)
		stopKeepAlive()
		switch {
		case ctx.Err() != nil:
			// The client closed the stream, which cancelled the request.
		case err != nil && core.HTTPStatus(err) != http.StatusOK && ew.TakeOver():
			core.WriteRPCError(w, req.ID, err)
		case err != nil:
			_ = ew.Event("", "message", core.EncodeError(req.ID, core.RPCError(err)))
		default:
			_ = s.ResultEvent(ew, rr, result)
		}
	default:
		rr.LargeAnswers = true
		result, err := s.Handle(ctx, rr)
		s.AnswerRequest(w, accept, rr, result, err)
	}
}

// checkStatelessHeaders validates a 2026-07-28 request against its headers (SEP-2243): the
// protocol version in MCP-Protocol-Version and _meta, the method in Mcp-Method, the
// tool, resource or prompt in Mcp-Name. Intermediaries route on the headers, so a
// request whose headers say something else than its body is refused.
func checkStatelessHeaders(h http.Header, req *jsonrpc.Request) (core.RequestMeta, error) {
	meta := core.ReadMeta(req.Params)
	hv := h.Get(core.HeaderProtocolVersion)
	switch {
	case meta.ProtocolVersion == "":
		// A malformed request rather than a disagreement: the body lacks what every
		// request of this revision carries.
		return meta, core.Failure(gateway.KindInvalidRPCParams, http.StatusBadRequest,
			fmt.Sprintf("params._meta needs %s: requests of protocol version %s carry their metadata in _meta", mcp.MetaKeyProtocolVersion, hv), nil)
	case hv == "":
		return meta, core.HeaderMismatch("MCP-Protocol-Version header required with %s %q", mcp.MetaKeyProtocolVersion, meta.ProtocolVersion)
	case hv != meta.ProtocolVersion:
		return meta, core.HeaderMismatch("MCP-Protocol-Version %q does not match %s %q", hv, mcp.MetaKeyProtocolVersion, meta.ProtocolVersion)
	case !slices.Contains(core.SupportedVersions, meta.ProtocolVersion):
		return meta, core.UnsupportedVersion(meta.ProtocolVersion)
	}
	switch hm := h.Get(core.HeaderMethod); {
	case hm == "":
		return meta, core.HeaderMismatch("Mcp-Method header required")
	case hm != req.Method:
		return meta, core.HeaderMismatch("Mcp-Method header value %q does not match body value %q", hm, req.Method)
	}
	if want, ok := mcphttp.Name(req.Method, req.Params); ok {
		got, ok := mcphttp.DecodeHeaderValue(h.Get(core.HeaderName))
		switch {
		case h.Get(core.HeaderName) == "":
			return meta, core.HeaderMismatch("Mcp-Name header required for %s", req.Method)
		case !ok:
			return meta, core.HeaderMismatch("Mcp-Name header is not valid base64 between =?base64? and ?=")
		case got != want:
			return meta, core.HeaderMismatch("Mcp-Name header value %q does not match body value %q", got, want)
		}
	}
	if len(meta.ClientCapabilities) == 0 || string(meta.ClientCapabilities) == "null" {
		return meta, core.Failure(gateway.KindInvalidRPCParams, http.StatusBadRequest,
			"params._meta needs "+mcp.MetaKeyClientCapabilities+" (an empty object declares none)", nil)
	}
	return meta, nil
}

// checkParamHeaders checks the Mcp-Param headers of a tools/call against its
// arguments, for a method whose input schema mirrors arguments in headers
// (x-mcp-header); a call of an unknown method is left to fail as such.
func (t *Transport) checkParamHeaders(ctx context.Context, h http.Header, rr *core.Request) error {
	entry, err := t.core.View().Snapshot().Tool(rr.Principal, rr.Tool)
	if err != nil {
		return nil
	}
	name, _ := mcphttp.Name(rr.RPC.Method, rr.RPC.Params)
	for i := range entry.Tool.Methods {
		if m := &entry.Tool.Methods[i]; core.MCPName(m) == name {
			bindings := mcphttp.ParamBindings(m.InputSchema)
			if len(bindings) > 0 && rr.Args != nil {
				// The headers are checked against the arguments, which are then
				// held whole (the bound a message past one bus message had before).
				if err := t.core.HoldArgs(ctx, rr); err != nil {
					return err
				}
			}
			if err := mcphttp.CheckParamHeaders(h, bindings, rr.RPC.Params); err != nil {
				return core.HeaderMismatch("%v", err)
			}
			return nil
		}
	}
	return nil
}
