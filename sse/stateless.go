package sse

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/mcphttp"
	"github.com/toolgate/toolgate/registry"
)

// serveStateless serves a POST of protocol version 2026-07-28: no session, the request's
// metadata in its _meta and mirrored in headers, which must agree with the body.
// Closing a response stream cancels its request.
func (s *Server) serveStateless(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string, req *jsonrpc.Request, accept accepts) {
	if !req.IsCall() {
		// This revision defines no client notifications over HTTP; take them
		// without effect (a client may still send notifications/cancelled).
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if removedIn2026[req.Method] && (req.Method != methodPing || hasMeta(req.Params)) {
		// Methods this revision removed are unknown here, whatever their _meta
		// says: a client probing with initialize learns to drop it.
		writeRPCError(w, req.ID, methodNotFound(req.Method, http.StatusNotFound))
		return
	}
	if req.Method == methodPing {
		// A ping without _meta (some SDKs keep pinging at this revision) asks
		// nothing that needs checking: answer it as the revisions that have it do.
		writeJSON(w, http.StatusOK, encodeResult(req.ID, json.RawMessage(`{}`)))
		return
	}
	meta, err := checkStatelessHeaders(r.Header, req)
	if err == nil && req.Method == methodToolsCall {
		err = s.checkParamHeaders(r.Header, p, tool, req)
	}
	if err != nil {
		writeRPCError(w, req.ID, err)
		return
	}
	rr := &rpcRequest{p: p, tool: tool, stateless: true, meta: meta, req: req}
	// Close cancels the calls it finds running (callSet); the rest is quick.
	ctx := r.Context()
	switch {
	case req.Method == methodSubscriptionsListen:
		if !accept.events {
			s.refuse(w, http.StatusNotAcceptable, "Not Acceptable: subscriptions/listen answers with text/event-stream")
			return
		}
		s.listen(w, r, rr)
	case req.Method == methodToolsCall && accept.events:
		// The stream begins with the call's first notification: a call refused
		// before one (a JSON-RPC error of its tool's server) is answered with the
		// HTTP status this revision gives that error.
		ew := deferEvents(w)
		stopKeepAlive := s.keepAlive(ew)
		rr.notify = func(msg []byte) { _ = ew.event("", "message", msg) }
		result, err := s.handle(ctx, rr)
		stopKeepAlive()
		switch {
		case ctx.Err() != nil:
			// The client closed the stream, which cancelled the request.
		case err != nil && httpStatus(err) != http.StatusOK && ew.takeOver():
			writeRPCError(w, req.ID, err)
		case err != nil:
			_ = ew.event("", "message", encodeError(req.ID, rpcError(err)))
		default:
			_ = ew.event("", "message", encodeResult(req.ID, result))
		}
	default:
		result, err := s.handle(ctx, rr)
		s.answer(w, accept, req.ID, result, err)
	}
}

// checkStatelessHeaders validates a 2026-07-28 request against its headers (SEP-2243): the
// protocol version in MCP-Protocol-Version and _meta, the method in Mcp-Method, the
// tool, resource or prompt in Mcp-Name. Intermediaries route on the headers, so a
// request whose headers say something else than its body is refused.
func checkStatelessHeaders(h http.Header, req *jsonrpc.Request) (requestMeta, error) {
	meta := readMeta(req.Params)
	hv := h.Get(headerProtocolVersion)
	switch {
	case meta.ProtocolVersion == "":
		// A malformed request rather than a disagreement: the body lacks what every
		// request of this revision carries.
		return meta, failure(gateway.KindInvalidRPCParams, http.StatusBadRequest,
			fmt.Sprintf("params._meta needs %s: requests of protocol version %s carry their metadata in _meta", mcp.MetaKeyProtocolVersion, hv), nil)
	case hv == "":
		return meta, headerMismatch("MCP-Protocol-Version header required with %s %q", mcp.MetaKeyProtocolVersion, meta.ProtocolVersion)
	case hv != meta.ProtocolVersion:
		return meta, headerMismatch("MCP-Protocol-Version %q does not match %s %q", hv, mcp.MetaKeyProtocolVersion, meta.ProtocolVersion)
	case !slices.Contains(supportedVersions, meta.ProtocolVersion):
		return meta, unsupportedVersion(meta.ProtocolVersion)
	}
	switch hm := h.Get(headerMethod); {
	case hm == "":
		return meta, headerMismatch("Mcp-Method header required")
	case hm != req.Method:
		return meta, headerMismatch("Mcp-Method header value %q does not match body value %q", hm, req.Method)
	}
	if want, ok := mcphttp.Name(req.Method, req.Params); ok {
		got, ok := mcphttp.DecodeHeaderValue(h.Get(headerName))
		switch {
		case h.Get(headerName) == "":
			return meta, headerMismatch("Mcp-Name header required for %s", req.Method)
		case !ok:
			return meta, headerMismatch("Mcp-Name header is not valid base64 between =?base64? and ?=")
		case got != want:
			return meta, headerMismatch("Mcp-Name header value %q does not match body value %q", got, want)
		}
	}
	if len(meta.ClientCapabilities) == 0 || string(meta.ClientCapabilities) == "null" {
		return meta, failure(gateway.KindInvalidRPCParams, http.StatusBadRequest,
			"params._meta needs "+mcp.MetaKeyClientCapabilities+" (an empty object declares none)", nil)
	}
	return meta, nil
}

// listen serves subscriptions/listen: a stream that carries the change notifications
// the client opted into until the client closes it. Of those, a link has the lists of
// its tool: its tools, which the registry says change, and its prompts and resources
// where its server declared their changes (listChangesOf), which its workers pass on
// (wire.Subjects.ListChanged). Each notification names the stream's subscriptionId.
func (s *Server) listen(w http.ResponseWriter, r *http.Request, rr *rpcRequest) {
	var params mcp.SubscriptionsListenParams
	if err := json.Unmarshal(rr.req.Params, &params); err != nil {
		writeRPCError(w, rr.req.ID, invalidParams("subscriptions/listen: %v", err))
		return
	}
	var granted mcp.NotificationSubscriptions
	if n := params.Notifications; n != nil {
		granted.ToolsListChanged = n.ToolsListChanged
		if t, err := s.view.Snapshot().Tool(rr.p, rr.tool); err == nil {
			prompts, resources := listChangesOf(t.Tool)
			granted.PromptsListChanged = n.PromptsListChanged && prompts
			granted.ResourcesListChanged = n.ResourcesListChanged && resources
		}
	}
	wanted := map[string]string{} // wire list -> its notification
	if granted.ToolsListChanged {
		wanted[wire.ListTools] = notifyToolsChanged
	}
	if granted.PromptsListChanged {
		wanted[wire.ListPrompts] = notifyPromptsChanged
	}
	if granted.ResourcesListChanged {
		wanted[wire.ListResources] = notifyResourcesChanged
	}
	subID := mcp.Meta{mcp.MetaKeySubscriptionID: rr.req.ID.Raw()}
	ack := encodeNotification(notifySubscriptionAck, &mcp.SubscriptionsAcknowledgedParams{Meta: subID, Notifications: granted})
	finish := func(ew *eventWriter) {
		if res, err := s.encodeResult(&mcp.SubscriptionsListenResult{Meta: subID}, rr); err == nil {
			_ = ew.event("", "message", encodeResult(rr.req.ID, res))
		}
	}
	if len(wanted) == 0 {
		// Nothing to deliver: the acknowledgement and the result, at once.
		ew := startEvents(w, http.StatusOK)
		if ew.event("", "message", ack) == nil {
			finish(ew)
		}
		return
	}
	ln, release := s.listeners.add(rr.tool)
	s.serveStream(w, r, func(ctx context.Context, ew *eventWriter) streamEnd {
		defer release()
		if ew.event("", "message", ack) != nil {
			return endClient
		}
		keepAlive := time.NewTicker(s.cfg.KeepAlive)
		defer keepAlive.Stop()
		for {
			select {
			case <-ln.wake:
				changed := ln.take()
				for _, list := range []string{wire.ListTools, wire.ListPrompts, wire.ListResources} {
					method := wanted[list]
					if method == "" || !changed[list] {
						continue
					}
					if ew.event("", "message", encodeNotification(method, struct {
						Meta mcp.Meta `json:"_meta"`
					}{subID})) != nil {
						return endClient
					}
				}
			case <-keepAlive.C:
				if ew.keepAlive(s.cfg.KeepAlive) != nil {
					return endClient
				}
			case <-s.draining:
				finish(ew)
				return endServer
			case <-ctx.Done():
				return endClient
			}
		}
	}, func(streamEnd) {})
}

// checkParamHeaders checks the Mcp-Param headers of a tools/call against its
// arguments, for a method whose input schema mirrors arguments in headers
// (x-mcp-header); a call of an unknown method is left to fail as such.
func (s *Server) checkParamHeaders(h http.Header, p registry.Principal, tool string, req *jsonrpc.Request) error {
	t, err := s.view.Snapshot().Tool(p, tool)
	if err != nil {
		return nil
	}
	name, _ := mcphttp.Name(req.Method, req.Params)
	for i := range t.Tool.Methods {
		if m := &t.Tool.Methods[i]; mcpName(m) == name {
			if err := mcphttp.CheckParamHeaders(h, mcphttp.ParamBindings(m.InputSchema), req.Params); err != nil {
				return headerMismatch("%v", err)
			}
			return nil
		}
	}
	return nil
}
