package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Every failure is classified by gateway's table (gateway/errors.go); this file
// renders it the ways MCP shows one: a JSON-RPC error, with the HTTP status each
// transport gives it, or the text of a tools/call's isError result.

// ErrUnknownTool: the tools/call names no tool of the link.
var ErrUnknownTool = registry.ErrMethodNotFound

// SessionLimitError says an account holds as many MCP sessions as it may.
type SessionLimitError = gateway.SessionLimitError

// errSessionNotFound is what an MCP request of a session the registry no longer holds
// is answered with.
var errSessionNotFound = gateway.Fail(gateway.KindSessionNotFound, "")

// Failure is an MCP failure the transport finds itself, answered with status.
func Failure(k *gateway.Kind, status int, message string, data any) error {
	return &gateway.Error{Kind: k, Message: message, Data: data, Status: status}
}

func parseError(format string, args ...any) error {
	return Failure(gateway.KindParseError, http.StatusBadRequest, fmt.Sprintf(format, args...), nil)
}

func invalidRequest(format string, args ...any) error {
	return Failure(gateway.KindInvalidRequest, http.StatusBadRequest, fmt.Sprintf(format, args...), nil)
}

// InvalidParams is a request whose params are wrong, answered with 200.
func InvalidParams(format string, args ...any) error {
	return Failure(gateway.KindInvalidRPCParams, http.StatusOK, fmt.Sprintf(format, args...), nil)
}

// HeaderMismatch is a request whose headers say something else than its body.
func HeaderMismatch(format string, args ...any) error {
	return Failure(gateway.KindHeaderMismatch, http.StatusBadRequest, "Header mismatch: "+fmt.Sprintf(format, args...), nil)
}

// UnsupportedVersion is a request of a protocol revision this package does not speak.
func UnsupportedVersion(requested string) error {
	return Failure(gateway.KindUnsupportedVersion, http.StatusBadRequest, fmt.Sprintf("Unsupported protocol version %q", requested),
		mcp.UnsupportedProtocolVersionData{Supported: SupportedVersions, Requested: requested})
}

// MethodNotFound is answered with 404 on 2026-07-28, where the status tells an
// unknown method from a missing endpoint; the older transports answer it with 200.
func MethodNotFound(method string, status int) error {
	return Failure(gateway.KindRPCMethodNotFound, status, fmt.Sprintf("Method not found: %s", method), nil)
}

// workerRPCError is a JSON-RPC error a tool's worker answered with (a bridged
// server's own, say), as the client gets it: the same code, message and data. At
// 2026-07-28 it comes with the HTTP status that revision gives its code; before, a
// JSON-RPC error is answered with 200.
func workerRPCError(e *wire.RPCError, stateless bool) error {
	status := http.StatusOK
	if stateless {
		status = statelessErrorStatus(e.Code)
	}
	return &gateway.Error{Kind: gateway.KindToolError, Status: status, Err: e}
}

// statelessErrorStatus is the HTTP status 2026-07-28 gives a JSON-RPC error of code
// (SEP-2575): 404 for an unknown method, 400 for invalid params, an unsupported
// protocol version, a header mismatch or a missing client capability; 200 for the rest.
func statelessErrorStatus(code int64) int {
	switch code {
	case gateway.RPCMethodNotFound:
		return http.StatusNotFound
	case gateway.RPCInvalidParams, gateway.RPCUnsupportedVersion, gateway.RPCHeaderMismatch, gateway.RPCMissingCapability:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// classify is gateway.Classify on an MCP path, where a record the registry does not
// hold is the session the request names.
func classify(err error) gateway.Failure {
	if errors.Is(err, registry.ErrNotFound) {
		err = errSessionNotFound
	}
	return gateway.Classify(err)
}

// RPCError is the JSON-RPC error a client sees for err.
func RPCError(err error) *jsonrpc.Error {
	f := classify(err)
	e := &jsonrpc.Error{Code: f.RPC, Message: f.RPCMessage}
	if f.Data != nil {
		e.Data, _ = json.Marshal(f.Data)
	}
	return e
}

// HTTPStatus is the status a POST carrying a failed request is answered with: the
// one the failure names, a protocol violation's own, else 200.
func HTTPStatus(err error) int {
	f := classify(err)
	switch {
	case f.MCPStatus != 0:
		return f.MCPStatus
	case f.Protocol:
		return f.Kind.Status
	}
	return http.StatusOK
}

// toolFailure reports whether err is a failure of the call rather than of the
// request: the client gets a CallToolResult with isError set and this text, which a
// model can read and act on.
func toolFailure(method string, err error) (string, bool) {
	f := classify(err)
	if !f.InResult || errors.As(err, new(*wire.RPCError)) {
		return "", false
	}
	return f.ResultText(method), true
}
