// Package mcphttp is MCP over HTTP as a client sees it, message by message: a
// connection that speaks Streamable HTTP (sessions of 2025-03-26 to 2025-11-25, and the
// stateless 2026-07-28) or, where an endpoint offers only that, the legacy HTTP+SSE
// transport; and the standard request headers of 2026-07-28, which the edge checks
// with the same code. It relays JSON-RPC messages as they are: a relay (toolgate
// connect) and a bridge to a remote server (the MCP worker) both pass messages they do
// not interpret.
package mcphttp

import (
	"encoding/base64"
	"encoding/json"
	"strings"
)

// Header names of the Streamable HTTP transport.
const (
	HeaderSessionID       = "Mcp-Session-Id"
	HeaderProtocolVersion = "Mcp-Protocol-Version"
	HeaderMethod          = "Mcp-Method"
	HeaderName            = "Mcp-Name"
	HeaderLastEventID     = "Last-Event-Id"
)

// Stateless is the first revision without sessions, whose requests carry their
// metadata in _meta and mirror it in the standard headers.
const Stateless = "2026-07-28"

// IsStateless reports whether revision v is 2026-07-28 or later. Revisions are
// dates, so they compare as strings; a later unknown revision is stateless too.
func IsStateless(v string) bool { return v >= Stateless }

// metaProtocolVersion is where a 2026-07-28 request names its revision.
const metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"

// MetaVersion is the protocol revision a message's params._meta names, or "".
func MetaVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(params, &p) != nil {
		return ""
	}
	var v string
	_ = json.Unmarshal(p.Meta[metaProtocolVersion], &v)
	return v
}

// Name is what the Mcp-Name header mirrors for a request: params.name of tools/call
// and prompts/get, params.uri of resources/read, params.taskId of the tasks
// extension's methods; ok is false for other methods.
func Name(method string, params json.RawMessage) (name string, ok bool) {
	var p struct {
		Name   string `json:"name"`
		URI    string `json:"uri"`
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(params, &p)
	switch method {
	case "tools/call", "prompts/get":
		return p.Name, true
	case "resources/read":
		return p.URI, true
	case "tasks/get", "tasks/update", "tasks/cancel":
		return p.TaskID, true
	}
	return "", false
}

// EncodeHeaderValue writes v as a header value: as it is when it is printable ASCII
// without surrounding spaces, else base64 between =?base64? and ?= (SEP-2243).
func EncodeHeaderValue(v string) string {
	plain := v == strings.TrimSpace(v) && !strings.HasPrefix(v, "=?base64?")
	for i := 0; plain && i < len(v); i++ {
		plain = v[i] >= 0x20 && v[i] < 0x7f
	}
	if plain {
		return v
	}
	return "=?base64?" + base64.StdEncoding.EncodeToString([]byte(v)) + "?="
}

// DecodeHeaderValue undoes EncodeHeaderValue; ok is false for a wrapped value that
// is not base64.
func DecodeHeaderValue(v string) (string, bool) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, true
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, true
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", false
	}
	return string(b), true
}
