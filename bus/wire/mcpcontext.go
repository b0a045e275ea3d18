package wire

import "github.com/nats-io/nats.go"

// MCPContext is what a request made for an MCP client carries of that client, of its
// session and of where its answer goes. The edge serving the client makes it once;
// the gateway carries it through, checks nothing in it, and puts it on the request
// as it is. A call of the HTTP tool-call route has none.
type MCPContext struct {
	Session string // the MCP session, if any
	// ClientCapabilities are the capabilities the session's MCP client declared; nil
	// when unknown (no session, or none recorded).
	ClientCapabilities []string
	// ClientCapabilityObject is the capabilities object the session's client sent in
	// initialize, as JSON; nil when unknown.
	ClientCapabilityObject []byte
	// Post names the POST stream of the session the call is answered on, when it is
	// answered with one (HeaderPost).
	Post string
	// LogLevel is the log level the session's client set, if any.
	LogLevel string
	Progress bool // the caller follows Progress(Tool, CallID)
	// Header holds extra headers, copied onto the message first.
	Header nats.Header
	// ReplyTo is where the tool answers, when the answer must be kept where others can
	// read it (an MCP call's stream, in the event log) rather than go to the caller's
	// inbox alone: the message's reply subject, which the caller subscribes to.
	ReplyTo string
	// Instance, when set, sends the request to that worker instance alone
	// (Subjects.Instance) rather than to the tool's queue group.
	Instance string
}
