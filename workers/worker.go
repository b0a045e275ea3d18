// Package workers is the SDK a tool team imports to put its tool behind toolgate:
// take a NATS connection, declare the tool and its methods (schemas written out or
// inferred from Go types), then Run. A running Worker has an edge write the tool's
// record and its own presence in the registry, serves the methods' bus subjects in
// the tool's queue group as a nats micro service (and, for a tool that serves
// resources, prompts or completion, its tg.mcp subject), runs calls concurrently up
// to a bound, and on shutdown drains: the calls it has taken finish and reply, new
// ones go to the tool's other instances.
//
// Everything a worker of tool T sends or follows names T (see bus/wire), so the NATS
// account it runs as can be limited to its own tool: its calls, its cancels, its
// asks to the edges (record, presence, state, session messages), its sessions'
// replies, and its own inbox. It uses no JetStream subject: JetStream answers on any
// reply subject a requester names, so a worker that could reach it could have the
// server publish anywhere in the account.
package workers

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
)

// Tool is what a worker declares about its tool.
type Tool struct {
	ID           string // matches ^[a-z0-9][a-z0-9-]{0,62}$
	Title        string
	Description  string
	Version      string // a semantic version (a leading "v" is dropped); "0.0.0" when empty
	Owner        string // the account that deploys the tool, if any
	Capabilities Capabilities
	// Connection are the values each account's connection to the tool needs (a
	// token, an API key): an account sets them through the gateway, and each of its
	// calls brings them, sealed to the tool's key (WithSealKey), which the handler
	// reads with Call.Credentials.
	Connection []Field
	// OAuth is the OAuth 2 provider each account authorizes the tool at, when the
	// tool acts with the account's access token there: the gateway runs the
	// authorization (the dashboard's Connect button) and the refreshes, and each
	// call brings the access token as the value "access_token" of Call.Credentials.
	// The client's secret is set at the gateway, never here.
	OAuth *OAuthProvider
}

// OAuthProvider is where accounts authorize a tool: an issuer to discover the
// endpoints from, or the endpoints; the scopes; the client's id.
type OAuthProvider = wire.OAuthProvider

// Field is one value of a connection: its name, whether it is a secret, what it is.
type Field = wire.Field

// Method is one method of the tool and the handler that answers its calls.
type Method struct {
	Name        string // matches ^[A-Za-z0-9_-]{1,128}$
	Title       string
	Description string
	// InputSchema is the JSON Schema (2020-12 unless its $schema says otherwise) the
	// parameters must satisfy; the gateway refuses calls that do not. Nil takes any object.
	InputSchema  json.RawMessage
	OutputSchema json.RawMessage
	Annotations  json.RawMessage // MCP tool annotations
	// MCPName is the method's name on an MCP server when it differs from Name: a
	// bridged server's tool whose name a subject token cannot carry.
	MCPName string
	// TaskSupport says whether an MCP client may, or must, call the method as a task
	// the gateway keeps (wire.TaskOptional, the default, wire.TaskRequired or
	// wire.TaskForbidden): the handler runs as for any call either way.
	TaskSupport string
	// Timeout bounds a call when the caller sets no deadline of its own; the gateway
	// also uses it as the method's default deadline. 0 leaves it to the gateway.
	Timeout time.Duration
	Handler Handler

	err   error        // why Func could not build the method; reported by Run
	input *inputSchema // InputSchema compiled, for the requests the SDK checks (input.go)
	mcp   bool         // the tool's MCP endpoint: c.Method is the MCP method, errors are JSON-RPC errors
}

// Worker serves one instance of a tool.
type Worker struct {
	nc    *nats.Conn
	tool  Tool
	cfg   config
	log   *slog.Logger
	inbox *inbox // while Run runs

	mu      sync.Mutex
	methods []Method
	mcp     MCPHandler
	// accountMethods: which methods each account may see and call (SetAccountMethods).
	accountMethods *wire.AccountMethods
	sessionEnd     func(session string)
	started        bool
	svc            micro.Service      // while serving
	mcpMethod      *Method            // the MCP handler's, while serving
	direct         *nats.Subscription // the instance's own requests (Capabilities.SessionState)
	served         map[string]bool    // method names with an endpoint
	stopping       bool

	table atomic.Pointer[map[string]*Method] // the methods calls are dispatched to, by name
	setMu sync.Mutex                         // one SetMethods at a time

	ready chan struct{}
	done  chan struct{}   // closed when Run returns
	slots *slots          // the calls taken: running, or waiting for a slot
	idle  chan job        // hands a call to a runner waiting for one
	base  context.Context // the parent of every call's context: Run's values, never its end

	cancelMu  sync.Mutex
	running   map[string]*runningCall // by call id; calls of one id (rare) chained by next
	cancelled *recentCancels          // call ids whose caller gave up

	stats map[string]*methodStats // by endpoint subject

	failing sync.Map          // what (write's) the registry has not taken yet: said once
	opened  openedCredentials // the connection values calls brought, opened
}

// New returns a worker for tool on nc. Declare its methods with Handle, then call Run.
func New(nc *nats.Conn, tool Tool, opts ...Option) *Worker {
	cfg := config{
		concurrency:  DefaultConcurrency,
		cancelWindow: DefaultCancelMemory,
		cancelMax:    DefaultCancelMemoryMax,
		presenceTTL:  wire.DefaultPresenceTTL,
		log:          slog.Default(),
		subjects:     wire.DefaultSubjects,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.heartbeat == 0 {
		cfg.heartbeat = cfg.presenceTTL / 3
	}
	if cfg.instance == "" {
		cfg.instance = defaultInstance()
	}
	if (len(tool.Connection) > 0 || tool.OAuth != nil) && cfg.sealKey == nil {
		cfg.sealKey, _ = nkeys.CreateCurveKeys() // fails only without a source of randomness; record says so
	}
	return &Worker{
		nc:        nc,
		tool:      tool,
		cfg:       cfg,
		log:       cfg.log.With("tool", tool.ID, "instance", cfg.instance),
		ready:     make(chan struct{}),
		done:      make(chan struct{}),
		served:    map[string]bool{},
		running:   map[string]*runningCall{},
		cancelled: newRecentCancels(cfg.cancelWindow, cfg.cancelMax),
		stats:     map[string]*methodStats{},
	}
}

func defaultInstance() string {
	host, _ := os.Hostname()
	host, _, _ = strings.Cut(host, ".")
	host = strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return -1
	}, host)
	suffix := strings.ToLower(rand.Text()[:8])
	if host == "" {
		return suffix
	}
	return host + "-" + suffix
}

// Handle declares a method. Call it before Run; the checks (name, schemas, handler)
// are made by Run, which refuses to start a tool with a bad method.
func (w *Worker) Handle(m Method) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("workers: Handle called after Run")
	}
	w.methods = append(w.methods, m)
}

// MCPHandler answers an MCP request to the tool other than a tool call: resources,
// prompts and completion, which the edge sends on the tool's tg.mcp subject. method
// is the JSON-RPC method (resources/read, prompts/get, completion/complete, ...), also
// in c.Method, and c.Params its params. What it returns is the JSON-RPC result; an
// *RPCError is the JSON-RPC error the client sees, and any other error an internal one.
type MCPHandler func(ctx context.Context, c *Call, method string) (any, error)

// HandleMCP declares the handler of the tool's MCP requests other than tool calls. A
// tool whose Capabilities name resources, prompts or completions needs one. Its
// requests share the methods' queue group, concurrency bound and drain.
func (w *Worker) HandleMCP(h MCPHandler) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		panic("workers: HandleMCP called after Run")
	}
	w.mcp = h
}

// Instance is the instance's name.
func (w *Worker) Instance() string { return w.cfg.instance }

// Ready is closed once the instance serves its methods and its presence is written.
func (w *Worker) Ready() <-chan struct{} { return w.ready }
