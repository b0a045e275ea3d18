package wire

import (
	"encoding/json"
	"fmt"
	"time"
)

// Error codes the worker SDK sends in HeaderErrorCode, and the edge reads.
const (
	CodeInternal        = "internal"          // the handler failed or panicked
	CodeInvalidParams   = "invalid_params"    // the parameters do not decode
	CodeTimeout         = "timeout"           // the handler gave up at the caller's deadline
	CodeCancelled       = "cancelled"         // the handler stopped because the caller cancelled
	CodePayloadTooLarge = "payload_too_large" // the reply is past the caller's limit (HeaderPayloadLimit)
	CodeMethodNotFound  = "method_not_found"  // the method was declared, and is no more
	CodeBadRequest      = "bad_request"       // the request breaks this contract
	// CodeSchemaViolation: the parameters of a request past one message (a payload,
	// which the edge does not hold whole) break the method's input schema, which the
	// SDK checked before the handler; the body is the violations ([]Violation), which
	// the edge answers as it answers a small request's.
	CodeSchemaViolation = "schema_violation"
	// CodeBadReply is the edge's own: a reply that breaks this contract.
	CodeBadReply = "bad_reply"
)

// JSON-RPC error codes an MCP handler often answers with.
const (
	RPCMethodNotFound = -32601
	RPCInvalidParams  = -32602
	RPCInternalError  = -32603
)

// ToolError is a tool's own failure, carried in the nats micro error headers.
type ToolError struct {
	Code    string // the tool's error code (HeaderErrorCode)
	Message string // the tool's description (HeaderError)
	Status  int    // the HTTP status the tool asked for (HeaderStatus), 0 if none
	Data    []byte // any body the tool sent with the error
	// Elapsed is the round trip on the bus, as in Reply; set by the caller that timed it.
	Elapsed time.Duration
}

func (e *ToolError) Error() string {
	return fmt.Sprintf("tool error %s: %s", e.Code, e.Message)
}

// RPCError is a JSON-RPC error: what a worker answers a request on MCP(tool) with, and
// what an MCP client answers a worker's session request with. Its code travels as a
// number in the body, never parsed back out of a string.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message)
}
