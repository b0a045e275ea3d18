package wire

// Headers on request messages. Trace context travels as the lower-case W3C names
// traceparent and tracestate (see HeaderCarrier).
const (
	// HeaderCallID names the call on the bus: its cancel and progress subjects. Only
	// the gateway makes call ids, never from anything a caller sends.
	HeaderCallID = "Tg-Call-Id"
	// HeaderRequestID is the caller's request id (X-Request-Id), for logs only.
	HeaderRequestID = "Tg-Request-Id"
	HeaderAccount   = "Tg-Account"
	HeaderDeadline  = "Tg-Deadline" // unix milliseconds
	HeaderSession   = "Tg-Session"  // the MCP session a call came through
	HeaderProgress  = "Tg-Progress" // "1" when the caller wants progress notifications
	HeaderMethod    = "Tg-Method"   // the MCP method of a request on MCP(tool)
	// HeaderClientCapabilities lists, comma-separated, the capabilities the MCP
	// client of the call's session declared (sampling, elicitation, roots, ...). It is
	// present, perhaps empty, when the session's capabilities are known, so a worker
	// sends a client no request it cannot answer.
	HeaderClientCapabilities = "Tg-Client-Capabilities"
	// HeaderClientCapabilityObject is the capabilities object the session's MCP
	// client sent in initialize, compact JSON, so that a worker speaking MCP to a
	// server of its own can declare to it exactly what the client declared.
	HeaderClientCapabilityObject = "Tg-Client-Capability-Object"
	// HeaderPost names the POST stream of the session that carries the call's answer:
	// a worker's requests related to the call (sampling, elicitation, roots) go on it,
	// SessionPost(tool, session, post), rather than on the session's standalone
	// stream, which a client need not open.
	HeaderPost = "Tg-Post"
	// HeaderLogLevel is the least severe level of log message the session's client
	// asked for with logging/setLevel; absent when it set none.
	HeaderLogLevel = "Tg-Log-Level"
)

// Headers on reply messages.
const (
	HeaderContentType = "Content-Type"
	HeaderStatus      = "Tg-Status" // the HTTP status the tool asks for; 200 if absent
	// HeaderResult names what a reply's body is when it is not the method's plain
	// result: ResultMCP or ResultRPCError.
	HeaderResult = "Tg-Result"
	// HeaderInstance names the worker instance that answered a request of an MCP
	// session, on the replies of a tool whose workers keep state per session
	// (Capabilities.SessionState): the edges send the session's later requests to it
	// (Subjects.Instance).
	HeaderInstance = "Tg-Instance"
	// The nats micro error headers: a tool's own error. On a JSON-RPC error reply
	// they are set too, for nats micro tooling; the body is what counts.
	HeaderErrorCode = "Nats-Service-Error-Code"
	HeaderError     = "Nats-Service-Error"
)

// HeaderResult values.
const (
	// ResultMCP: the body is an MCP CallToolResult, as a bridged MCP server returns
	// it; MCP sessions pass it through unchanged, HTTP callers get it as JSON.
	ResultMCP = "mcp-call-tool-result"
	// ResultRPCError: the body is a JSON-RPC error object, {code, message, data?}, the
	// answer of a request on MCP(tool) that failed.
	ResultRPCError = "jsonrpc-error"
)

// The server's status header: 503 on a request nobody answered.
const headerNATSStatus = "Status"
