package core

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Request is one JSON-RPC request of a client, with what is known about where it
// came from and where its notifications go.
type Request struct {
	Principal registry.Principal
	Tool      string
	Session   *registry.Session // nil on 2026-07-28, and before initialize on Streamable HTTP
	Stateless bool              // of a stateless revision (2026-07-28): no session, metadata in params._meta
	Meta      RequestMeta
	RPC       *jsonrpc.Request
	// Notify sends a notification about this request to its client; nil drops them
	// (a JSON response has no room for any).
	Notify func(msg []byte)
	// ReplyTo is where the tool answers a tools/call answered with a stream: the event
	// log, so that any edge can finish the stream should this one be lost.
	ReplyTo string
	// Post names the POST stream the request is answered on, when it is.
	Post string
	// Transport names the door the request came in by, for the audit trail (audit's
	// Transport names).
	Transport string
	// LargeAnswers says the transport writes a tools/call result past one message as
	// it is read from the payloads bucket (AnswerRequest, ResultEvent,
	// ResponseRecord): Handle then returns no result bytes for it.
	LargeAnswers bool
	// Args are the arguments of a tools/call that came past one message, stored as
	// they arrived (Posted.Args); RPC holds {} in their place.
	Args *StoredArgs

	large *largeResult // the result of a tools/call, when it is large (LargeAnswers)

	call    *mcp.CallToolParamsRaw // the params of a tools/call, once read
	callErr error
	// answeredBy is the worker instance that answered a tools/call, when it named
	// itself (wire.HeaderInstance): the one holding a task its answer made.
	answeredBy string
}

// callParams reads the params of a tools/call once, for every step that looks at
// them.
func (r *Request) callParams() (*mcp.CallToolParamsRaw, error) {
	if r.call == nil && r.callErr == nil {
		r.call = new(mcp.CallToolParamsRaw)
		if scanCallParams(r.RPC.Params, r.call) {
			return r.call, nil
		}
		*r.call = mcp.CallToolParamsRaw{}
		if err := json.Unmarshal(r.RPC.Params, r.call); err != nil {
			r.call, r.callErr = nil, InvalidParams("tools/call: %v", err)
		}
	}
	return r.call, r.callErr
}

// MetaVersion is the protocol revision the request's params._meta names, which
// requests of 2026-07-28 carry; "" for none.
func (r *Request) MetaVersion() string {
	if r.RPC.Method == MethodToolsCall {
		// Read once, for every step that needs the params.
		if params, err := r.callParams(); err == nil {
			v, _ := params.Meta[mcp.MetaKeyProtocolVersion].(string)
			return v
		}
	}
	return ReadMeta(r.RPC.Params).ProtocolVersion
}

// Handle answers a request and returns the result's JSON. Errors are for RPCError.
func (s *Server) Handle(ctx context.Context, r *Request) (json.RawMessage, error) {
	var result any
	var err error
	// A request of 2026-07-28 naming a method that revision removed never gets
	// here (package stateless answers it).
	switch r.RPC.Method {
	case MethodInitialize:
		result, err = s.initialize(ctx, r)
	case MethodPing:
		result = struct{}{}
	case methodDiscover:
		if !r.Stateless {
			// A legacy session has negotiated already; a client probing for
			// 2026-07-28 over the legacy SSE transport falls back on this.
			return nil, MethodNotFound(r.RPC.Method, http.StatusOK)
		}
		result, err = s.discover(r)
	case methodToolsList:
		result, err = s.listTools(ctx, r)
	case MethodToolsCall:
		result, err = s.callTool(ctx, r)
		if lr, ok := result.(*largeResult); ok && err == nil {
			r.large = lr // written by the transport as it is read
			return nil, nil
		}
	case methodSetLevel:
		result, err = s.setLevel(ctx, r)
	default:
		if s.answersKeptTask(r) {
			result, err = s.keptTask(ctx, r)
			break
		}
		if s.forwards(r) {
			result, err = s.forward(ctx, r)
			break
		}
		status := http.StatusOK
		if r.Stateless {
			status = http.StatusNotFound
		}
		return nil, MethodNotFound(r.RPC.Method, status)
	}
	if err != nil {
		return nil, err
	}
	return s.MarshalResult(result, r)
}

// MarshalResult marshals a result in the shape of the request's revision: on
// 2026-07-28 every result says whether it is complete (unless the tool said it needs
// input) and who produced it; cacheable results carry the caching hints of 2026-07-28
// and only there.
func (s *Server) MarshalResult(result any, r *Request) (json.RawMessage, error) {
	b, err := json.Marshal(result)
	if err != nil {
		return nil, fmt.Errorf("sse: encode %s result: %w", r.RPC.Method, err)
	}
	isCacheable := cacheable[r.RPC.Method]
	if !r.Stateless && !isCacheable {
		return b, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, fmt.Errorf("sse: encode %s result: %w", r.RPC.Method, err)
	}
	if isCacheable {
		shapeCacheable(fields, r.Stateless)
	}
	if r.Stateless {
		meta := map[string]json.RawMessage{}
		if m, ok := fields["_meta"]; ok {
			_ = json.Unmarshal(m, &meta)
		}
		meta[mcp.MetaKeyServerInfo], _ = json.Marshal(s.serverInfo(s.toolTitle(r)))
		fields["_meta"], _ = json.Marshal(meta)
		var rt string
		if json.Unmarshal(fields["resultType"], &rt) != nil || rt == "" {
			fields["resultType"] = json.RawMessage(`"complete"`)
		}
	}
	return json.Marshal(fields)
}

func (s *Server) toolTitle(r *Request) string {
	if t, err := s.view.Snapshot().Tool(r.Principal, r.Tool); err == nil {
		if t.Tool.Title != "" {
			return t.Tool.Title
		}
		return t.Tool.ID
	}
	return r.Tool
}

// initializeResult answers initialize. Capabilities are raw: they carry what the
// tool's MCP server declared beyond what the SDK's types know (tasks).
type initializeResult struct {
	ProtocolVersion string              `json:"protocolVersion"`
	Capabilities    json.RawMessage     `json:"capabilities"`
	ServerInfo      *mcp.Implementation `json:"serverInfo"`
	Instructions    string              `json:"instructions,omitempty"`
}

func (s *Server) initialize(ctx context.Context, r *Request) (*initializeResult, error) {
	var params struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ClientInfo      json.RawMessage `json:"clientInfo"`
	}
	if len(r.RPC.Params) > 0 {
		if err := json.Unmarshal(r.RPC.Params, &params); err != nil {
			return nil, InvalidParams("initialize: %v", err)
		}
	}
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	if err != nil {
		return nil, err
	}
	version := negotiate(params.ProtocolVersion)
	if r.Session == nil {
		sess, err := s.NewSession(ctx, r.Principal, r.Tool, version, params.ClientInfo, params.Capabilities, false)
		if err != nil {
			return nil, err
		}
		r.Session = sess
	} else {
		err := s.updateSession(ctx, r.Session, func(sess *registry.Session) {
			sess.ProtocolVersion, sess.ClientInfo, sess.Capabilities = version, params.ClientInfo, params.Capabilities
		})
		if err != nil {
			return nil, err
		}
	}
	title := t.Tool.Title
	if title == "" {
		title = t.Tool.ID
	}
	return &initializeResult{
		ProtocolVersion: version,
		Capabilities:    s.capabilities(t.Tool, false),
		ServerInfo:      s.serverInfo(title),
		Instructions:    t.Tool.Description,
	}, nil
}

// discoverResult answers server/discover, with raw capabilities as initialize.
type discoverResult struct {
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions,omitempty"`
}

func (s *Server) discover(r *Request) (*discoverResult, error) {
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	if err != nil {
		return nil, err
	}
	return &discoverResult{SupportedVersions: SupportedVersions, Capabilities: s.capabilities(t.Tool, true), Instructions: t.Tool.Description}, nil
}

// MCPName is a method's name as MCP clients see it.
func MCPName(m *registry.Method) string {
	if m.MCPName != "" {
		return m.MCPName
	}
	return m.Name
}

func (s *Server) listTools(ctx context.Context, r *Request) (any, error) {
	t, err := s.view.Snapshot().Tool(r.Principal, r.Tool)
	if err != nil {
		return nil, err
	}
	if t.Tool.Capabilities.SessionTools && r.Session != nil && !r.Stateless {
		if list, err := s.sessionTools(ctx, r, t.Tool); err == nil {
			return list, nil
		} else {
			s.log.Debug("the tool did not list its tools for the session; listing its methods", "session", r.Session.ID, "err", err)
		}
	}
	tools := make([]*mcp.Tool, 0, len(t.Tool.Methods))
	for i := range t.Tool.Methods {
		m := &t.Tool.Methods[i]
		mt := &mcp.Tool{Name: MCPName(m), Title: m.Title, Description: m.Description, InputSchema: json.RawMessage(`{"type":"object"}`)}
		if len(m.InputSchema) > 0 {
			mt.InputSchema = m.InputSchema
		}
		if len(m.OutputSchema) > 0 {
			mt.OutputSchema = m.OutputSchema
		}
		if len(m.Annotations) > 0 {
			var a mcp.ToolAnnotations
			if json.Unmarshal(m.Annotations, &a) == nil {
				mt.Annotations = &a
			}
		}
		tools = append(tools, mt)
	}
	if !r.Stateless && s.keepsTasks(t.Tool, false) {
		return withTaskSupport(tools, t.Tool.Methods), nil
	}
	return &mcp.ListToolsResult{Tools: tools}, nil
}

// sessionTools asks the tool's workers which of its tools the session's client may
// see, and lists them as the server behind the tool describes them, keeping only those
// that are methods of the tool.
func (s *Server) sessionTools(ctx context.Context, r *Request, t *registry.Tool) (any, error) {
	raw, err := s.forward(ctx, r)
	if err != nil {
		return nil, err
	}
	var listed struct {
		Tools []json.RawMessage `json:"tools"`
	}
	if err := json.Unmarshal(raw, &listed); err != nil {
		return nil, fmt.Errorf("sse: the tool's tools/list: %w", err)
	}
	known := map[string]bool{}
	for i := range t.Methods {
		known[MCPName(&t.Methods[i])] = true
	}
	out := struct {
		Tools []json.RawMessage `json:"tools"`
	}{Tools: []json.RawMessage{}}
	for _, tool := range listed.Tools {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(tool, &named) == nil && known[named.Name] {
			out.Tools = append(out.Tools, tool)
		}
	}
	return out, nil
}

func (s *Server) setLevel(ctx context.Context, r *Request) (any, error) {
	var params mcp.SetLoggingLevelParams
	if err := json.Unmarshal(r.RPC.Params, &params); err != nil || !slices.Contains(logLevels, string(params.Level)) {
		return nil, InvalidParams("logging/setLevel: level must be one of %v", logLevels)
	}
	if err := s.updateSession(ctx, r.Session, func(sess *registry.Session) { sess.LogLevel = string(params.Level) }); err != nil {
		return nil, err
	}
	// A tool whose own MCP server logs (a bridged one) is told too, so that the
	// messages its server sends outside any call are filtered as the client asked.
	if t, err := s.view.Snapshot().Tool(r.Principal, r.Tool); err == nil {
		if c := t.Tool.Capabilities; c.Logging && (c.SessionTools || c.Resources || c.Prompts || c.Completions) {
			if _, err := s.forward(ctx, r); err != nil {
				s.log.Debug("the tool did not take the log level", "session", r.Session.ID, "err", err)
			}
		}
	}
	return struct{}{}, nil
}

// Notification takes a client's notification. Only cancellation needs doing.
func (s *Server) Notification(r *Request) {
	if r.RPC.Method != notifyCancelled || r.Session == nil {
		return
	}
	var params struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(r.RPC.Params, &params) != nil {
		return
	}
	id, err := jsonrpc.MakeID(params.RequestID)
	if err != nil || !id.IsValid() {
		return
	}
	callID := callRequestID(r.Session.ID, id)
	if s.calls.cancel(callID) {
		return
	}
	// The call runs on another edge, which follows the cancel subject as the
	// worker does.
	if err := s.nc.Publish(s.subj.Cancel(r.Tool, callID), nil); err != nil {
		s.log.Warn("publishing cancel", "session", r.Session.ID, "err", err)
	}
}

// RelayAnswer hands a client's answer to a server-initiated request to the worker
// waiting for it, wherever it runs.
func (s *Server) RelayAnswer(sess *registry.Session, resp *jsonrpc.Response, raw []byte) error {
	var id string
	switch v := resp.ID.Raw().(type) {
	case string:
		id = v
	case int64:
		id = fmt.Sprint(v)
	}
	if !wire.ValidToken(id) {
		return invalidRequest("response id %v answers no request of this server", resp.ID.Raw())
	}
	msg := nats.NewMsg(s.subj.SessionReply(sess.Tool, sess.ID, id))
	msg.Data = raw
	if err := s.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("sse: relay answer: %w", err)
	}
	return nil
}

// detached is a context for work that must finish even when the request that caused
// it has gone: appending an event or a response to the log.
func (s *Server) detached() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, 10*time.Second)
}
