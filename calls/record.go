package calls

import (
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Bucket is the JetStream KV bucket of the calls' records: a call's record under its
// id, and the answer of a call that ended under the id and ".answer".
const Bucket = "tg-calls"

// DefaultTTL is how long a record is kept after its last change, when the bucket is
// made without a TTL asked for.
const DefaultTTL = 24 * time.Hour

// Status is where a call is.
type Status string

// The statuses of a call: awaiting approval while its account's rules hold it for a
// person's decision (package approvals), working (or input_required, an MCP task
// waiting for its client's answers) until it ends, then one of the other three for good.
const (
	AwaitingApproval Status = "awaiting_approval"
	Working          Status = "working"
	InputRequired    Status = "input_required" // an MCP task's tool asked its client (Record.Input)
	Completed        Status = "completed"      // the tool answered
	Failed           Status = "failed"         // it did not: the answer is the failure's envelope
	Cancelled        Status = "cancelled"      // DELETE, through any edge
)

// Record is one call as it is kept.
type Record struct {
	ID      string `json:"id"`
	Account string `json:"account"`
	KeyID   string `json:"key_id"` // the key that made the call, the only one that reads it
	// Link is the tool of the link that made the call, for a call made through a link
	// rather than with a key (an MCP task): only that account's link of that tool reads it.
	Link string `json:"link,omitempty"`
	// Protocol says what the answer's body is: "" for an HTTP call's answer, ProtocolMCP
	// for an MCP task's (a CallToolResult, or a JSON-RPC error object when it failed).
	Protocol string `json:"protocol,omitempty"`
	Tool     string `json:"tool"`
	Method   string `json:"method"`
	CallID   string `json:"call_id"` // the call's id on the bus: its cancel and progress subjects
	// RequestID is the request that started the call: the failure envelopes of the call
	// name it, as the synchronous call's would.
	RequestID string    `json:"request_id"`
	Status    Status    `json:"status"`
	Progress  *Progress `json:"progress,omitempty"`
	// Approval is the id of the approval the call waits for, or waited for.
	Approval  string    `json:"approval,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	Deadline  time.Time `json:"deadline"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Answer is what a reader of a completed or failed call is answered; its body is
	// kept beside the record, or, past one message, in AnswerBucket.
	Answer *Answer `json:"answer,omitempty"`
	// Input is what an MCP task's tool asked its client, while the task waits for the
	// answers (InputRequired), and the answers given so far.
	Input *Input `json:"input,omitempty"`
}

// Active reports whether a call with this status may still change: it has not ended.
func (s Status) Active() bool { return s == Working || s == InputRequired || s == AwaitingApproval }

// Progress is the last progress the tool reported of the call.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// Answer is the HTTP answer the synchronous call would have had: the tool's status and
// content type, or the failure's.
type Answer struct {
	Status      int    `json:"status"`
	ContentType string `json:"content_type,omitempty"`
	RetryAfter  int    `json:"retry_after,omitempty"` // seconds; 0 for none
	Code        string `json:"code,omitempty"`        // a failure's code
	Size        int    `json:"size"`
	// InStore says the body is kept in AnswerBucket, being past one message.
	InStore bool `json:"in_store,omitempty"`
}

// Outcome is how a call ended: its status, its answer and the answer's body.
type Outcome struct {
	Status Status
	Answer Answer
	Body   []byte
	// Recorded, when set, is told the record once the end is recorded (not when a
	// cancel came first): an MCP task's session hears of it.
	Recorded func(Record)
}

// OverdueAfter is how long past its deadline a record that still says working is
// taken to have timed out: the edge running the call stopped before it could record
// the end (it records a timeout itself within moments of the deadline).
const OverdueAfter = 2 * time.Second

// Overdue reports whether the record says working (or awaiting approval) while its
// call cannot be running any more: it is then read as failed with tool_timeout, so
// that no record stays working for ever.
func (r *Record) Overdue(now time.Time) bool {
	return r.Status.Active() && now.After(r.Deadline.Add(OverdueAfter))
}

// ProtocolMCP marks the record of an MCP task (Record.Protocol).
const ProtocolMCP = "mcp"

// ErrNotFound is a call that does not exist, has expired, or was made by another key:
// the caller is told the same of each.
var ErrNotFound = gateway.Fail(gateway.KindCallNotFound, "")

// ErrEnded is a cancel of a call that ended already.
var ErrEnded = gateway.Fail(gateway.KindConflict, "the call has ended already")

// OwnedBy reports whether p made the call: its account, and the same key, or the same
// account's link of the same tool. Nobody else reads or cancels it.
func (r *Record) OwnedBy(p registry.Principal) bool {
	if r.Account != p.Account {
		return false
	}
	if p.Key != nil {
		return r.KeyID != "" && r.KeyID == p.Key.ID
	}
	return r.KeyID == "" && p.Tool != "" && r.Link == p.Tool
}
