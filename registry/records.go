package registry

import (
	"encoding/json"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// The records a tool's workers write are part of the wire contract between edges and
// workers: the registry files them as bus/wire defines them.
type (
	// Tool is a deployed tool: what the tool's workers declare about it.
	Tool = wire.Tool
	// Method is one callable method of a tool.
	Method = wire.Method
	// Capabilities are the MCP features a tool's workers serve beyond tools.
	Capabilities = wire.Capabilities
	// Presence says one worker instance of a tool is alive.
	Presence = wire.Presence
	// Duration is a time.Duration that reads and writes JSON as milliseconds.
	Duration = wire.Duration
)

// Account is a customer of the gateway: the unit that keys, connections and limits
// belong to.
type Account struct {
	ID     string `json:"id"`
	Name   string `json:"name,omitempty"`
	Limits Limits `json:"limits"`
	// Audit is what the audit trail keeps of the account's calls beyond what it
	// keeps of every call, and whether a call must have its record.
	Audit AuditSettings `json:"audit,omitzero"`
	// RequireSignIn: the account's links answer only a caller that signed in (an
	// OAuth access token for the link) or sends one of the account's API keys; the
	// bare link answers 401 with the link's protected resource metadata.
	RequireSignIn bool `json:"require_sign_in,omitempty"`
	// Users sign in to the dashboard and to links (users.go).
	Users     []User    `json:"users,omitempty"`
	CreatedAt time.Time `json:"created_at"`
}

// AuditSettings are an account's choices for the audit trail.
type AuditSettings struct {
	// IncludeArguments and IncludeResult keep a call's arguments and the tool's
	// result in its record, without the fields the method's schemas mark secret.
	IncludeArguments bool `json:"include_arguments,omitempty"`
	IncludeResult    bool `json:"include_result,omitempty"`
	// MaxDataSize bounds the arguments and the result kept, each, in bytes:
	// DefaultAuditDataSize when 0, at most MaxAuditDataSize.
	MaxDataSize int `json:"max_data_size,omitempty"`
	// Required refuses a call whose record cannot be written (fail closed); otherwise
	// the call is served and the record counted as lost.
	Required bool `json:"required,omitempty"`
}

// The arguments or the result an audit record keeps, unless the account says, and at
// most: a record is one message of the bus.
const (
	DefaultAuditDataSize = 4096
	MaxAuditDataSize     = 256 << 10
)

// Limits bound what one account may do. Zero means the gateway's default.
type Limits struct {
	Rate     float64 `json:"rate,omitempty"`     // tool calls per second, per key
	Burst    int     `json:"burst,omitempty"`    // calls allowed at once above Rate
	Sessions int     `json:"sessions,omitempty"` // concurrent MCP sessions
	// PayloadBytes bounds a call's request and its reply, in bytes, below the
	// deployment's limit (the edge's --max-payload-bytes).
	PayloadBytes int64 `json:"payload_bytes,omitempty"`
	// Quotas bound the calls of the account or of its keys per calendar window and
	// at once, across every edge (see Quota).
	Quotas []Quota `json:"quotas,omitempty"`
	// Approvals name the calls that run only once a person approved them (see
	// ApprovalRule).
	Approvals []ApprovalRule `json:"approvals,omitempty"`
}

// Key is an API key's record. The key itself is never stored: the record is filed
// under the key's sha256.
type Key struct {
	ID        string     `json:"id"`
	Account   string     `json:"account"`
	Name      string     `json:"name,omitempty"`
	Prefix    string     `json:"prefix"`           // the first characters, to recognise a key by
	Scopes    []string   `json:"scopes,omitempty"` // tool ids the key may call; empty means all
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
}

// Connection makes a tool available to an account. LinkNonce, with the deployment's
// link secret, derives the connection's current SSE link token (see LinkSigner).
type Connection struct {
	Account       string    `json:"account"`
	Tool          string    `json:"tool"`
	ConnectedAt   time.Time `json:"connected_at"`
	LinkNonce     string    `json:"link_nonce"`
	LinkCreatedAt time.Time `json:"link_created_at"`
}

// Link is an SSE link's record, filed under the sha256 of its token.
type Link struct {
	Account   string    `json:"account"`
	Tool      string    `json:"tool"`
	CreatedAt time.Time `json:"created_at"`
}

// Session is an MCP session, shared by every edge so any of them can serve any request.
type Session struct {
	ID              string          `json:"id"`
	Account         string          `json:"account"`
	Tool            string          `json:"tool"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	ClientInfo      json.RawMessage `json:"client_info,omitempty"`
	Capabilities    json.RawMessage `json:"capabilities,omitempty"`
	LogLevel        string          `json:"log_level,omitempty"`
	// Stream says the session's client holds its standalone stream open on some
	// edge, which refreshes the session while it does.
	Stream    bool      `json:"stream,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Credential names the key or link that opened the session: the only one that may
	// use it, and the session ends when it is revoked (see package sse).
	Credential string `json:"credential,omitempty"`
	// Instance is the worker instance holding the session's state, for a tool whose
	// workers keep state per session (see package sse): where the session's requests go.
	Instance string `json:"instance,omitempty"`
}
