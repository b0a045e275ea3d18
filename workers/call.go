package workers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
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
	RequestID string
	Session   string      // the MCP session, for calls that come through one
	Deadline  time.Time   // zero when the caller set none
	Header    nats.Header // the request's headers, as they came

	nc       *nats.Conn
	subjects bus.Subjects
	progress bool
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
	return c.notify(bus.Notification{Kind: bus.KindProgress, Progress: progress, Total: total, Message: message})
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
	return c.notify(bus.Notification{Kind: bus.KindLog, Level: level, Logger: logger, Data: b})
}

func (c *Call) notify(n bus.Notification) error {
	if !c.progress || c.RequestID == "" {
		return nil
	}
	b, err := json.Marshal(n)
	if err != nil {
		return fmt.Errorf("workers: %s notification: %w", n.Kind, err)
	}
	if err := c.nc.Publish(c.subjects.Progress(c.RequestID), b); err != nil {
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
// bridged MCP server answered. It is sent with Tg-Result: mcp-call-tool-result, so that
// an MCP session passes it to its client unchanged (content, structuredContent,
// isError) instead of wrapping it as the text of a new result; HTTP callers get the
// JSON as it is.
type MCPResult json.RawMessage

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
// Call.Request returns one when the MCP client answered with an error.
type RPCError struct {
	Code    int64
	Message string
	Data    json.RawMessage // any JSON, or nil
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
}

// JSON-RPC error codes an MCP handler often answers with.
const (
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternalError  = -32603
)

// ErrCancelled is the cause of a handler's context when the caller cancelled the
// call (context.Cause tells it from a passed deadline).
var ErrCancelled = errors.New("workers: the caller cancelled the call")

// Codes of the errors the SDK itself sends.
const (
	CodeInternal       = "internal"       // the handler failed or panicked
	CodeInvalidParams  = "invalid_params" // the parameters do not decode
	CodeTimeout        = "timeout"        // the handler gave up at the caller's deadline
	CodeCancelled      = "cancelled"      // the handler stopped because the caller cancelled
	CodeReplyTooLarge  = "reply_too_large"
	CodeMethodNotFound = "method_not_found" // the method was declared, and is no more (SetMethods)
)

// reply turns what a handler returned into the reply message for subject.
func reply(subject string, result any, err error) *nats.Msg {
	msg := nats.NewMsg(subject)
	if err != nil {
		return errorReply(msg, toolError(err))
	}
	switch r := result.(type) {
	case Raw:
		return rawReply(msg, r)
	case *Raw:
		if r != nil {
			return rawReply(msg, *r)
		}
	case MCPResult:
		if !json.Valid(r) {
			return errorReply(msg, &Error{Code: CodeInternal, Message: "the MCP result is not JSON"})
		}
		msg.Header.Set(bus.HeaderContentType, "application/json")
		msg.Header.Set(bus.HeaderResult, bus.ResultMCP)
		msg.Data = r
		return msg
	}
	b, err := json.Marshal(result)
	if err != nil {
		return errorReply(msg, &Error{Code: CodeInternal, Message: "the result does not encode as JSON: " + err.Error()})
	}
	msg.Header[bus.HeaderContentType] = applicationJSON
	msg.Data = b
	return msg
}

// applicationJSON is the Content-Type of every JSON reply, shared rather than made for
// each (nats only reads it).
var applicationJSON = []string{"application/json"}

func rawReply(msg *nats.Msg, r Raw) *nats.Msg {
	if r.ContentType != "" {
		msg.Header.Set(bus.HeaderContentType, r.ContentType)
	}
	if r.Status != 0 {
		msg.Header.Set(bus.HeaderStatus, fmt.Sprint(r.Status))
	}
	msg.Data = r.Data
	return msg
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

func errorReply(msg *nats.Msg, e *Error) *nats.Msg {
	code, message := e.Code, e.Message
	if code == "" {
		code = CodeInternal
	}
	if message == "" {
		message = code // nats micro requires a description
	}
	msg.Header.Set(bus.HeaderErrorCode, code)
	msg.Header.Set(bus.HeaderError, message)
	if e.Status != 0 {
		msg.Header.Set(bus.HeaderStatus, fmt.Sprint(e.Status))
	}
	if e.Data != nil {
		if b, err := json.Marshal(e.Data); err == nil {
			msg.Header.Set(bus.HeaderContentType, "application/json")
			msg.Data = b
		}
	}
	return msg
}

// mcpReply turns what an MCP handler returned into the reply message for subject: the
// JSON-RPC result, or the nats micro error headers carrying the JSON-RPC error's code
// (as a decimal) and message, with its data as the body.
func mcpReply(subject string, result any, err error) *nats.Msg {
	msg := nats.NewMsg(subject)
	if err == nil {
		if result == nil {
			result = struct{}{} // an MCP result is an object, never null
		}
		b, merr := json.Marshal(result)
		if merr == nil {
			msg.Header.Set(bus.HeaderContentType, "application/json")
			msg.Data = b
			return msg
		}
		err = fmt.Errorf("the result does not encode as JSON: %w", merr)
	}
	e := rpcError(err)
	msg.Header.Set(bus.HeaderErrorCode, strconv.FormatInt(e.Code, 10))
	msg.Header.Set(bus.HeaderError, cmp.Or(e.Message, "error"))
	if len(e.Data) > 0 && json.Valid(e.Data) {
		msg.Header.Set(bus.HeaderContentType, "application/json")
		msg.Data = e.Data
	}
	return msg
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
