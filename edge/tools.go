package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// ToolList is the answer of GET /get-tools.
type ToolList struct {
	Tools []ToolInfo `json:"tools"`
}

// ToolInfo is one tool as a caller sees it: GET /tools/{tool} answers one, GET
// /get-tools a list of them.
type ToolInfo struct {
	ID          string `json:"id"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	Version     string `json:"version,omitempty"`
	Availability
	Links
	// Connection is whether the caller's account has set every value the tool's
	// connection requires (absent from an administrator's view of a tool).
	Connection *ConnectionState `json:"connection,omitempty"`
	Methods    []MethodInfo     `json:"methods"`
}

// Availability is whether a tool can take calls now: how many of its workers are
// present, and so its status.
type Availability struct {
	// Status is "online" while at least one worker of the tool is present.
	Status    string `json:"status"`
	Instances int    `json:"instances"`
}

// Links are the addresses of one account's connection to a tool.
type Links struct {
	SSEURL     string `json:"sse_url,omitempty"`     // MCP, legacy HTTP+SSE transport
	MCPURL     string `json:"mcp_url,omitempty"`     // MCP, Streamable HTTP transport
	APIURL     string `json:"api_url"`               // the direct tool API: POST {api_url}/{method}
	OpenAPIURL string `json:"openapi_url,omitempty"` // the direct tool API's OpenAPI document
}

// MethodInfo is one method of a tool.
type MethodInfo struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
}

// Tool statuses.
const (
	StatusOnline  = "online"
	StatusOffline = "offline"
)

// anyObject is the input schema of a method that declares none: it takes any object.
var anyObject = json.RawMessage(`{"type":"object"}`)

// ToolAvailability is tool's availability in snap. The edge's answers and the
// dashboard both tell a tool's status by it.
func ToolAvailability(snap *registry.Snapshot, tool string) Availability {
	a := Availability{Status: StatusOffline, Instances: snap.Instances(tool)}
	if a.Instances > 0 {
		a.Status = StatusOnline
	}
	return a
}

// ToolLinks are the addresses of tool on the edge whose base URL is base (without a
// trailing slash): its direct API and, given the link token of an account's
// connection to it (empty for none), its MCP links. The edge's answers and the
// dashboard both build them here, so that they never show different addresses.
func ToolLinks(base, tool, token string) Links {
	l := Links{APIURL: base + "/tools/" + tool, OpenAPIURL: base + "/tools/" + tool + "/openapi.json"}
	if token != "" {
		l.MCPURL = base + "/mcp/" + token
		l.SSEURL = l.MCPURL + "/sse"
	}
	return l
}

// ToolCallURL is where method of tool is called on the edge whose base URL is base.
func ToolCallURL(base, tool, method string) string {
	return base + "/tool-call/" + tool + "/" + method
}

// links are the addresses of account's connection to tool; without a connection (an
// administrator's view of a tool) only the API URLs.
func (e *Edge) links(conn *registry.Connection, tool string) Links {
	token := ""
	if conn != nil {
		token = e.signer.Token(conn.Account, conn.Tool, conn.LinkNonce)
	}
	return ToolLinks(e.base, tool, token)
}

func (e *Edge) toolInfo(snap *registry.Snapshot, t *registry.Tool, conn *registry.Connection) ToolInfo {
	info := ToolInfo{
		ID: t.ID, Title: t.Title, Description: t.Description, Version: t.Version,
		Availability: ToolAvailability(snap, t.ID), Links: e.links(conn, t.ID),
		Methods: make([]MethodInfo, len(t.Methods)),
	}
	for i, m := range t.Methods {
		in := m.InputSchema
		if len(in) == 0 {
			in = anyObject
		}
		info.Methods[i] = MethodInfo{Name: m.Name, Title: m.Title, Description: m.Description, InputSchema: in, OutputSchema: m.OutputSchema}
	}
	return info
}

// getTools lists the tools the caller's account may use, with its links to each.
func (e *Edge) getTools(c *gin.Context) {
	p := principal(c)
	snap := e.view.Snapshot()
	entries := snap.Tools(p)
	list := ToolList{Tools: make([]ToolInfo, 0, len(entries))}
	for _, t := range entries {
		list.Tools = append(list.Tools, e.accountToolInfo(c, snap, p.Account, t.Tool))
	}
	c.JSON(http.StatusOK, list)
}

// getTool is the direct tool API's description of one tool: the same shape as one
// entry of get-tools.
func (e *Edge) getTool(c *gin.Context) {
	p := principal(c)
	snap := e.view.Snapshot()
	t, err := snap.Tool(p, c.Param("tool"))
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e.accountToolInfo(c, snap, p.Account, t.Tool))
}

// accountToolInfo is t as account sees it: with its links and its connection's state.
func (e *Edge) accountToolInfo(c *gin.Context, snap *registry.Snapshot, account string, t *registry.Tool) ToolInfo {
	info := e.toolInfo(snap, t, snap.Connection(account, t.ID))
	st := e.connectionState(c, account, t)
	info.Connection = &st
	e.relist(snap, account, t.ID, st)
	return info
}

// toolCall runs one method of one tool: POST /tool-call/{tool}/{method} and POST
// /tools/{tool}/{method} alike. The tool's status, content type and bytes are the
// answer; any failure before or on the way is an envelope.
func (e *Edge) toolCall(c *gin.Context) {
	tool, method := c.Param("tool"), c.Param("method")
	start := time.Now()
	e.metrics.inFlight.Inc()
	defer e.metrics.inFlight.Dec()
	code := "ok"
	var toolTime time.Duration // the bus round trip, once the tool answered
	async := false             // a call started to outlive the request: it counts itself
	defer func() {
		if async {
			return
		}
		if v := c.GetString(ctxErrorCode); v != "" {
			code = v
		}
		t, m := e.metricLabels(tool, method)
		e.metrics.observe(t, m, code, time.Since(start), toolTime)
	}()

	call := &gateway.Call{Principal: principal(c), Tool: tool, Method: method, RequestID: requestID(c),
		Transport: audit.TransportREST, Arrived: start}
	if strings.HasPrefix(c.FullPath(), "/tools/") {
		call.Transport = audit.TransportDirect
	}
	// What is refused before the gateway is recorded by it too (Refuse).
	refuse := func(err error) { e.fail(c, e.gw.Refuse(c.Request.Context(), call, err)) }
	// The order of DESIGN.md: visibility first, so a caller learns nothing of a tool
	// it may not see from how its body is judged.
	var err error
	if call.Entry, err = e.view.Snapshot().Method(call.Principal, tool, method); err != nil {
		refuse(e.gw.Unlisted(c.Request.Context(), call, err))
		return
	}
	if !jsonContentType(c.Request.Header.Get("Content-Type")) {
		refuse(errUnsupportedType)
		return
	}
	if call.Timeout, err = e.askedTimeout(c.Request); err != nil {
		refuse(err)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	defer putBody(buf)
	// A call its account's rules hold for approval is answered 202 at once, as a
	// call made with Prefer: respond-async: a person may take minutes to decide.
	_, held := e.gw.ApprovalRule(call)
	startAsync := e.cfg.Calls != nil && (held || respondAsync(c.Request))
	if err := e.readParams(c, call, buf, startAsync); err != nil {
		refuse(err)
		return
	}
	if call.Payload != nil {
		defer e.gw.Payloads().Delete(context.WithoutCancel(c.Request.Context()), tool, *call.Payload)
	} else if len(bytes.TrimSpace(call.Params)) == 0 {
		call.Params = emptyObject // a method without parameters may be called without a body
	}
	if startAsync {
		async = e.startCall(c, call)
		return
	}
	call.StreamReply = e.gw.Payloads() != nil
	reply, err := e.gw.Call(c.Request.Context(), call)
	if err != nil {
		var te *wire.ToolError
		if errors.As(err, &te) && te.Elapsed > 0 { // the tool answered, with an error
			toolTime = te.Elapsed
			c.Header("Server-Timing", serverTiming(time.Since(start), toolTime))
		}
		e.fail(c, err)
		return
	}
	toolTime = reply.Elapsed
	c.Writer.Header()["Server-Timing"] = []string{serverTiming(time.Since(start), toolTime)}
	if reply.Payload != nil {
		e.writePayloadAnswer(c, call, reply)
		return
	}
	writeToolAnswer(c.Writer, reply.Status, reply.ContentType, reply.Data)
}

// writeToolAnswer answers with a tool's status, content type and bytes as the tool
// gave them.
func writeToolAnswer(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	toolAnswerHeaders(h, contentType)
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// toolAnswerHeaders are the headers of a tool's answer, before its length.
func toolAnswerHeaders(h http.Header, contentType string) {
	if contentType != "" {
		h.Set("Content-Type", contentType)
	} else {
		h["Content-Type"] = nil // as the tool gave it: none, and no sniffing either
	}
	// The bytes are the tool's, served from the gateway's origin: never let a browser
	// run them as a page of that origin.
	h["X-Content-Type-Options"] = nosniff
	h["Content-Security-Policy"] = sandbox
}

var emptyObject = []byte("{}")

// The values of the headers every tool's answer carries, shared by all answers rather
// than made for each (net/http only reads them).
var (
	nosniff = []string{"nosniff"}
	sandbox = []string{"sandbox"}
)

// metricLabels keeps metric labels to names the registry knows.
func (e *Edge) metricLabels(tool, method string) (string, string) {
	t := e.view.Snapshot().RawTool(tool)
	if t == nil {
		return "unknown", "unknown"
	}
	if t.Method(method) == nil {
		return tool, "unknown"
	}
	return tool, method
}

// jsonContentType accepts application/json with any parameters (charset=utf-8), and a
// request that names no type at all: many clients of a JSON API do not bother.
func jsonContentType(v string) bool {
	if v == "" || v == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(v)
	return err == nil && mt == "application/json"
}

// askedTimeout reads the caller's deadline header: a Go duration ("2s", "1500ms") or
// a whole number of milliseconds. The gateway still caps it by the method's timeout
// and the server's maximum.
func (e *Edge) askedTimeout(r *http.Request) (time.Duration, error) {
	v := strings.TrimSpace(r.Header.Get(e.cfg.TimeoutHeader))
	if v == "" {
		return 0, nil
	}
	var d time.Duration
	if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
		d = time.Duration(ms) * time.Millisecond
	} else if d, err = time.ParseDuration(v); err != nil {
		d = 0
	}
	if d <= 0 {
		return 0, newHTTPError(gateway.KindInvalidRequest,
			e.cfg.TimeoutHeader+": must be a positive duration, such as 2s, 1500ms or 1500 (milliseconds)")
	}
	return d, nil
}

// serverTiming is a tool call's Server-Timing header (W3C Server Timing): "tool", the
// round trip on the bus (the worker's time plus NATS's), and "gateway", the rest of the
// edge's handling of the call from routing to the reply (visibility, body, schema, rate
// limit, encoding). Durations are in milliseconds, to the microsecond. It tells a caller
// whether a slow call was the tool or the gateway, and browsers' developer tools show it.
func serverTiming(total, tool time.Duration) string {
	b := make([]byte, 0, 48)
	b = append(b, "gateway;dur="...)
	b = appendMillis(b, max(total-tool, 0))
	b = append(b, ", tool;dur="...)
	b = appendMillis(b, tool)
	return string(b)
}

func appendMillis(b []byte, d time.Duration) []byte {
	return strconv.AppendFloat(b, float64(d.Microseconds())/1000, 'f', 3, 64)
}
