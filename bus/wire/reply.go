package wire

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Reply is what a tool answered, as it gave it.
type Reply struct {
	Status      int // 200 unless the tool set HeaderStatus
	ContentType string
	Data        []byte
	// MCPResult says Data is an MCP CallToolResult (ResultMCP).
	MCPResult bool
	Header    nats.Header
	// Payload names the reply's bytes in the payloads bucket when they were too large
	// for the message (HeaderPayload), and the caller streams them from there; Data is
	// then empty.
	Payload *Payload
	// Elapsed is the round trip on the bus, from sending the request to holding the
	// reply: the tool's time plus NATS's, without the caller's own. Set by the caller
	// that timed it.
	Elapsed time.Duration
}

// applicationJSON is the Content-Type of every JSON reply, shared rather than made for
// each (nats only reads it).
var applicationJSON = []string{"application/json"}

// JSONReply is a reply with a JSON body: a method's result, or the JSON-RPC result of
// a request on MCP(tool).
func JSONReply(subject string, body []byte) *nats.Msg {
	msg := nats.NewMsg(subject)
	msg.Header[HeaderContentType] = applicationJSON
	msg.Data = body
	return msg
}

// RawReply is a reply sent as the tool gives it: its bytes with their content type
// ("" for none), and the HTTP status the tool asks for (0 for 200).
func RawReply(subject string, status int, contentType string, data []byte) *nats.Msg {
	msg := nats.NewMsg(subject)
	if contentType != "" {
		msg.Header.Set(HeaderContentType, contentType)
	}
	if status != 0 {
		msg.Header.Set(HeaderStatus, strconv.Itoa(status))
	}
	msg.Data = data
	return msg
}

// ToolResultReply is a reply whose body is already an MCP CallToolResult.
func ToolResultReply(subject string, result json.RawMessage) *nats.Msg {
	msg := JSONReply(subject, result)
	msg.Header.Set(HeaderResult, ResultMCP)
	return msg
}

// ErrorReply is a tool's own error. An empty code is CodeInternal; nats micro
// requires a description, so an empty message is the code. Data, when set, must be
// JSON: it goes to the caller as the body.
func ErrorReply(subject string, e *ToolError) *nats.Msg {
	msg := nats.NewMsg(subject)
	code := cmp.Or(e.Code, CodeInternal)
	msg.Header.Set(HeaderErrorCode, code)
	msg.Header.Set(HeaderError, cmp.Or(e.Message, code))
	if e.Status != 0 {
		msg.Header.Set(HeaderStatus, strconv.Itoa(e.Status))
	}
	if len(e.Data) > 0 {
		msg.Header[HeaderContentType] = applicationJSON
		msg.Data = e.Data
	}
	return msg
}

// RPCErrorReply is the JSON-RPC error a request on MCP(tool) failed with. Its data,
// when not JSON, is left out.
func RPCErrorReply(subject string, e *RPCError) *nats.Msg {
	body := *e
	body.Message = cmp.Or(e.Message, "error")
	if len(body.Data) > 0 && !json.Valid(body.Data) {
		body.Data = nil
	}
	b, err := json.Marshal(&body)
	if err != nil { // cannot happen: every field encodes
		b = []byte(`{"code":-32603,"message":"the error does not encode"}`)
	}
	msg := JSONReply(subject, b)
	msg.Header.Set(HeaderResult, ResultRPCError)
	msg.Header.Set(HeaderErrorCode, strconv.FormatInt(body.Code, 10))
	msg.Header.Set(HeaderError, body.Message)
	return msg
}

// ReadReply decodes a reply: a *Reply, or the error the tool answered with, a
// *ToolError (or a *RPCError for a request on MCP(tool)). A reply that breaks this
// contract is a *ToolError with CodeBadReply.
func ReadReply(msg *nats.Msg) (*Reply, error) {
	status := 0
	if s := msg.Header.Get(HeaderStatus); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 100 || n > 599 {
			return nil, &ToolError{Code: CodeBadReply, Message: fmt.Sprintf("tool sent an invalid %s %q", HeaderStatus, s)}
		}
		status = n
	}
	result := msg.Header.Get(HeaderResult)
	if result == ResultRPCError {
		var e RPCError
		if err := json.Unmarshal(msg.Data, &e); err != nil || e.Message == "" {
			return nil, &ToolError{Code: CodeBadReply, Message: "tool sent a JSON-RPC error that is not {code, message, data?}"}
		}
		return nil, &e
	}
	if code := msg.Header.Get(HeaderErrorCode); code != "" {
		return nil, &ToolError{Code: code, Message: msg.Header.Get(HeaderError), Status: status, Data: msg.Data}
	}
	if status == 0 {
		status = 200
	}
	return &Reply{Status: status, ContentType: msg.Header.Get(HeaderContentType), Data: msg.Data,
		MCPResult: result == ResultMCP, Header: msg.Header}, nil
}
