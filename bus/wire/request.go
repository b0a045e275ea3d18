package wire

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// Request is one message from an edge to a tool's workers: a call of a method, or an
// MCP request other than a tool call.
type Request struct {
	Tool string
	// Method is the method called; on an MCP request, the MCP method
	// (resources/read, prompts/get, ...).
	Method string
	// MCP marks a request on MCP(Tool) rather than a call on Call(Tool, Method).
	MCP bool
	// CallID names the call on the bus (HeaderCallID): made by the gateway, never
	// taken from a caller.
	CallID string
	// RequestID is the caller's request id (HeaderRequestID), for logs.
	RequestID string
	Account   string
	Deadline  time.Time // zero means the context's deadline, if any
	Data      []byte
	// MCPContext is what the request carries of the MCP client it is made for, if any.
	MCPContext
}

// Subject is the subject r travels on.
func (s Subjects) Subject(r *Request) string {
	switch {
	case r.Instance != "" && r.MCP:
		return s.join("inst", r.Tool, r.Instance, "mcp")
	case r.Instance != "":
		return s.join("inst", r.Tool, r.Instance, "call", r.Method)
	case r.MCP:
		return s.MCP(r.Tool)
	}
	return s.Call(r.Tool, r.Method)
}

// Msg encodes r as the NATS message its tool's workers read, with the trace context of
// ctx injected.
func (s Subjects) Msg(ctx context.Context, r *Request) *nats.Msg {
	// The headers' map is made for all of them at once, and their values share one
	// backing array, each capped to its own element so that an append elsewhere
	// copies it: the call path pays for every allocation.
	// Direct assignments, not Set: the names are canonical already.
	var keys, vals [maxRequestHeaders]string
	n := 0
	add := func(k, v string) {
		if v != "" {
			keys[n], vals[n] = k, v
			n++
		}
	}
	add(HeaderCallID, r.CallID)
	add(HeaderRequestID, r.RequestID)
	add(HeaderAccount, r.Account)
	add(HeaderSession, r.Session)
	add(HeaderPost, r.Post)
	add(HeaderLogLevel, r.LogLevel)
	add(HeaderClientCapabilityObject, string(r.ClientCapabilityObject))
	if r.MCP {
		add(HeaderMethod, r.Method)
	}
	if r.ClientCapabilities != nil {
		// Set even when empty: a client that declared nothing is not one unknown.
		keys[n], vals[n] = HeaderClientCapabilities, strings.Join(r.ClientCapabilities, ",")
		n++
	}
	deadline := r.Deadline
	if deadline.IsZero() {
		deadline, _ = ctx.Deadline()
	}
	if !deadline.IsZero() {
		add(HeaderDeadline, strconv.FormatInt(deadline.UnixMilli(), 10))
	}
	if r.Progress {
		add(HeaderProgress, "1")
	}
	msg := &nats.Msg{Subject: s.Subject(r), Data: r.Data, Header: make(nats.Header, len(r.Header)+n)}
	for k, v := range r.Header {
		msg.Header[k] = v
	}
	shared := make([]string, n)
	copy(shared, vals[:n])
	for i := range n {
		msg.Header[keys[i]] = shared[i : i+1 : i+1]
	}
	Propagator.Inject(ctx, HeaderCarrier(msg.Header))
	return msg
}

// maxRequestHeaders is how many headers Msg sets at most, besides the trace context's.
const maxRequestHeaders = 11

// ReadRequest decodes a request a worker received on subject. Header is kept as it
// came, for the trace context and any header the SDK does not read.
func (s Subjects) ReadRequest(subject string, h nats.Header, data []byte) (Request, error) {
	r := Request{Data: data, MCPContext: MCPContext{Header: h}}
	root := s.prefix() + "."
	rest, _ := strings.CutPrefix(subject, root)
	if inst, ok := strings.CutPrefix(rest, "inst."); ok {
		// inst.<tool>.<instance>.call.<method> or .mcp: the tool's request, sent to
		// one instance.
		tool, after, _ := strings.Cut(inst, ".")
		instance, kind, _ := strings.Cut(after, ".")
		if tool == "" || instance == "" {
			return r, fmt.Errorf("wire: request subject %q: no tool or instance", subject)
		}
		r.Instance = instance
		rest = kind
		if kind == "mcp" {
			rest = "mcp." + tool
		} else if method, ok := strings.CutPrefix(kind, "call."); ok {
			rest = "call." + tool + "." + method
		}
	}
	switch {
	case strings.HasPrefix(rest, "call."):
		tool, method, ok := strings.Cut(strings.TrimPrefix(rest, "call."), ".")
		if !ok {
			return r, fmt.Errorf("wire: request subject %q: no method", subject)
		}
		r.Tool, r.Method = tool, method
	case strings.HasPrefix(rest, "mcp."):
		r.Tool, r.MCP, r.Method = strings.TrimPrefix(rest, "mcp."), true, h.Get(HeaderMethod)
	default:
		return r, fmt.Errorf("wire: %q is no request subject under %q", subject, s.prefix())
	}
	r.CallID = h.Get(HeaderCallID)
	r.RequestID = h.Get(HeaderRequestID)
	r.Account = h.Get(HeaderAccount)
	r.Session = h.Get(HeaderSession)
	r.Progress = h.Get(HeaderProgress) != ""
	r.Post = h.Get(HeaderPost)
	r.LogLevel = h.Get(HeaderLogLevel)
	if v := h.Get(HeaderClientCapabilityObject); v != "" {
		r.ClientCapabilityObject = []byte(v)
	}
	if caps, ok := h[HeaderClientCapabilities]; ok {
		r.ClientCapabilities = []string{}
		if len(caps) > 0 && caps[0] != "" {
			r.ClientCapabilities = strings.Split(caps[0], ",")
		}
	}
	if v := h.Get(HeaderDeadline); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return r, fmt.Errorf("wire: %s %q: not unix milliseconds", HeaderDeadline, v)
		}
		r.Deadline = time.UnixMilli(ms)
	}
	return r, nil
}

// Declared reports whether the session's client declared capability: true when its
// capabilities are unknown, so that the client answers for itself.
func (r *Request) Declared(capability string) bool {
	return r.ClientCapabilities == nil || slices.Contains(r.ClientCapabilities, capability)
}

// MessageSize is the number of bytes msg takes against the server's max_payload:
// its data plus its encoded headers.
func MessageSize(msg *nats.Msg) int64 {
	size := int64(len(msg.Data))
	if len(msg.Header) > 0 {
		size += int64(len("NATS/1.0\r\n\r\n"))
		for k, vs := range msg.Header {
			for _, v := range vs {
				size += int64(len(k) + len(": ") + len(v) + len("\r\n"))
			}
		}
	}
	return size
}
