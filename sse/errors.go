package sse

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// JSON-RPC error codes MCP defines beyond JSON-RPC's own.
const (
	codeHeaderMismatch             = mcp.CodeHeaderMismatch             // -32020
	codeUnsupportedProtocolVersion = mcp.CodeUnsupportedProtocolVersion // -32022
	// codeMissingCapability answers a request that needs a capability its client did
	// not declare.
	codeMissingCapability = mcp.CodeMissingRequiredClientCapabilities // -32021
	// codeSessionLimit is implementation-defined (-32000 to -32019).
	codeSessionLimit = -32000
	// codeCancelled answers a request the client cancelled, where an answer is owed.
	codeCancelled = -32001
	// codeRateLimited answers a forwarded request (resources, prompts, completion)
	// of a caller over its rate; a tools/call over it is an isError result instead.
	// Clear of MCP's codes and of those the go-sdk gives a meaning of its own
	// (-32000 to -32005: -32003 reads there as "client is closing").
	codeRateLimited = -32029
)

// ErrUnknownTool: the tools/call names no tool of the link.
var ErrUnknownTool = errors.New("unknown tool")

// SessionLimitError says an account holds as many MCP sessions as it may.
type SessionLimitError struct {
	Account string
	Limit   int
}

func (e *SessionLimitError) Error() string {
	return fmt.Sprintf("account %s has %d MCP sessions open, the most it may hold: end one (DELETE, or close its SSE stream) or wait for idle ones to expire", e.Account, e.Limit)
}

// protocolError is a violation of the protocol itself: the code and HTTP status it
// is answered with are part of what it is.
type protocolError struct {
	code    int64
	status  int // HTTP status on the transports that send one
	message string
	data    any
}

func (e *protocolError) Error() string { return e.message }

func parseError(format string, args ...any) error {
	return &protocolError{code: jsonrpc.CodeParseError, status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) error {
	return &protocolError{code: jsonrpc.CodeInvalidRequest, status: http.StatusBadRequest, message: fmt.Sprintf(format, args...)}
}

func invalidParams(format string, args ...any) error {
	return &protocolError{code: jsonrpc.CodeInvalidParams, status: http.StatusOK, message: fmt.Sprintf(format, args...)}
}

func headerMismatch(format string, args ...any) error {
	return &protocolError{code: codeHeaderMismatch, status: http.StatusBadRequest, message: "Header mismatch: " + fmt.Sprintf(format, args...)}
}

// rateLimited is the error of a forwarded request over the caller's rate: the text a
// tools/call over it gets as its isError result, and the wait in milliseconds as data.
func rateLimited(method string, e *gateway.RateLimitedError) error {
	return &protocolError{code: codeRateLimited, status: http.StatusOK, message: rateLimitedText(method, e),
		data: map[string]int64{"retryAfterMs": max(1, e.RetryAfter.Milliseconds())}}
}

func rateLimitedText(method string, e *gateway.RateLimitedError) string {
	return fmt.Sprintf("%s: rate limited; retry after %v", method, e.RetryAfter.Round(time.Millisecond))
}

func unsupportedVersion(requested string) error {
	return &protocolError{
		code: codeUnsupportedProtocolVersion, status: http.StatusBadRequest,
		message: fmt.Sprintf("Unsupported protocol version %q", requested),
		data:    mcp.UnsupportedProtocolVersionData{Supported: supportedVersions, Requested: requested},
	}
}

// workerRPCError is a JSON-RPC error a tool's worker answered with (a bridged
// server's own, say), as the client gets it: the same code, message and data. At
// 2026-07-28 it comes with the HTTP status that revision gives its code; before, a
// JSON-RPC error is answered with 200.
func workerRPCError(e *wire.RPCError, modern bool) error {
	pe := &protocolError{code: e.Code, status: http.StatusOK, message: e.Message}
	if modern {
		pe.status = modernErrorStatus(e.Code)
	}
	if len(e.Data) > 0 && json.Valid(e.Data) {
		pe.data = json.RawMessage(e.Data)
	}
	return pe
}

// modernErrorStatus is the HTTP status 2026-07-28 gives a JSON-RPC error of code
// (SEP-2575): 404 for an unknown method, 400 for invalid params, an unsupported
// protocol version, a header mismatch or a missing client capability; 200 for the rest.
func modernErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, codeUnsupportedProtocolVersion, codeHeaderMismatch, codeMissingCapability:
		return http.StatusBadRequest
	}
	return http.StatusOK
}

// methodNotFound is answered with 404 on 2026-07-28, where the status tells an
// unknown method from a missing endpoint; the older transports answer it with 200.
func methodNotFound(method string, status int) error {
	return &protocolError{code: jsonrpc.CodeMethodNotFound, status: status, message: fmt.Sprintf("Method not found: %s", method)}
}

// rpcError maps an internal error to the JSON-RPC error a client sees. It is the one
// place that does: failures of the tool itself are not errors here but isError
// results (see toolFailure).
func rpcError(err error) *jsonrpc.Error {
	var pe *protocolError
	var limit *SessionLimitError
	var re *wire.RPCError
	switch {
	case errors.As(err, &pe):
		e := &jsonrpc.Error{Code: pe.code, Message: pe.message}
		if pe.data != nil {
			e.Data, _ = json.Marshal(pe.data)
		}
		return e
	case errors.Is(err, ErrUnknownTool), errors.Is(err, registry.ErrMethodNotFound),
		errors.Is(err, registry.ErrToolNotFound), errors.Is(err, registry.ErrForbidden):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error()}
	case errors.Is(err, gateway.ErrInvalidJSON):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call: arguments must be a JSON object"}
	case errors.As(err, &limit):
		return &jsonrpc.Error{Code: codeSessionLimit, Message: limit.Error()}
	case errors.Is(err, registry.ErrNotFound):
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: "session not found: it ended or expired; initialize a new one"}
	case errors.Is(err, context.Canceled):
		return &jsonrpc.Error{Code: codeCancelled, Message: "request cancelled: " + err.Error()}
	case errors.As(err, &re):
		e := &jsonrpc.Error{Code: re.Code, Message: re.Message}
		if len(re.Data) > 0 && json.Valid(re.Data) {
			e.Data = re.Data
		}
		return e
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error: " + err.Error()}
}

// httpStatus is the status a POST carrying a failed request is answered with.
func httpStatus(err error) int {
	var pe *protocolError
	if errors.As(err, &pe) && pe.status != 0 {
		return pe.status
	}
	var limit *SessionLimitError
	if errors.As(err, &limit) {
		return http.StatusTooManyRequests
	}
	return http.StatusOK
}

// toolFailure reports whether err is a failure of the call rather than of the
// request: the client gets a CallToolResult with isError set and this text, which a
// model can read and act on.
func toolFailure(tool, method string, err error) (string, bool) {
	var verr *registry.ValidationError
	var limited *gateway.RateLimitedError
	var terr *wire.ToolError
	var tooLarge *bus.PayloadTooLargeError
	switch {
	case errors.As(err, &verr):
		return fmt.Sprintf("%s: %s", method, verr.Error()), true
	case errors.As(err, &limited):
		return rateLimitedText(method, limited), true
	case errors.Is(err, bus.ErrNoResponders):
		return fmt.Sprintf("%s: tool %s is offline: no worker is serving it", method, tool), true
	case errors.Is(err, bus.ErrCallLost):
		return fmt.Sprintf("%s: the worker of tool %s running the call stopped, or the call was lost on its way; it was cancelled", method, tool), true
	case errors.Is(err, bus.ErrTimeout):
		return fmt.Sprintf("%s: tool %s did not answer before the deadline", method, tool), true
	case errors.As(err, &tooLarge):
		return fmt.Sprintf("%s: the arguments are too large: %d bytes, the bus takes at most %d", method, tooLarge.Size, tooLarge.Max), true
	case errors.As(err, &terr):
		msg := fmt.Sprintf("%s failed: %s: %s", method, terr.Code, terr.Message)
		if d := strings.TrimSpace(string(terr.Data)); d != "" {
			msg += "\n" + d
		}
		return msg, true
	}
	return "", false
}
