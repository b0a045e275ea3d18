package registry

import (
	"encoding/json"
	"time"
)

// Tool is a deployed tool: what the tool's workers declare about it.
type Tool struct {
	ID           string       `json:"id"`
	Title        string       `json:"title,omitempty"`
	Description  string       `json:"description,omitempty"`
	Version      string       `json:"version,omitempty"`
	Owner        string       `json:"owner,omitempty"` // the account that deploys it, if any
	Methods      []Method     `json:"methods"`
	Capabilities Capabilities `json:"capabilities,omitzero"`
	UpdatedAt    time.Time    `json:"updated_at"`
}

// Method is one callable method of a tool.
type Method struct {
	Name         string          `json:"name"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema json.RawMessage `json:"output_schema,omitempty"`
	// Timeout bounds one call; 0 means the gateway's default.
	Timeout Duration `json:"timeout,omitempty"`
	// MCPName is the method's name on an MCP server when it differs from Name
	// (MCP tool names may hold characters a subject token cannot).
	MCPName     string          `json:"mcp_name,omitempty"`
	Title       string          `json:"title,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// Capabilities are the MCP features a tool's workers serve beyond tools.
type Capabilities struct {
	Resources   bool `json:"resources,omitempty"`
	Prompts     bool `json:"prompts,omitempty"`
	Completions bool `json:"completions,omitempty"`
	Logging     bool `json:"logging,omitempty"`
	// MCP is the capabilities object of the MCP server behind the tool, as that
	// server declared it (a bridged server): what it says of each feature
	// (listChanged, subscribe), and features the gateway passes through without
	// knowing them (tasks, extensions, experimental).
	MCP json.RawMessage `json:"mcp,omitempty"`
}

// Method returns the method named name, or nil.
func (t *Tool) Method(name string) *Method {
	for i := range t.Methods {
		if t.Methods[i].Name == name {
			return &t.Methods[i]
		}
	}
	return nil
}

// Account is a customer of the gateway: the unit that keys, connections and limits
// belong to.
type Account struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
}

// Limits bound what one account may do. Zero means the gateway's default.
type Limits struct {
	Rate     float64 `json:"rate,omitempty"`     // tool calls per second, per key
	Burst    int     `json:"burst,omitempty"`    // calls allowed at once above Rate
	Sessions int     `json:"sessions,omitempty"` // concurrent MCP sessions
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

// Usable reports whether the key authenticates at now.
func (k *Key) Usable(now time.Time) bool {
	if k.RevokedAt != nil {
		return false
	}
	return k.ExpiresAt == nil || now.Before(*k.ExpiresAt)
}

// Allows reports whether the key's scopes include tool.
func (k *Key) Allows(tool string) bool {
	if len(k.Scopes) == 0 {
		return true
	}
	for _, s := range k.Scopes {
		if s == tool {
			return true
		}
	}
	return false
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

// Presence says one worker instance of a tool is alive. Workers refresh it; it
// expires with the presence bucket's TTL when they stop refreshing.
type Presence struct {
	Tool      string    `json:"tool"`
	Instance  string    `json:"instance"`
	Host      string    `json:"host,omitempty"`
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"started_at"`
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
	CreatedAt       time.Time       `json:"created_at"`
}

// Duration is a time.Duration that reads and writes JSON as milliseconds.
type Duration time.Duration

// MarshalJSON writes milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).Milliseconds())
}

// UnmarshalJSON reads milliseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var ms int64
	if err := json.Unmarshal(b, &ms); err != nil {
		return err
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}
