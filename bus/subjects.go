package bus

import "strings"

// DefaultPrefix is the first token of every toolgate subject.
const DefaultPrefix = "tg"

// Headers carried on request messages. Trace context travels as the lower-case W3C
// names traceparent and tracestate (see HeaderCarrier).
const (
	HeaderRequestID = "Tg-Request-Id"
	HeaderAccount   = "Tg-Account"
	HeaderDeadline  = "Tg-Deadline" // unix milliseconds
	HeaderSession   = "Tg-Session"
	HeaderProgress  = "Tg-Progress" // set when the caller wants progress notifications
	HeaderMethod    = "Tg-Method"   // the MCP method on tg.mcp.<tool> requests
)

// Headers carried on reply messages.
const (
	HeaderContentType = "Content-Type"
	HeaderStatus      = "Tg-Status" // the HTTP status the tool asks for; 200 if absent
	// HeaderResult names what a reply's body is when it is not the method's plain
	// result. ResultMCP: an MCP CallToolResult, as a bridged MCP server returns it;
	// MCP sessions pass it through unchanged, HTTP callers get it as JSON.
	HeaderResult = "Tg-Result"
	// The nats micro error headers: a tool's own error.
	HeaderErrorCode = "Nats-Service-Error-Code"
	HeaderError     = "Nats-Service-Error"
)

// ResultMCP is the HeaderResult value of a reply whose body is an MCP CallToolResult.
const ResultMCP = "mcp-call-tool-result"

// Subjects names every subject under one prefix, so a deployment can run several
// gateways on one NATS system.
type Subjects struct {
	Prefix string
}

// DefaultSubjects uses DefaultPrefix.
var DefaultSubjects = Subjects{Prefix: DefaultPrefix}

func (s Subjects) prefix() string {
	if s.Prefix == "" {
		return DefaultPrefix
	}
	return s.Prefix
}

// join makes prefix.token1.token2...; it is on every call's path, so in one allocation.
func (s Subjects) join(tokens ...string) string {
	p := s.prefix()
	n := len(p)
	for _, t := range tokens {
		n += 1 + len(t)
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteString(p)
	for _, t := range tokens {
		b.WriteByte('.')
		b.WriteString(t)
	}
	return b.String()
}

// Call is the subject a tool's method is called on.
func (s Subjects) Call(tool, method string) string { return s.join("call", tool, method) }

// CallAll matches every method of a tool.
func (s Subjects) CallAll(tool string) string { return s.join("call", tool, ">") }

// QueueGroup is the queue group the instances of one tool share.
func (s Subjects) QueueGroup(tool string) string { return s.join(tool) }

// MCP carries the MCP methods other than tools (resources, prompts, completion) to a
// tool's workers: the request's data is the JSON-RPC params, HeaderMethod names the
// method, and the reply's data is the JSON-RPC result (or a micro error).
func (s Subjects) MCP(tool string) string { return s.join("mcp", tool) }

// Cancel tells the worker running a request to stop.
func (s Subjects) Cancel(requestID string) string { return s.join("cancel", requestID) }

// CancelAll matches every cancel message.
func (s Subjects) CancelAll() string { return s.join("cancel", "*") }

// Progress carries a call's progress and log notifications back to its edge.
func (s Subjects) Progress(requestID string) string { return s.join("progress", requestID) }

// SessionOut carries messages for an MCP session's client to the edge holding its stream.
func (s Subjects) SessionOut(session string) string { return s.join("sess", session, "out") }

// SessionReply carries a client's answer to a server-initiated request back to the worker.
func (s Subjects) SessionReply(session, id string) string {
	return s.join("sess", session, "reply", id)
}
