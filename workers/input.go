package workers

import (
	"encoding/json"
	"sync"

	"github.com/toolgate/toolgate/bus/wire"
)

// The edge checks a call's parameters against its method's input schema before it
// sends the call, when it holds them whole. A request past one message it streams
// into the payloads bucket instead, checking only that it is one JSON object; the SDK
// reads such a request whole before its handler runs anyway, and checks it there,
// against the schema the edge would have used, compiled and checked the same way
// (wire.InputSchema). A request that breaks it is answered CodeSchemaViolation with
// the violations, which the edge answers as it answers a small request's
// (invalid_params), and the handler never runs.

// inputSchema is a method's input schema, compiled on the first request it checks.
type inputSchema struct {
	raw   json.RawMessage
	url   string
	once  sync.Once
	input *wire.InputSchema
}

// check checks the parameters of in when they came as a payload: nil when they match
// the schema, or were checked by the edge, or could not be read (readErr, the
// handler's to answer).
func (is *inputSchema) check(in inbound, readErr error) error {
	if is == nil || !in.payload || readErr != nil || len(is.raw) == 0 {
		return nil
	}
	is.once.Do(func() {
		// A schema that does not compile kept the worker from starting.
		is.input, _ = wire.CompileInput(is.raw, is.url)
	})
	if is.input == nil || is.input.AnyObject {
		return nil // the edge checked that the parameters are one JSON object
	}
	vs := is.input.Violations(in.data)
	if vs == nil {
		return nil
	}
	return &Error{Code: wire.CodeSchemaViolation, Status: 400, Message: "the parameters do not match the method's input schema", Data: vs}
}
