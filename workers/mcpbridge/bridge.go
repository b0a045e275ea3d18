// Package mcpbridge deploys an existing MCP server as a toolgate tool: a stdio
// server's command, or a remote server's URL. It lists the server's tools as the
// tool's methods (schemas, annotations and titles as the server gives them), forwards
// calls with their deadline and cancellation, passes progress and log notifications
// back to the caller, forwards the server's sampling and elicitation requests to the
// caller's MCP session, serves the server's resources, prompts and completions on the
// tool's tg.mcp subject, and follows the server's tools/list_changed into the registry.
//
// An MCP client session that uses the tool either shares the pool of upstream
// sessions (Config.Sessions; for a stdio server, child processes) or has an upstream
// session of its own, opened at its first request with the capabilities the client
// declared, and ended when the client's session ends (edges announce it), after
// ClientSessionIdle without a request, or when the bridge stops: what the server
// keeps per session (subscriptions, state a tool toggles, roots, a log level) is the
// client's alone, and everything the server sends on it outside a call (log
// messages, resource updates, its own requests) goes to that client. Which one is
// Config.UpstreamSessions: by default decided from what the server and the client
// declare (sharing.go). Calls that come without an MCP session (the HTTP API) always
// use the pool, which also says what the tool's methods are.
//
// A shared session that ends is restarted with backoff; the calls in flight on it
// fail at once with tool_unavailable, and the other sessions keep serving. A
// client's session that ends is opened again at the client's next request, as a
// server restarted.
//
// A server's requests (sampling, elicitation, roots) and log messages go to the call
// running on the session they came from when exactly one is: a request on the
// stream of that call's POST. When none or several are, on a client's session they
// go to the client's standalone stream, and on a shared session log messages go to
// the worker's log and requests are refused, since there is no telling whose caller
// should be asked.
package mcpbridge

//lint:file-ignore SA1019 the bridge forwards sampling and logging, which MCP deprecates only from 2026-07-28, for the revisions that have them.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// ProtocolVersion is the MCP revision the bridge asks its upstream sessions for: the
// newest with sessions of state, in which a server sends its sampling and elicitation
// requests and its notifications on the session, and a client keeps no list caches.
// A server that speaks only an older revision answers with that one.
const ProtocolVersion = "2025-11-25"

// CodeUnavailable is the error code of a call that no upstream session could take
// or finish: the tool's server is down or restarting, as with no worker at all.
const CodeUnavailable = "tool_unavailable"

// stableAfter is how long a session must have lived for its end to count as a new
// failure rather than the next of a series: the restart backoff starts over.
const stableAfter = 10 * time.Second

// Bridge runs one MCP server as one instance of a tool.
type Bridge struct {
	nc   *nats.Conn
	cfg  Config
	log  *slog.Logger
	opts []workers.Option

	ready   chan struct{}
	changed chan struct{} // a session's tool list changed
	w       *workers.Worker
	life    context.Context // the upstream sessions' (outlives Run's ctx while calls drain)

	mu       sync.Mutex
	sessions []*session
	clients  map[string]*session // by MCP client session id
	accounts map[string]*session // by account and values (accountKey), for a server that acts per account
	sharing  sharing             // which client sessions have upstream sessions of their own
	// perAccount: a template names a connection field, and each account's calls go to
	// upstream sessions started with its values (see accounts.go).
	perAccount bool
	byClient   map[*mcp.ClientSession]*session
	progress   map[string]*inflight       // by progress token
	subs       map[string]map[string]bool // resource URI -> MCP sessions subscribed
	useSSE     bool                       // the remote server speaks only HTTP+SSE
	next       int                        // where the next pick starts, to spread ties
	dropped    map[string]bool            // tools whose input schema was dropped, logged once

	stateless statelessState // the upstream session at StatelessRevision
	oauth     *oauthState    // for a server that requires OAuth (Config.OAuth); nil otherwise
	// statelessOpen is stateless.s once open, under mu: its tools are methods too,
	// since its calls change what its server offers.
	statelessOpen *session
}

// session is one upstream MCP session: a shared one, restarted when it ends, or the
// one of a client session. Its fields are guarded by the Bridge's mu.
type session struct {
	idx    int    // in the pool; -1 for a client's or an account's
	client string // the MCP client session it serves; "" for a shared one
	// account is the account whose calls (without an MCP session) it serves, for a
	// server that acts per account; "" for a client's or a shared one.
	account string
	// acting is the account whose values a client's or an account's session runs
	// with: for a server that requires OAuth, the account whose token its tools/list
	// is read with; "" for a shared one.
	acting string
	// values are the account's values of the connection's fields, with which a
	// server that acts per account is started (Config.Env, Header); nil for none.
	values map[string]string
	key    string              // a client's or an account's: its key in holder
	holder map[string]*session // b.clients or b.accounts, for a client's or an account's
	// revision is the MCP revision the session asks for: ProtocolVersion unless set
	// (StatelessRevision, for the calls of clients of that revision).
	revision string
	caps     *mcp.ClientCapabilities
	level    string        // the log level set upstream
	opened   chan struct{} // a client's: closed once it is open, or failed to open
	err      error         // why a client's did not open
	used     time.Time     // a client's: its last request
	raw      rawWaits      // the requests whose raw results are wanted (its own lock)
	conn     *observedConn // a stdio server's connection, for requests the SDK cannot make
	// initialized is the server's initialize result as it sent it, if seen.
	initialized json.RawMessage
	cs          *mcp.ClientSession // nil while it is down
	down        chan struct{}      // closed when cs ends
	ended       error              // why cs ended, once down is closed
	stop        context.CancelFunc // ends the context cs was connected with
	stderr      *lineLog           // a stdio child's stderr
	calls       map[*inflight]struct{}
	relist      chan struct{} // the server said its tool list changed

	tools    map[string]*mcp.Tool // by MCP name, from the session's latest tools/list
	listedAt time.Time
}

// inflight is one call (or MCP request) running on a session.
type inflight struct {
	c     *workers.Call
	ctx   context.Context
	s     *session
	cs    *mcp.ClientSession
	token string // the progress token, when the caller wants progress
}

// New returns a bridge for cfg, which must be valid. log is the worker's log (the
// children's stderr goes there too); opts adjust the worker.
func New(nc *nats.Conn, cfg Config, log *slog.Logger, opts ...workers.Option) *Bridge {
	if log == nil {
		log = slog.Default()
	}
	b := &Bridge{
		nc: nc, cfg: cfg, log: log.With("tool", cfg.Tool),
		opts:     append([]workers.Option{workers.WithLogger(log), workers.WithSubjects(cfg.Subjects)}, opts...),
		ready:    make(chan struct{}),
		changed:  make(chan struct{}, 1),
		byClient: map[*mcp.ClientSession]*session{},
		clients:  map[string]*session{},
		accounts: map[string]*session{},
		progress: map[string]*inflight{},
		subs:     map[string]map[string]bool{},
		dropped:  map[string]bool{},
	}
	if cfg.OAuth != nil {
		b.oauth = &oauthState{refused: map[[32]byte]refusal{}, lists: map[string]listed{}}
	}
	if b.perAccount = cfg.templated() || cfg.OAuth != nil; b.perAccount {
		b.registerMetrics()
	}
	for i := range cfg.Sessions {
		b.sessions = append(b.sessions, &session{idx: i, caps: everyCapability(), calls: map[*inflight]struct{}{}, relist: make(chan struct{}, 1)})
	}
	return b
}

// everyCapability is what a shared session declares: every capability a client may
// have, so that the server lists every tool it may offer some client.
func everyCapability() *mcp.ClientCapabilities {
	return &mcp.ClientCapabilities{
		RootsV2:     &mcp.RootCapabilities{ListChanged: true},
		Sampling:    &mcp.SamplingCapabilities{Context: &mcp.SamplingContextCapabilities{}, Tools: &mcp.SamplingToolsCapabilities{}},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
	}
}

// newClient is the MCP client of one upstream session, declaring caps. The server's
// requests go to the caller (see ask), never answered by the SDK itself.
// A stateless session's client hands the server's input_required results back as
// they are, for the caller's client to answer.
func (b *Bridge) newClient(caps *mcp.ClientCapabilities, stateless bool) *mcp.Client {
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-mcpbridge", Version: "1.0.0"}, &mcp.ClientOptions{
		Logger:         b.log,
		Capabilities:   caps,
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: stateless},
		// Progress and log messages are read as they arrive (see observe).
		ToolListChangedHandler: b.onToolListChanged,
		ResourceUpdatedHandler: b.onResourceUpdated,
		// Set, so that the SDK's session at StatelessRevision opens its
		// subscriptions/listen stream with these lists too (see onListChanged).
		PromptListChangedHandler: func(_ context.Context, req *mcp.PromptListChangedRequest) {
			b.onListChanged(req.Session, wire.ListPrompts)
		},
		ResourceListChangedHandler: func(_ context.Context, req *mcp.ResourceListChangedRequest) {
			b.onListChanged(req.Session, wire.ListResources)
		},
	})
	c.AddReceivingMiddleware(b.serverRequests)
	c.AddSendingMiddleware(swapParams)
	addTaskMethods(c)
	return c
}

// Ready is closed once the tool is served.
func (b *Bridge) Ready() <-chan struct{} { return b.ready }

// Run starts the upstream sessions, registers the tool with the first session's tools
// and serves it until ctx ends; then it drains the calls in flight and stops the
// sessions (for a stdio server, its processes). It fails at once when the first
// session cannot start: a wrong command or URL is better reported than retried.
func (b *Bridge) Run(ctx context.Context) error {
	if err := b.cfg.Validate(); err != nil {
		return err
	}
	// The sessions outlive ctx: the calls the worker drains still need them.
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	defer func() {
		stopPool()
		wg.Wait()
	}()

	b.life = poolCtx
	defer b.endClients("the bridge stopped")
	defer b.endStateless()

	first, tool, err := b.start(poolCtx)
	if err != nil {
		return err
	}
	w := workers.New(b.nc, tool, b.opts...)
	b.w = w
	w.OnSessionEnd(func(id string) { go b.endClient(id, nil, "the client's session ended") })
	methods, perAccount := b.methods()
	if err := w.SetAccountMethods(ctx, methods, perAccount); err != nil {
		return err
	}
	w.HandleMCP(b.serveMCP)
	for _, s := range b.sessions {
		if first != nil { // none runs for a server that requires OAuth
			wg.Go(func() { b.keep(poolCtx, s, s == first) })
		}
	}
	wg.Go(func() { b.follow(poolCtx, w) })
	wg.Go(func() { b.sweep(poolCtx) })
	wg.Go(func() {
		select {
		case <-w.Ready():
			close(b.ready)
		case <-poolCtx.Done():
		}
	})
	return w.Run(ctx)
}

// start opens the first shared session and makes the tool of what the server says
// of itself; for a server that requires OAuth, it opens none (first is nil) and
// makes the tool that declares the server's provider.
func (b *Bridge) start(ctx context.Context) (first *session, tool workers.Tool, err error) {
	if b.oauth != nil {
		tool, err = b.startOAuth(ctx)
		return nil, tool, err
	}
	first = b.sessions[0]
	if err := b.open(ctx, first); err != nil {
		return nil, tool, fmt.Errorf("mcp: tool %s: start the server: %w", b.cfg.Tool, err)
	}
	b.mu.Lock()
	info, infoRaw := first.cs.InitializeResult(), first.initialized
	// A Streamable HTTP server that names no session keeps no state of one.
	namesSession := b.cfg.URL == "" || b.useSSE || first.cs.ID() != ""
	b.mu.Unlock()
	tool = b.tool(info, infoRaw)
	b.mu.Lock()
	b.sharing = resolveSharing(b.cfg.UpstreamSessions, info.Capabilities, tool.Capabilities.MCP, namesSession)
	b.mu.Unlock()
	b.log.Info("upstream sessions", "mode", b.sharing.String(), "pool", b.cfg.Sessions, "client_sessions", b.cfg.ClientSessions)
	allShared := b.sharing == ownNever
	// Each client session lists the tools its own upstream session offers.
	tool.Capabilities.SessionTools = !allShared
	// and holds it: the edges send a client session's requests to the instance
	// that answered it first.
	tool.Capabilities.SessionState = !allShared
	return first, tool, nil
}

var semverPattern = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)

// tool is what the worker declares: the configured id and title, and what the server
// says of itself.
func (b *Bridge) tool(info *mcp.InitializeResult, raw json.RawMessage) workers.Tool {
	t := workers.Tool{ID: b.cfg.Tool, Title: b.cfg.Title, Description: info.Instructions, Connection: b.cfg.ConnectionFields()}
	if si := info.ServerInfo; si != nil {
		t.Title = cmp.Or(t.Title, si.Title, si.Name)
		if semverPattern.MatchString(si.Version) { // nats micro wants a semantic version
			t.Version = si.Version
		}
	}
	if caps := info.Capabilities; caps != nil {
		t.Capabilities = workers.Capabilities{
			Resources: caps.Resources != nil, Prompts: caps.Prompts != nil,
			Completions: caps.Completions != nil, Logging: caps.Logging != nil,
			MCP: rawJSON(caps),
		}
		// As the server declared them, with what the SDK's types do not know (tasks).
		var sent struct {
			Capabilities json.RawMessage `json:"capabilities"`
		}
		if json.Unmarshal(raw, &sent) == nil && len(sent.Capabilities) > 0 && sent.Capabilities[0] == '{' {
			t.Capabilities.MCP = sent.Capabilities
		}
	}
	return t
}

func (b *Bridge) onToolListChanged(_ context.Context, req *mcp.ToolListChangedRequest) {
	b.mu.Lock()
	s := b.byClient[req.Session]
	b.mu.Unlock()
	if s == nil {
		return
	}
	b.onListChanged(req.Session, wire.ListTools)
	if s.client != "" || s.account != "" || s.revision != "" {
		// A client's or an account's session, or the stateless one, is listed
		// again at once; it has no keep loop.
		go func() {
			ctx, cancel := context.WithTimeout(b.life, b.cfg.StartTimeout)
			defer cancel()
			if err := b.list(ctx, s); err != nil {
				b.log.Warn("upstream tools/list failed", "client_session", s.client, "err", err)
			}
		}()
		return
	}
	select {
	case s.relist <- struct{}{}:
	default:
	}
}

// onListChanged passes on a list change the server announced on a session that is
// no client's own: the one at StatelessRevision (on its subscriptions/listen stream,
// which the SDK opens) or a shared one. The edges tell the subscriptions/listen
// streams of the tool's clients that asked for that list (a change of the tools
// reaches them also as a change of the tool's methods, later). A client's own
// session's changes go to that client (observe).
func (b *Bridge) onListChanged(cs *mcp.ClientSession, list string) {
	b.mu.Lock()
	s, w := b.byClient[cs], b.w
	b.mu.Unlock()
	if s == nil || s.client != "" || w == nil {
		return
	}
	if err := w.ListChanged(list); err != nil {
		b.log.Warn("a list change of the server not passed on", "list", list, "err", err)
	}
}

// follow rewrites the tool's methods when a session's tool list changes.
func (b *Bridge) follow(ctx context.Context, w *workers.Worker) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.changed:
			b.stepUp()
			methods, perAccount := b.methods()
			if err := w.SetAccountMethods(ctx, methods, perAccount); err != nil && ctx.Err() == nil {
				b.log.Warn("the tool's methods could not be updated", "err", err)
			}
		}
	}
}

// methods are the tool's methods: every tool some session has listed, as the session
// that listed it last describes it, in name order. For a server that requires OAuth,
// the tools each account's sessions listed, and which of them each account may see
// and call (nil for any other server: all of them).
func (b *Bridge) methods() ([]workers.Method, *wire.AccountMethods) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var tools map[string]*mcp.Tool
	var perAccount map[string]map[string]*mcp.Tool
	if b.oauth != nil {
		tools, perAccount = b.accountLists()
	} else {
		tools = b.listedTools()
	}
	names := methodNames(slices.Collect(func(yield func(string) bool) {
		for name := range tools {
			if !yield(name) {
				return
			}
		}
	}))
	var out []workers.Method
	for name, t := range tools {
		m := workers.Method{
			Name: names[name], Description: t.Description, Title: t.Title,
			InputSchema: rawJSON(t.InputSchema), OutputSchema: rawJSON(t.OutputSchema),
			Timeout: b.cfg.CallTimeout, Handler: b.callTool(name), TaskSupport: b.cfg.TaskSupport[name],
		}
		if m.Name != name {
			m.MCPName = name
		}
		if t.Annotations != nil {
			m.Annotations = rawJSON(t.Annotations)
			m.Title = cmp.Or(m.Title, t.Annotations.Title)
		}
		if err := wire.CheckInputSchema(m.InputSchema); len(m.InputSchema) > 0 && err != nil {
			// The gateway could not check calls against it, and would refuse the whole
			// tool; the server still checks its own arguments.
			if !b.dropped[name] {
				b.log.Warn("the tool's input schema does not compile; its calls go unchecked to the server", "mcp_tool", name, "err", err)
				b.dropped[name] = true
			}
			m.InputSchema = nil
		}
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b workers.Method) int { return cmp.Compare(a.Name, b.Name) })
	return out, accountMethods(perAccount, names)
}

// listedTools are the tools every session of a server that takes no OAuth listed
// last, each as the session that listed it last describes it. b.mu is held.
func (b *Bridge) listedTools() map[string]*mcp.Tool {
	sessions := slices.Clone(b.sessions)
	for _, c := range b.clients {
		// A tool a server offers one client only (one it added on that client's
		// session) is a method too; other clients' lists leave it out.
		sessions = append(sessions, c)
	}
	if b.statelessOpen != nil {
		sessions = append(sessions, b.statelessOpen)
	}
	sort.SliceStable(sessions, func(i, j int) bool { return sessions[i].listedAt.After(sessions[j].listedAt) })
	tools := map[string]*mcp.Tool{}
	for _, s := range sessions {
		for name, t := range s.tools {
			if tools[name] == nil {
				tools[name] = t
			}
		}
	}
	return tools
}

// rawJSON is v as JSON, or nil for nothing.
func rawJSON(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || string(b) == "null" {
		return nil
	}
	return b
}
