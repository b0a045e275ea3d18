package core

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/jsonscan"
	"github.com/toolgate/toolgate/internal/mcphttp"
	"github.com/toolgate/toolgate/registry"
)

// Protocol revisions this package speaks.
const (
	Version20241105 = "2024-11-05" // HTTP+SSE
	version20250326 = "2025-03-26" // Streamable HTTP
	version20250618 = "2025-06-18" // MCP-Protocol-Version header
	version20251125 = "2025-11-25" // the last revision with initialize and sessions
	Version20260728 = "2026-07-28" // stateless: no initialize, no sessions
)

// SupportedVersions is newest first, as server/discover lists them.
var SupportedVersions = []string{Version20260728, version20251125, version20250618, version20250326, Version20241105}

// SessionVersions can be negotiated with initialize.
var SessionVersions = []string{version20251125, version20250618, version20250326, Version20241105}

// IsStateless reports whether v is a stateless revision: 2026-07-28 or later.
// Revisions are dates, so they compare as strings; a later unknown revision is taken
// for stateless too.
func IsStateless(v string) bool { return v >= Version20260728 }

// negotiate answers an initialize that asks for v: v itself when it is a revision
// with initialize, else the newest such revision.
func negotiate(v string) string {
	if slices.Contains(SessionVersions, v) {
		return v
	}
	return version20251125
}

// MCP methods and notifications.
const (
	MethodInitialize          = "initialize"
	MethodPing                = "ping"
	methodToolsList           = "tools/list"
	MethodToolsCall           = "tools/call"
	methodSetLevel            = "logging/setLevel"
	methodDiscover            = "server/discover"
	MethodSubscriptionsListen = "subscriptions/listen"

	notifyInitialized  = "notifications/initialized"
	notifyCancelled    = "notifications/cancelled"
	notifyProgress     = "notifications/progress"
	notifyMessage      = "notifications/message"
	NotifyToolsChanged = "notifications/tools/list_changed"
	// The lists' change notifications, by wire list name.
	NotifyPromptsChanged   = "notifications/prompts/list_changed"
	NotifyResourcesChanged = "notifications/resources/list_changed"
	NotifySubscriptionAck  = "notifications/subscriptions/acknowledged"
)

// RemovedIn2026 are the requests 2026-07-28 dropped: a request of that revision
// naming one is answered as any unknown method is.
var RemovedIn2026 = map[string]bool{
	MethodInitialize: true, MethodPing: true, methodSetLevel: true,
	"resources/subscribe": true, "resources/unsubscribe": true,
}

// HTTP headers of the MCP transports, as the client side (internal/mcphttp) names them.
const (
	HeaderSessionID       = mcphttp.HeaderSessionID
	HeaderProtocolVersion = mcphttp.HeaderProtocolVersion
	HeaderMethod          = mcphttp.HeaderMethod
	HeaderName            = mcphttp.HeaderName
	HeaderLastEventID     = mcphttp.HeaderLastEventID
)

// Log levels of notifications/message, least severe first (RFC 5424 order).
var logLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// logAtLeast reports whether level is at or above min. Unknown levels count as info.
func logAtLeast(level, min string) bool {
	rank := func(l string) int {
		if i := slices.Index(logLevels, l); i >= 0 {
			return i
		}
		return 1
	}
	return rank(level) >= rank(min)
}

// RequestMeta is what a 2026-07-28 request says about itself in params._meta.
type RequestMeta struct {
	ProtocolVersion    string          `json:"io.modelcontextprotocol/protocolVersion"`
	ClientInfo         json.RawMessage `json:"io.modelcontextprotocol/clientInfo"`
	ClientCapabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	LogLevel           string          `json:"io.modelcontextprotocol/logLevel"`
	ProgressToken      any             `json:"progressToken"`
}

// HasMeta reports whether params carry a _meta member at all.
func HasMeta(params json.RawMessage) bool {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	return json.Unmarshal(params, &p) == nil && len(p.Meta) > 0 && string(p.Meta) != "null"
}

// ReadMeta reads params._meta; a missing or malformed one reads as empty.
func ReadMeta(params json.RawMessage) RequestMeta {
	var p struct {
		Meta RequestMeta `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	return p.Meta
}

// wireMessage is a JSON-RPC message as it arrives.
type wireMessage struct {
	Version string          `json:"jsonrpc"`
	ID      any             `json:"id"`
	Method  json.RawMessage `json:"method"`
	Params  json.RawMessage `json:"params"`
	Result  json.RawMessage `json:"result"`
	Error   *jsonrpc.Error  `json:"error"`
}

// decodeMessage reads one JSON-RPC message as jsonrpc.DecodeMessage does: a plain one
// by scanMessage, any other with the standard library's decoder (the SDK's allocates
// a 64 KiB buffer per message, which made it most of what the edge allocated per
// call). The message's params and result may be slices of data.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	var w wireMessage
	if !scanMessage(data, &w) {
		w = wireMessage{}
		if err := json.Unmarshal(data, &w); err != nil {
			return nil, err
		}
	}
	return w.message()
}

// message is the JSON-RPC message w holds.
func (w *wireMessage) message() (jsonrpc.Message, error) {
	if w.Version != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected \"2.0\"", w.Version)
	}
	id, err := jsonrpc.MakeID(w.ID)
	if err != nil {
		return nil, err
	}
	if len(w.Method) > 0 {
		method, plain := jsonscan.PlainString(w.Method)
		if !plain {
			if err := json.Unmarshal(w.Method, &method); err != nil {
				return nil, err
			}
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: w.Params}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("a response without an id")
	}
	resp := &jsonrpc.Response{ID: id, Result: w.Result}
	if w.Error != nil {
		resp.Error = w.Error
	}
	return resp, nil
}

// EncodeResult is the wire form of a successful response. The result is compact
// JSON of this package's own making, so it is framed, not encoded again.
func EncodeResult(id jsonrpc.ID, result json.RawMessage) []byte {
	b := make([]byte, 0, len(result)+64)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	switch v := id.Raw().(type) {
	case int64:
		b = strconv.AppendInt(b, v, 10)
	case string:
		s, _ := json.Marshal(v)
		b = append(b, s...)
	default:
		b, _ = jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Result: result})
		return b
	}
	b = append(b, `,"result":`...)
	b = append(b, result...)
	return append(b, '}')
}

// EncodeError is the wire form of an error response; without a valid id the "id"
// member is left out, as MCP allows for errors about unreadable messages.
func EncodeError(id jsonrpc.ID, e *jsonrpc.Error) []byte {
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Response{ID: id, Error: e})
	return b
}

// EncodeNotification is the wire form of a notification.
func EncodeNotification(method string, params any) []byte {
	p, _ := json.Marshal(params)
	b, _ := jsonrpc.EncodeMessage(&jsonrpc.Request{Method: method, Params: p})
	return b
}

// serverInfo identifies the gateway and, through the title, the tool.
func (s *Server) serverInfo(title string) *mcp.Implementation {
	return &mcp.Implementation{Name: s.cfg.ServerName, Title: title, Version: s.cfg.ServerVersion}
}

// capabilities are what a link offers, as JSON: tools that may change and logging
// always; resources, prompts and completion when the tool's workers serve them (they
// answer those requests themselves, on tg.mcp.<tool>), with what the MCP server
// behind the tool said of them; and what else that server declared (tasks,
// extensions), which the gateway passes on. At 2026-07-28 the features that revision
// dropped are left out: resource subscriptions and the tasks capability of
// 2025-11-25; the list changes of prompts and resources the server declared stay,
// which its workers pass on to subscriptions/listen streams (ListChangesOf).
func capabilities(t *registry.Tool, stateless bool) json.RawMessage {
	c := map[string]json.RawMessage{}
	if len(t.Capabilities.MCP) > 0 {
		_ = json.Unmarshal(t.Capabilities.MCP, &c)
	}
	feature := func(name string, on bool, fallback string, drop ...string) {
		if !on {
			delete(c, name)
			return
		}
		f := map[string]json.RawMessage{}
		if json.Unmarshal(c[name], &f) != nil || f == nil {
			f = map[string]json.RawMessage{}
			_ = json.Unmarshal([]byte(fallback), &f)
		}
		for _, k := range drop {
			delete(f, k)
		}
		c[name], _ = json.Marshal(f)
	}
	var dropped []string // what a stateless revision has no use for
	if stateless {
		dropped = []string{"subscribe"}
		delete(c, "tasks")
	}
	if !stateless || !carriesTasksExtension(t.Capabilities) {
		// The tasks extension is a 2026-07-28 one, and a link carries it only as
		// tasks.go says.
		dropExtension(c, tasksExtension)
	}
	c["tools"] = json.RawMessage(`{"listChanged":true}`)
	c["logging"] = json.RawMessage(`{}`)
	feature("resources", t.Capabilities.Resources, `{"subscribe":true}`, dropped...)
	feature("prompts", t.Capabilities.Prompts, `{}`, dropped...)
	feature("completions", t.Capabilities.Completions, `{}`)
	b, _ := json.Marshal(c)
	return b
}

// ListChangesOf reports which lists of t besides its tools a subscriptions/listen
// stream may hear change: prompts and resources, when the tool serves them and its
// server declared their listChanged.
func ListChangesOf(t *registry.Tool) (prompts, resources bool) {
	var caps struct {
		Prompts, Resources struct {
			ListChanged bool `json:"listChanged"`
		}
	}
	if len(t.Capabilities.MCP) > 0 && json.Unmarshal(t.Capabilities.MCP, &caps) != nil {
		return false, false
	}
	return t.Capabilities.Prompts && caps.Prompts.ListChanged, t.Capabilities.Resources && caps.Resources.ListChanged
}

// dropExtension removes one extension from capabilities c, and the extensions
// object with it when it is left empty.
func dropExtension(c map[string]json.RawMessage, name string) {
	raw, ok := c["extensions"]
	if !ok {
		return
	}
	var ext map[string]json.RawMessage
	if json.Unmarshal(raw, &ext) != nil {
		return
	}
	if _, ok := ext[name]; !ok {
		return
	}
	delete(ext, name)
	if len(ext) == 0 {
		delete(c, "extensions")
		return
	}
	c["extensions"], _ = json.Marshal(ext)
}

// cacheable are the results 2026-07-28 gives caching hints (ttlMs, cacheScope),
// which the revisions before it do not have.
var cacheable = map[string]bool{
	methodToolsList: true, "prompts/list": true, "resources/list": true,
	"resources/templates/list": true, "resources/read": true, methodDiscover: true,
}

// shapeCacheable gives a cacheable result the hints its revision wants: at
// 2026-07-28 a ttlMs and a cacheScope of public or private (private unless the tool
// said public: what a link reaches is the link's account's), before it neither.
func shapeCacheable(fields map[string]json.RawMessage, stateless bool) {
	if !stateless {
		delete(fields, "ttlMs")
		delete(fields, "cacheScope")
		return
	}
	var ttl float64
	if json.Unmarshal(fields["ttlMs"], &ttl) != nil || ttl < 0 {
		fields["ttlMs"] = json.RawMessage(`0`)
	}
	var scope string
	if json.Unmarshal(fields["cacheScope"], &scope) != nil || scope != "public" && scope != "private" {
		fields["cacheScope"] = json.RawMessage(`"private"`)
	}
}
