package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// Handler answers one call of a method. What it returns becomes the reply: a Raw is
// sent as it is, an MCPResult as an MCP CallToolResult, any other value as JSON; an
// *Error is the tool's own error with its code and status, and any other error is
// reported with the code "internal".
type Handler func(ctx context.Context, c *Call) (any, error)

// Call is one call of a method, as the caller sent it. The handler's context carries
// the caller's deadline and trace, and is cancelled when the caller cancels.
type Call struct {
	Tool      string
	Method    string          // the method called; for an MCP request, the MCP method (resources/read, ...)
	Params    json.RawMessage // the parameters, a JSON object as the caller sent it
	Account   string          // the account the call is made for
	RequestID string          // the caller's request id, for logs
	CallID    string          // the call's id on the bus, made by the gateway
	Session   string          // the MCP session, for calls that come through one
	Deadline  time.Time       // zero when the caller set none
	Header    nats.Header     // the request's headers, as they came
	// ClientCapabilities is the capabilities object the session's MCP client sent in
	// initialize, as it sent it; nil when unknown (no session).
	ClientCapabilities json.RawMessage
	// LogLevel is the least severe log level the session's client asked for with
	// logging/setLevel; "" when it set none.
	LogLevel string

	w        *Worker
	req      wire.Request
	progress bool // the caller follows the call's progress

	sealed    string // the account's connection values, sealed to the tool (wire.HeaderCredentials)
	credsOnce sync.Once
	creds     map[string]string
	credsErr  error
}

// Bind decodes the parameters into v.
func (c *Call) Bind(v any) error {
	params := c.Params
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := json.Unmarshal(params, v); err != nil {
		return &Error{Code: CodeInvalidParams, Message: err.Error(), Status: 400}
	}
	return nil
}

// Progress tells the caller how far the call has come: progress of total (0 when
// the total is unknown), with an optional message. It does nothing when the caller
// did not ask for progress.
func (c *Call) Progress(progress, total float64, message string) error {
	return c.notify(wire.Notification{Kind: wire.KindProgress, Progress: progress, Total: total, Message: message})
}

// Log sends the caller a log message of level (debug, info, notice, warning, error,
// critical, alert, emergency) from the named logger; data is any JSON value. It does
// nothing when the caller did not ask for notifications.
func (c *Call) Log(level, logger string, data any) error {
	if !c.progress {
		return nil
	}
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("workers: log data: %w", err)
	}
	return c.notify(wire.Notification{Kind: wire.KindLog, Level: level, Logger: logger, Data: b})
}

func (c *Call) notify(n wire.Notification) error {
	// A call id that is not one token was not made by a gateway: nobody follows it.
	if !c.progress || !wire.ValidToken(c.CallID) {
		return nil
	}
	b, err := n.Encode()
	if err != nil {
		return fmt.Errorf("workers: %w", err)
	}
	if err := c.w.nc.Publish(c.w.cfg.subjects.Progress(c.Tool, c.CallID), b); err != nil {
		return fmt.Errorf("workers: %s notification: %w", n.Kind, err)
	}
	return nil
}

// Raw is a reply sent as it is: its bytes with their content type, and the HTTP
// status the tool asks for (200 when zero).
type Raw struct {
	Status      int
	ContentType string
	Data        []byte
}

// MCPResult is a result that is already an MCP CallToolResult, as JSON: what a
// bridged MCP server answered. It is sent as such, so that an MCP session passes it to
// its client unchanged (content, structuredContent, isError) instead of wrapping it as
// the text of a new result; HTTP callers get the JSON as it is.
type MCPResult json.RawMessage

// Capabilities are the MCP features a tool serves beyond tools. Resources, prompts
// and completions need an MCP handler (HandleMCP).
type Capabilities = wire.Capabilities

// Error is a tool's own error. The caller sees its code and message; Status is the
// HTTP status the tool asks for (the gateway's 502 when zero), and Data, when set,
// goes to the caller as the reply's JSON body.
type Error struct {
	Code    string
	Message string
	Status  int
	Data    any
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code
	}
	return e.Code + ": " + e.Message
}

// RPCError is a JSON-RPC error. An MCP handler returns one to answer with that error;
// so may a method's handler, whose MCP caller then gets that JSON-RPC error rather
// than an isError result (an HTTP caller gets it as the tool's error); Call.Request
// returns one when the MCP client answered with an error.
type RPCError = wire.RPCError

// JSON-RPC error codes an MCP handler often answers with.
const (
	RPCMethodNotFound = wire.RPCMethodNotFound
	RPCInvalidParams  = wire.RPCInvalidParams
	RPCInternalError  = wire.RPCInternalError
)

// ErrCancelled is the cause of a handler's context when the caller cancelled the
// call (context.Cause tells it from a passed deadline).
var ErrCancelled = errors.New("workers: the caller cancelled the call")

// Codes of the errors the SDK itself sends.
const (
	CodeInternal        = wire.CodeInternal        // the handler failed or panicked
	CodeInvalidParams   = wire.CodeInvalidParams   // the parameters do not decode
	CodeTimeout         = wire.CodeTimeout         // the handler gave up at the caller's deadline
	CodeCancelled       = wire.CodeCancelled       // the handler stopped because the caller cancelled
	CodePayloadTooLarge = wire.CodePayloadTooLarge // the reply is past what the caller takes
	CodeMethodNotFound  = wire.CodeMethodNotFound  // the method was declared, and is no more (SetMethods)
)

// reply turns what a handler returned into the reply message for subject.
func reply(subject string, result any, err error) *nats.Msg {
	var re *RPCError
	if errors.As(err, &re) {
		return wire.RPCErrorReply(subject, re)
	}
	if err != nil {
		return errorReply(subject, toolError(err))
	}
	switch r := result.(type) {
	case Raw:
		return wire.RawReply(subject, r.Status, r.ContentType, r.Data)
	case *Raw:
		if r != nil {
			return wire.RawReply(subject, r.Status, r.ContentType, r.Data)
		}
	case MCPResult:
		if !json.Valid(r) {
			return errorReply(subject, &Error{Code: CodeInternal, Message: "the MCP result is not JSON"})
		}
		return wire.ToolResultReply(subject, json.RawMessage(r))
	}
	b, err := json.Marshal(result)
	if err != nil {
		return errorReply(subject, &Error{Code: CodeInternal, Message: "the result does not encode as JSON: " + err.Error()})
	}
	return wire.JSONReply(subject, b)
}

// toolError is err as the caller will see it.
func toolError(err error) *Error {
	var te *Error
	switch {
	case errors.As(err, &te):
		return te
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeTimeout, Message: err.Error(), Status: 504}
	case errors.Is(err, context.Canceled):
		return &Error{Code: CodeCancelled, Message: err.Error()}
	}
	return &Error{Code: CodeInternal, Message: err.Error()}
}

func errorReply(subject string, e *Error) *nats.Msg {
	out := &wire.ToolError{Code: e.Code, Message: e.Message, Status: e.Status}
	if e.Data != nil {
		if b, err := json.Marshal(e.Data); err == nil {
			out.Data = b
		}
	}
	return wire.ErrorReply(subject, out)
}

// mcpReply turns what an MCP handler returned into the reply message for subject: the
// JSON-RPC result, or the JSON-RPC error.
func mcpReply(subject string, result any, err error) *nats.Msg {
	if err == nil {
		if result == nil {
			result = struct{}{} // an MCP result is an object, never null
		}
		b, merr := json.Marshal(result)
		if merr == nil {
			return wire.JSONReply(subject, b)
		}
		err = fmt.Errorf("the result does not encode as JSON: %w", merr)
	}
	return wire.RPCErrorReply(subject, rpcError(err))
}

// rpcError is err as an MCP client will see it.
func rpcError(err error) *RPCError {
	var re *RPCError
	if errors.As(err, &re) {
		return re
	}
	if te := toolError(err); te.Code == CodeInvalidParams {
		return &RPCError{Code: RPCInvalidParams, Message: te.Message}
	}
	return &RPCError{Code: RPCInternalError, Message: err.Error()}
}
