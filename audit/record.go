package audit

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus/wire"
)

// Record is one entry of the audit trail.
type Record struct {
	// ID names the record: the call's id on the bus (a new id for a record of
	// something else). It is the message's Nats-Msg-Id, so that the stream stores a
	// record sent again once.
	ID string `json:"id,omitempty"`
	// Time is when the call was answered, or the change made, by the edge's clock.
	Time time.Time `json:"time"`
	// Kind is KindCall or KindAdmin.
	Kind    string `json:"kind"`
	Account string `json:"account,omitempty"`
	// Key is the id of the API key that made the call; for an admin change, of the
	// key it made or revoked.
	Key string `json:"key,omitempty"`
	// Link says the call came through the account's link to the tool (no key).
	Link bool `json:"link,omitempty"`
	// User is the user of the account who signed in, and Client the OAuth client the
	// call's access token was issued to; both empty for a call made with an API key
	// or a bare link.
	User   string `json:"user,omitempty"`
	Client string `json:"client,omitempty"`
	// By names who made an admin change on the dashboard: "key:" and the id of the
	// key signed in, or "user:" and the name of the user. Empty for the admin API's
	// changes (the admin token) and for calls.
	By   string `json:"by,omitempty"`
	Tool string `json:"tool,omitempty"`
	// Method is the tool's method, the MCP method a session forwarded to the tool
	// (resources/read, prompts/get, ...), or the admin change (Action*).
	Method string `json:"method"`
	// Transport is the door the call came in by (Transport*).
	Transport string `json:"transport,omitempty"`
	// ArgsSHA256 is the hex sha256 of the arguments as the caller sent them.
	ArgsSHA256 string `json:"args_sha256,omitempty"`
	// Arguments and Result are the call's arguments and the tool's answer, kept only
	// where the account asks (its audit settings), without the values the method's
	// input and output schemas mark secret (Secret names where they were, under
	// /arguments and /result). Past the account's size, each is a JSON string of the
	// first bytes of its JSON text, and ArgumentsCut or ResultCut says so.
	Arguments     json.RawMessage `json:"arguments,omitempty"`
	ArgumentsCut  bool            `json:"arguments_cut,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	ResultCut     bool            `json:"result_cut,omitempty"`
	Secret        []string        `json:"secret,omitempty"`
	RequestBytes  int             `json:"request_bytes"`
	ResponseBytes int             `json:"response_bytes"` // the tool's answer; 0 when it gave none
	// Outcome is "ok" or the code of the failure (gateway's table of failures).
	Outcome string `json:"outcome"`
	// Status is the HTTP status the caller was answered with, where the door answers
	// with one of its own (the REST routes, the direct tool API, the admin API); an
	// MCP transport answers a failure inside a JSON-RPC message, and leaves it 0.
	Status int `json:"status,omitempty"`
	// LatencyUS is the time from the call's arrival at the gateway to its answer, in
	// microseconds.
	LatencyUS int64  `json:"latency_us"`
	Edge      string `json:"edge"`             // the edge instance that answered
	Worker    string `json:"worker,omitempty"` // the worker instance, when it named itself
	RequestID string `json:"request_id,omitempty"`
	TraceID   string `json:"trace_id,omitempty"`
	// Seq is the record's sequence in the stream, set when it is read: the cursor of
	// GET /admin/audit.
	Seq uint64 `json:"seq,omitempty"`
}

// Record kinds.
const (
	KindCall  = "call"
	KindAdmin = "admin"
)

// OutcomeOK is the outcome of a call answered as the tool answered it (whatever its
// status), and of an admin change made.
const OutcomeOK = "ok"

// The doors a call comes in by.
const (
	TransportREST          = "rest"           // POST /tool-call/{tool}/{method}
	TransportDirect        = "direct"         // POST /tools/{tool}/{method}
	TransportDashboard     = "dashboard"      // the dashboard's try-it form
	TransportMCP           = "mcp"            // an MCP transport that did not say which
	TransportMCPStreamable = "mcp-streamable" // Streamable HTTP with sessions
	TransportMCPLegacy     = "mcp-legacy"     // HTTP+SSE of 2024-11-05
	TransportMCP2026       = "mcp-2026"       // stateless 2026-07-28
	TransportAdmin         = "admin"          // the admin API
)

// The admin changes recorded.
const (
	ActionCreateAccount = "create-account"
	ActionUpdateAccount = "update-account"
	ActionDeleteAccount = "delete-account"
	ActionCreateKey     = "create-key"
	ActionRevokeKey     = "revoke-key"
	ActionConnect       = "connect"
	ActionDisconnect    = "disconnect"
	ActionRotateLink    = "rotate-link"
	// A connection's credentials: set (PUT or PATCH), cleared, or every record
	// wrapped again under the current key-encryption key.
	ActionSetCredentials   = "set-credentials"
	ActionClearCredentials = "clear-credentials"
	ActionRotateKey        = "rotate-credentials-key"
	// An OAuth client the operator registered with the authorization server, or
	// removed.
	ActionAddOAuthClient    = "add-oauth-client"
	ActionRemoveOAuthClient = "remove-oauth-client"
	// Access an account's key holder or user granted an MCP client on the dashboard's
	// consent page (Client names it), or revoked on the keys page.
	ActionGrantAccess  = "grant-access"
	ActionRevokeAccess = "revoke-access"
	// A user of an account made, or deleted (User names it).
	ActionAddUser    = "add-user"
	ActionDeleteUser = "delete-user"
)

// subject is where r is written.
func (r *Record) subject(s wire.Subjects) string {
	return s.Audit(r.Kind, r.Account, r.Tool, r.Method, r.Outcome)
}

// Admin completes r, the record of an admin change that says what changed, with what
// every such record says: now, the kind, the outcome (the change was made), the door
// it came in by, and the request's id and trace (from ctx).
func Admin(ctx context.Context, r Record, transport, requestID string) Record {
	r.Time, r.Kind, r.Transport, r.Outcome, r.RequestID = time.Now().UTC(), KindAdmin, transport, OutcomeOK, requestID
	r.TraceID = TraceID(ctx)
	return r
}

// TraceID is the id of the trace ctx's span is part of, or "" when there is none.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}
