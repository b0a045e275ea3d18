package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
)

// Tool is a deployed tool's record in the tools bucket, under its id: what the tool's
// workers declare about it. Workers write it; edges check what they read (CheckTool)
// and ignore a record that breaks the rules.
type Tool struct {
	ID           string       `json:"id"`
	Title        string       `json:"title,omitempty"`
	Description  string       `json:"description,omitempty"`
	Version      string       `json:"version,omitempty"`
	Owner        string       `json:"owner,omitempty"` // the account that deploys it, if any
	Methods      []Method     `json:"methods"`
	Capabilities Capabilities `json:"capabilities,omitzero"`
	// Holding says the tool's workers name the calls they hold (see HoldingAfter):
	// edges then give up a call they hear nothing of, instead of waiting its deadline.
	Holding bool `json:"holding,omitempty"`
	// Connection is what an account's connection to the tool needs (its fields, the
	// key its values are sealed to on each call); nil: nothing.
	Connection *Connection `json:"connection,omitempty"`
	// AccountMethods, when set, says which of Methods each account may see and
	// call; nil: every account all of them.
	AccountMethods *AccountMethods `json:"account_methods,omitempty"`
	UpdatedAt      time.Time       `json:"updated_at"`
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
	// TaskSupport says how an MCP client may call the method as a task the gateway
	// keeps (its server knowing nothing of tasks): TaskOptional (also ""),
	// TaskRequired (a client that takes no tasks is refused) or TaskForbidden.
	TaskSupport string `json:"task_support,omitempty"`
}

// The values of Method.TaskSupport, as MCP's ToolExecution.taskSupport names them.
const (
	TaskOptional  = "optional"
	TaskRequired  = "required"
	TaskForbidden = "forbidden"
)

// Capabilities are the MCP features a tool's workers serve beyond tools.
type Capabilities struct {
	Resources   bool `json:"resources,omitempty"`
	Prompts     bool `json:"prompts,omitempty"`
	Completions bool `json:"completions,omitempty"`
	Logging     bool `json:"logging,omitempty"`
	// SessionTools says the tool's MCP handler answers tools/list for an MCP session:
	// the tools that session's client may see, as the server behind the tool lists
	// them to a client that declared what it did (a bridged server may offer tools
	// only to clients with roots, say). Edges list those of the tool's methods.
	SessionTools bool `json:"session_tools,omitempty"`
	// SessionState says the tool's workers keep state per MCP session (a bridged
	// server's upstream session): each names itself on its answers to a session
	// (HeaderInstance), and the edges send the session's later requests to that
	// instance (Subjects.Instance) while it answers there.
	SessionState bool `json:"session_state,omitempty"`
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

// CheckTool returns why t cannot be a tool record, or nil: its id, its method names
// (each once), and that its schemas and annotations are JSON. Whether an input schema
// compiles is CheckSchemas'.
func CheckTool(t *Tool) error {
	if err := CheckToolID(t.ID); err != nil {
		return err
	}
	seen := make(map[string]bool, len(t.Methods))
	for i := range t.Methods {
		m := &t.Methods[i]
		if err := CheckMethodName(m.Name); err != nil {
			return fmt.Errorf("tool %s: %w", t.ID, err)
		}
		if seen[m.Name] {
			return fmt.Errorf("tool %s: method %s: declared twice", t.ID, m.Name)
		}
		seen[m.Name] = true
		switch m.TaskSupport {
		case "", TaskOptional, TaskRequired, TaskForbidden:
		default:
			return fmt.Errorf("tool %s: method %s: task_support: %q is none of %s, %s, %s", t.ID, m.Name, m.TaskSupport, TaskOptional, TaskRequired, TaskForbidden)
		}
		for _, f := range []struct {
			what string
			raw  json.RawMessage
		}{{"input schema", m.InputSchema}, {"output schema", m.OutputSchema}, {"annotations", m.Annotations}} {
			if len(f.raw) > 0 && !json.Valid(f.raw) {
				return fmt.Errorf("tool %s: method %s: %s: not JSON", t.ID, m.Name, f.what)
			}
		}
	}
	if t.Connection != nil {
		if err := CheckConnection(t.Connection); err != nil {
			return fmt.Errorf("tool %s: %w", t.ID, err)
		}
	}
	if t.AccountMethods != nil {
		if err := checkAccountMethods(t); err != nil {
			return err
		}
	}
	if mcp := bytes.TrimSpace(t.Capabilities.MCP); len(mcp) > 0 && (mcp[0] != '{' || !json.Valid(mcp)) {
		return fmt.Errorf("tool %s: capabilities: mcp: not a JSON object", t.ID)
	}
	return nil
}

// CheckSchemas returns why one of t's input schemas does not compile, or nil.
func CheckSchemas(t *Tool) error {
	for i := range t.Methods {
		m := &t.Methods[i]
		if len(m.InputSchema) == 0 {
			continue
		}
		if _, err := CompileSchema(m.InputSchema, SchemaURL(t.ID, m.Name)); err != nil {
			return fmt.Errorf("tool %s: method %s: input schema: %w", t.ID, m.Name, err)
		}
	}
	return nil
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

// Presence says one worker instance of a tool is alive, under the key
// <tool>.<instance> of the presence bucket. The worker refreshes it; it expires with
// its own time to live (or the bucket's, which bounds it) when the worker stops.
type Presence struct {
	Tool      string    `json:"tool"`
	Instance  string    `json:"instance"`
	Host      string    `json:"host,omitempty"`
	Version   string    `json:"version,omitempty"`
	StartedAt time.Time `json:"started_at"`
}

// DefaultPresenceTTL is how long a worker's presence outlives its last heartbeat
// unless it says otherwise, and the presence bucket's own bound unless the deployment
// says otherwise.
const DefaultPresenceTTL = 10 * time.Second

// ToolRecordMsg is the message that writes t's record into the tools bucket (an
// edge's, for the worker that asked: Subjects.AskRecordMsg).
func ToolRecordMsg(t *Tool) (*nats.Msg, error) {
	b, err := json.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("wire: tool %s: record: %w", t.ID, err)
	}
	msg := nats.NewMsg(ToolRecord(t.ID))
	msg.Data = b
	return msg, nil
}
