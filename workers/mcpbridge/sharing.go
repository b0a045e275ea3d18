package mcpbridge

//lint:file-ignore SA1019 a client that declares roots may be asked for them, which MCP deprecates only from 2026-07-28.

import (
	"encoding/json"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/workers"
)

// How MCP client sessions map to upstream sessions (Config.UpstreamSessions).
const (
	// UpstreamAuto decides from what the server and each client declare (see
	// resolveSharing and (*Bridge).own).
	UpstreamAuto = "auto"
	// UpstreamShared spreads every client session's requests over the pool of
	// Config.Sessions upstream sessions (for a stdio server, processes).
	UpstreamShared = "shared"
	// UpstreamPerSession gives every client session an upstream session of its own,
	// at most Config.ClientSessions at once.
	UpstreamPerSession = "per-session"
)

// sharing is how the running bridge maps client sessions to upstream sessions.
type sharing int

const (
	// ownAlways: every client session has its own upstream session.
	ownAlways sharing = iota
	// ownNever: every client session's requests go to the pool.
	ownNever
	// ownIfAsked: a client session the server may ask something (it declared
	// sampling, elicitation or roots) has its own; the others share the pool.
	ownIfAsked
)

// resolveSharing is the mapping for cfg's setting, given what the server said in its
// initialize (caps, and raw as it sent them) and whether it named a session.
//
// By default (UpstreamAuto) a client session shares the pool unless something would
// tie what the server does to that one client:
//   - a remote server that names no session keeps none: every client shares;
//   - a server that declares logging keeps a log level per session and may log
//     outside a call, which only a client's own session can deliver; one that
//     declares resources.subscribe keeps subscriptions per session; one that declares
//     tasks keeps them in the session (for a stdio server, the process) that made
//     them: each client session has its own;
//   - a server may ask a client (sampling, elicitation, roots) only when the client
//     declared that capability, and on stdio a request names no call, so on a
//     shared process it could reach the wrong client: a client that declared one
//     has its own upstream session, a client that declared none shares.
//
// list_changed does not decide it: SDKs declare it for every server with tools, and
// on the pool a change the server announces reaches every client of the tool (the
// tool's methods, and each edge's list-changed notifications).
func resolveSharing(setting string, caps *mcp.ServerCapabilities, raw json.RawMessage, namesSession bool) sharing {
	switch setting {
	case UpstreamShared:
		return ownNever
	case UpstreamPerSession:
		return ownAlways
	}
	if !namesSession {
		return ownNever
	}
	if keepsSessionState(caps, raw) {
		return ownAlways
	}
	return ownIfAsked
}

// keepsSessionState says whether the server declares what it keeps per session:
// a log level, subscriptions, tasks.
func keepsSessionState(caps *mcp.ServerCapabilities, raw json.RawMessage) bool {
	if caps != nil && (caps.Logging != nil || (caps.Resources != nil && caps.Resources.Subscribe)) {
		return true
	}
	var declared map[string]json.RawMessage
	if json.Unmarshal(raw, &declared) == nil {
		if _, ok := declared["tasks"]; ok {
			return true
		}
	}
	return false
}

// own says whether c runs on its client session's own upstream session rather than on
// the pool.
func (b *Bridge) own(c *workers.Call) bool {
	if c.Session == "" {
		return false
	}
	b.mu.Lock()
	mode := b.sharing
	b.mu.Unlock()
	switch mode {
	case ownAlways:
		return true
	case ownNever:
		return false
	}
	caps := clientCapabilities(c)
	return caps.Sampling != nil || caps.Elicitation != nil || caps.RootsV2 != nil
}

// String names the mapping, for the log.
func (s sharing) String() string {
	switch s {
	case ownAlways:
		return UpstreamPerSession
	case ownNever:
		return UpstreamShared
	case ownIfAsked:
		return "per-session for clients the server may ask, else shared"
	}
	return fmt.Sprintf("sharing(%d)", int(s))
}
