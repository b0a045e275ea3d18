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
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/bus/wire"
)

var tracer = otel.Tracer("github.com/toolgate/toolgate/workers")

// DefaultConcurrency is how many calls one instance runs at once unless told otherwise.
const DefaultConcurrency = 64

// Tool is what a worker declares about its tool.
type Tool struct {
	ID           string // matches ^[a-z0-9][a-z0-9-]{0,62}$
	Title        string
	Description  string
	Version      string // a semantic version (a leading "v" is dropped); "0.0.0" when empty
	Owner        string // the account that deploys the tool, if any
	Capabilities Capabilities
}

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
	// Timeout bounds a call when the caller sets no deadline of its own; the gateway
	// also uses it as the method's default deadline. 0 leaves it to the gateway.
	Timeout time.Duration
	Handler Handler

	err error // why Func could not build the method; reported by Run
	mcp bool  // the tool's MCP endpoint: c.Method is the MCP method, errors are JSON-RPC errors
}

// Option adjusts a Worker.
type Option func(*config)

type config struct {
	instance     string
	concurrency  int
	cancelWindow time.Duration
	cancelMax    int
	presenceTTL  time.Duration
	heartbeat    time.Duration
	log          *slog.Logger
	subjects     wire.Subjects
}

// WithInstance names this instance in the presence bucket and in nats micro metadata
// (letters, digits, '-' and '_'). By default it is the host name and a random suffix.
func WithInstance(name string) Option { return func(c *config) { c.instance = name } }

// WithConcurrency bounds how many calls the instance runs at once (DefaultConcurrency
// by default). At the bound the calls taken wait for a slot, in order, and are named
// on the tool's Holding subject as running ones are (see wire.HoldingAfter); past 16
// waiting per slot the worker takes no more until one finishes, and the server's
// routing and the connection's pending queue hold the rest. Those are not named: an
// edge gives them up after its --call-lost-after, wire.HoldingLost by default (its caller gets a 503 and may try again
// later) and cancels them, so that they do not run once their caller was answered.
// A waiting call whose deadline passes, or whose caller cancels it, never runs: its
// caller has already been answered.
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithCancelMemory sets how long, and for how many call ids at most, the instance
// remembers cancels that name no call running here, so that a call still waiting for
// a slot, or on its way, never starts once its caller gave up (by default
// DefaultCancelMemory and DefaultCancelMemoryMax; the oldest go first past the
// bound). A call that waits longer is still stopped by its deadline.
func WithCancelMemory(window time.Duration, max int) Option {
	return func(c *config) { c.cancelWindow, c.cancelMax = window, max }
}

// WithPresenceTTL sets how long the instance's presence outlives its last heartbeat:
// how long after a crash the tool still shows it (wire.DefaultPresenceTTL by
// default). The server counts whole seconds, at least one; the presence bucket's own
// TTL bounds it, so a longer one lasts only that long.
func WithPresenceTTL(d time.Duration) Option { return func(c *config) { c.presenceTTL = d } }

// WithHeartbeat sets how often presence is refreshed; by default a third of the
// presence TTL, so that two lost heartbeats do not make the instance vanish.
func WithHeartbeat(d time.Duration) Option { return func(c *config) { c.heartbeat = d } }

// WithLogger sets the logger (slog.Default() by default). Parameters and results are
// never logged.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.log = l } }

// WithSubjects sets the bus subjects' prefix (wire.DefaultSubjects by default).
func WithSubjects(s wire.Subjects) Option { return func(c *config) { c.subjects = s } }

// Worker serves one instance of a tool.
type Worker struct {
	nc    *nats.Conn
	tool  Tool
	cfg   config
	log   *slog.Logger
	inbox *inbox // while Run runs

	mu         sync.Mutex
	methods    []Method
	mcp        MCPHandler
	sessionEnd func(session string)
	started    bool
	svc        micro.Service      // while serving
	mcpMethod  *Method            // the MCP handler's, while serving
	direct     *nats.Subscription // the instance's own requests (Capabilities.SessionState)
	served     map[string]bool    // method names with an endpoint
	stopping   bool

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

	failing sync.Map // what (write's) the registry has not taken yet: said once
}

type runningCall struct {
	cancel context.CancelCauseFunc
	next   *runningCall // another call of the same id
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

// SetMethods replaces the tool's methods, for a tool whose methods change while it
// runs (a bridged MCP server that reports a new tool list). Before Run it replaces
// what Handle declared. While the worker serves, it checks the methods as Run does,
// serves the new ones, and then rewrites the tool's record, so a caller that sees a
// method in the registry finds it served. A call already running finishes with the
// handler it started with. A method no longer declared answers method_not_found; its
// endpoint stays in nats micro discovery until the worker stops, since micro cannot
// remove one endpoint. Between Run's start and Ready, SetMethods waits for Ready.
func (w *Worker) SetMethods(ctx context.Context, methods []Method) error {
	w.setMu.Lock()
	defer w.setMu.Unlock()
	w.mu.Lock()
	started, hasMCP := w.started, w.mcp != nil
	if !started {
		w.methods = slices.Clone(methods)
	}
	w.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-w.ready:
	case <-w.done:
		return fmt.Errorf("workers: tool %s: set methods: the worker has stopped", w.tool.ID)
	case <-ctx.Done():
		return ctx.Err()
	}
	rec, err := w.record(methods, hasMCP)
	if err != nil {
		return err
	}
	methods = slices.Clone(methods)
	if err := w.serveMethods(methods); err != nil {
		return err
	}
	if err := w.putTool(ctx, rec); err != nil {
		if ctx.Err() != nil { // stopped before serving anything: a clean stop, not a failure
			return nil
		}
		return fmt.Errorf("workers: tool %s: %w", w.tool.ID, err)
	}
	return nil
}

// serveMethods makes methods the ones calls are dispatched to, adding an endpoint for
// each that has none yet.
func (w *Worker) serveMethods(methods []Method) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return fmt.Errorf("workers: tool %s: set methods: the worker is stopping", w.tool.ID)
	}
	table := make(map[string]*Method, len(methods))
	for i := range methods {
		table[methods[i].Name] = &methods[i]
	}
	w.table.Store(&table)
	for i := range methods {
		name := methods[i].Name
		if w.served[name] {
			continue
		}
		if err := w.addEndpoint(w.svc, name, w.cfg.subjects.Call(w.tool.ID, name), w.lookup(name)); err != nil {
			return fmt.Errorf("workers: tool %s: method %s: %w", w.tool.ID, name, err)
		}
		w.served[name] = true
	}
	w.methods = methods
	return nil
}

// lookup finds the method a call of name goes to, or nil when it is declared no more.
func (w *Worker) lookup(name string) func() *Method {
	return func() *Method { return (*w.table.Load())[name] }
}

// stopServing makes SetMethods refuse from now on: the service is stopping.
func (w *Worker) stopServing() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
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

// Run registers the tool, serves its methods until ctx ends, then drains: it stops
// taking calls, lets every call it has taken finish and reply, removes its presence
// and returns nil. If the connection closes under it, Run waits for its running
// handlers and returns an error; its presence then expires with its TTL.
//
// The registry must exist on the NATS system (an edge, or toolgate's bootstrap,
// makes it): until it does, Run waits, saying so in its log.
//
// The drain fences the calls already delivered with a barrier on the whole
// connection, so workers that share one connection also wait for the calls queued
// to each other; give a worker its own connection where that matters.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("workers: Run called twice")
	}
	w.started = true
	methods := slices.Clone(w.methods)
	mcpHandler := w.mcp
	w.mu.Unlock()
	defer close(w.done)

	rec, err := w.record(methods, mcpHandler != nil)
	if err != nil {
		return err
	}
	if w.inbox, err = openInbox(w.nc, w.tool.ID); err != nil {
		return fmt.Errorf("workers: tool %s: %w", w.tool.ID, err)
	}
	defer w.inbox.close()
	if err := w.putTool(ctx, rec); err != nil {
		if ctx.Err() != nil { // stopped before serving anything: a clean stop, not a failure
			return nil
		}
		return fmt.Errorf("workers: tool %s: %w", w.tool.ID, err)
	}

	closed := w.nc.StatusChanged(nats.CLOSED)
	defer w.nc.RemoveStatusListener(closed)
	if w.nc.IsClosed() {
		return fmt.Errorf("workers: tool %s: %w", w.tool.ID, nats.ErrConnectionClosed)
	}

	w.base = context.WithoutCancel(ctx)
	w.slots = newSlots(w.cfg.concurrency)
	w.idle = make(chan job)
	holding, stopHolding := context.WithCancel(context.Background())
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		w.announceHolding(holding)
	}()
	defer func() { stopHolding(); <-announced }()
	cancels, err := w.nc.Subscribe(w.cfg.subjects.CancelTool(w.tool.ID), w.onCancel)
	if err != nil {
		return fmt.Errorf("workers: tool %s: subscribe to cancellations: %w", w.tool.ID, err)
	}
	defer cancels.Unsubscribe()
	ends, err := w.nc.Subscribe(w.cfg.subjects.SessionEnds(w.tool.ID), w.onSessionEnd)
	if err != nil {
		return fmt.Errorf("workers: tool %s: subscribe to session ends: %w", w.tool.ID, err)
	}
	defer ends.Unsubscribe()

	svc, err := w.serve(methods, mcpHandler)
	if err != nil {
		return err
	}
	presence := &wire.Presence{Tool: w.tool.ID, Instance: w.cfg.instance, Version: w.tool.Version, StartedAt: time.Now().UTC()}
	presence.Host, _ = os.Hostname()
	if err := w.putPresence(ctx, presence); err != nil {
		if ctx.Err() != nil { // stopped while starting: a clean stop, not a failure
			return w.drain(svc, closed)
		}
		return errors.Join(fmt.Errorf("workers: tool %s: presence: %w", w.tool.ID, err), w.drain(svc, closed))
	}
	close(w.ready)
	w.log.Info("worker serving", "methods", len(methods), "concurrency", w.cfg.concurrency)

	heartbeat := time.NewTicker(w.cfg.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ctx.Done():
			return w.drain(svc, closed)
		case <-closed:
			w.stopServing()
			w.abandon()
			w.waitIdle()
			w.log.Warn("worker lost its connection; presence expires with its TTL")
			return fmt.Errorf("workers: tool %s instance %s: %w", w.tool.ID, w.cfg.instance, nats.ErrConnectionClosed)
		case <-heartbeat.C:
			hctx, cancel := context.WithTimeout(ctx, w.cfg.heartbeat)
			if err := w.putPresence(hctx, presence); err != nil && ctx.Err() == nil {
				w.log.Warn("presence heartbeat failed", "err", err)
			}
			cancel()
		}
	}
}

// record checks the declaration and returns the tool's registry record.
func (w *Worker) record(methods []Method, hasMCP bool) (wire.Tool, error) {
	fail := func(format string, args ...any) (wire.Tool, error) {
		return wire.Tool{}, fmt.Errorf("workers: tool %s: "+format, append([]any{w.tool.ID}, args...)...)
	}
	if err := wire.CheckToolID(w.tool.ID); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	if !wire.ValidToken(w.cfg.instance) {
		return fail("instance %q: must be 1 to 128 letters, digits, '-' and '_'", w.cfg.instance)
	}
	if w.cfg.concurrency < 1 {
		return fail("concurrency: must be at least 1")
	}
	if w.cfg.cancelWindow <= 0 || w.cfg.cancelMax < 1 {
		return fail("cancel memory: the window must be positive and the bound at least 1")
	}
	if w.cfg.presenceTTL < time.Second {
		return fail("presence TTL: must be at least a second")
	}
	if ttl := w.cfg.presenceTTL; w.cfg.heartbeat <= 0 || w.cfg.heartbeat >= ttl {
		return fail("heartbeat: must be positive and shorter than the presence TTL (%v)", ttl)
	}
	if caps := w.tool.Capabilities; (caps.Resources || caps.Prompts || caps.Completions) && !hasMCP {
		return fail("capabilities: resources, prompts and completions are served by an MCP handler; declare one with HandleMCP")
	}
	rec := wire.Tool{
		ID: w.tool.ID, Title: w.tool.Title, Description: w.tool.Description, Version: w.tool.Version,
		Owner: w.tool.Owner, Capabilities: w.tool.Capabilities, Methods: []wire.Method{},
		Holding: true, // see announceHolding
	}
	for _, m := range methods {
		switch {
		case m.err != nil:
			return fail("method %s: %v", m.Name, m.err)
		case m.Handler == nil:
			return fail("method %s: no handler", m.Name)
		}
		rec.Methods = append(rec.Methods, wire.Method{
			Name: m.Name, Title: m.Title, Description: m.Description, InputSchema: m.InputSchema,
			OutputSchema: m.OutputSchema, Annotations: m.Annotations, Timeout: wire.Duration(m.Timeout),
			MCPName: m.MCPName,
		})
	}
	// The edges refuse a record that breaks these rules: refuse it here first, where
	// the tool's team reads why.
	if err := wire.CheckTool(&rec); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	if err := wire.CheckSchemas(&rec); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	return rec, nil
}

// putTool asks an edge to store the tool's record (wire.Subjects.AskRecord); the
// edge leaves an unchanged record alone, so that an unchanged tool does not look
// changed to the edges (MCP sessions are told of every change), though every
// instance asks at start. Until an edge stores it, it asks again (see write).
func (w *Worker) putTool(ctx context.Context, rec wire.Tool) error {
	rec.UpdatedAt = time.Time{} // the edge's to set
	msg, err := w.cfg.subjects.AskRecordMsg(&rec)
	if err != nil {
		return err
	}
	if err := w.write(ctx, "the tool's record", msg, recordAttempt); err != nil {
		return fmt.Errorf("write the tool's record: %w", err)
	}
	return nil
}

// ask sends one ask to the edges and waits for its answer: wire.ErrNotStored when no
// edge answers or the registry is missing.
func (w *Worker) ask(ctx context.Context, msg *nats.Msg) error {
	answer, err := w.inbox.request(ctx, msg)
	if err != nil {
		return err
	}
	_, _, err = wire.ReadAskReply(answer)
	if errors.Is(err, wire.ErrAskNoBucket) {
		return fmt.Errorf("%w: %w", wire.ErrNotStored, err)
	}
	return err
}

// putPresence asks an edge to write (or refresh) the instance's presence, to expire
// one TTL after.
func (w *Worker) putPresence(ctx context.Context, p *wire.Presence) error {
	msg, err := w.cfg.subjects.AskPresenceMsg(p, w.cfg.presenceTTL)
	if err != nil {
		return err
	}
	// Each attempt is short: a bucket whose stream has no leader yet (the cluster
	// restarted) answers nothing, and a write sent then is never acknowledged. The
	// next attempt, once it has one, must not wait for the heartbeat after.
	return w.write(ctx, "the instance's presence", msg, presenceAttempt)
}

// Bounds of one attempt to write to the registry. The record's is past the edge's own
// bound (wire.AskTimeout), so that an edge which cannot write says so first; an ask
// that no edge answers (the edge died with it) is asked again after it.
const (
	presenceAttempt = time.Second
	recordAttempt   = wire.AskTimeout + 2*time.Second
)

// registryRetry is how long a worker waits before it asks again when the registry is
// missing or could not take a write.
const registryRetry = time.Second

// write asks an edge to store msg until one does (see untilDone).
func (w *Worker) write(ctx context.Context, what string, msg *nats.Msg, attempt time.Duration) error {
	return w.untilDone(ctx, what, attempt, func(ctx context.Context) error { return w.ask(ctx, msg) })
}

// untilDone runs ask, an ask of the edges, until it is answered, refused for good (a
// bad record, one too large, a state bucket no admin made), or ctx ends. A worker may
// start before the edges that make the registry, or while the registry cannot write
// (its cluster restarting, without quorum): it waits for them rather than failing,
// says so once, and says when the ask is done at last. Each attempt waits at most
// attempt for its answer; one not answered in time is asked again at once, one refused
// as not stored or failed after registryRetry.
func (w *Worker) untilDone(ctx context.Context, what string, attempt time.Duration, ask func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := ask(actx)
		cancel()
		switch {
		case err == nil:
			if _, was := w.failing.LoadAndDelete(what); was {
				w.log.Info("the registry took the write at last", "writing", what)
			}
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("%s: %w (the registry did not take it)", what, ctx.Err())
		case errors.Is(err, context.DeadlineExceeded):
			w.failingOnce(what, "the registry did not answer a write in time; trying again", "within", attempt)
			// asked again at once
		case errors.Is(err, wire.ErrNotStored):
			w.failingOnce(what, "the registry is not on this NATS system yet; waiting for it")
		case errors.Is(err, &wire.AskError{Code: wire.AskFailed}):
			w.failingOnce(what, "the registry did not take the write; trying again", "err", err)
		default:
			return err
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: %w (the registry did not take it)", what, ctx.Err())
			case <-time.After(registryRetry):
			}
		}
	}
}

// failingOnce says why a write of what is asked again, once until it is stored: a
// heartbeat that fails through a whole outage says so once, and once when it is over.
func (w *Worker) failingOnce(what, msg string, args ...any) {
	if _, was := w.failing.LoadOrStore(what, true); !was {
		w.log.Warn(msg, append([]any{"writing", what}, args...)...)
	}
}

// serve starts the nats micro service with one endpoint per method, and one for the
// tool's MCP requests when it has an MCP handler.
func (w *Worker) serve(methods []Method, mcpHandler MCPHandler) (micro.Service, error) {
	version := strings.TrimPrefix(w.tool.Version, "v")
	if version == "" {
		version = "0.0.0"
	}
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:         w.tool.ID,
		Version:      version,
		Description:  w.tool.Description,
		Metadata:     map[string]string{"instance": w.cfg.instance},
		QueueGroup:   w.cfg.subjects.QueueGroup(w.tool.ID),
		StatsHandler: w.endpointStats,
	})
	if err != nil {
		return nil, fmt.Errorf("workers: tool %s: nats micro: %w", w.tool.ID, err)
	}
	w.mu.Lock()
	w.svc = svc
	w.mu.Unlock()
	if err := w.serveMethods(methods); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if mcpHandler != nil {
		m := &Method{Name: "mcp", mcp: true, Handler: func(ctx context.Context, c *Call) (any, error) {
			return mcpHandler(ctx, c, c.Method)
		}}
		w.mu.Lock()
		w.mcpMethod = m
		w.mu.Unlock()
		if err := w.addEndpoint(svc, m.Name, w.cfg.subjects.MCP(w.tool.ID), func() *Method { return m }); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("workers: tool %s: MCP endpoint: %w", w.tool.ID, err)
		}
	}
	if w.tool.Capabilities.SessionState {
		sub, err := w.nc.Subscribe(w.cfg.subjects.InstanceAll(w.tool.ID, w.cfg.instance), w.onDirect)
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("workers: tool %s: subscribe to the instance's requests: %w", w.tool.ID, err)
		}
		w.direct = sub
	}
	return svc, nil
}

// addEndpoint serves subject with the handler of the method lookup finds. Statistics
// are kept by subject: the MCP endpoint is named "mcp", which a method may be named
// too. The caller holds w.mu.
func (w *Worker) addEndpoint(svc micro.Service, name, subject string, lookup func() *Method) error {
	st := &methodStats{}
	w.stats[subject] = st
	return svc.AddEndpoint(name, w.intake(lookup, st), micro.WithEndpointSubject(subject))
}

// intake is the endpoint's micro handler. nats micro calls it for one message at a
// time per endpoint; see accept.
func (w *Worker) intake(lookup func() *Method, st *methodStats) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		w.accept(inbound{subject: req.Subject(), reply: req.Reply(), data: req.Data(), header: nats.Header(req.Headers())}, lookup(), st)
	})
}

// onDirect takes a request sent to this instance alone (wire.Subjects.Instance): an
// MCP session's, which the edges send to the instance that answered the session
// first, for a tool that keeps state per session. It goes where the same request on
// the tool's own subject goes.
func (w *Worker) onDirect(msg *nats.Msg) {
	in := inbound{subject: msg.Subject, reply: msg.Reply, data: msg.Data, header: msg.Header}
	kind := strings.TrimPrefix(msg.Subject, w.cfg.subjects.Instance(w.tool.ID, w.cfg.instance)+".")
	var m *Method
	subject := w.cfg.subjects.MCP(w.tool.ID)
	if name, ok := strings.CutPrefix(kind, "call."); ok {
		m, subject = w.lookup(name)(), w.cfg.subjects.Call(w.tool.ID, name)
	} else if kind == "mcp" {
		m = w.mcpMethod
	} else {
		w.log.Warn("request refused: its subject names no method", "subject", msg.Subject)
		return
	}
	w.mu.Lock()
	st := w.stats[subject]
	w.mu.Unlock()
	if st == nil {
		st = &methodStats{} // a method declared no more: refused below, counted nowhere
	}
	w.accept(in, m, st)
}

// accept hands a call to a runner and, at the concurrency bound, queues it for a
// slot (see slots), so the calls queue rather than being dropped.
func (w *Worker) accept(in inbound, m *Method, st *methodStats) {
	if !wire.CallReplyAcceptable(in.reply) {
		// Every call an edge sends waits for its answer on a plain reply subject; a
		// call without one, or one answered into JetStream's API, is none of theirs.
		w.log.Warn("call refused: its reply subject is none an edge gives", "subject", in.subject)
		return
	}
	if m == nil {
		_ = w.nc.PublishMsg(reply(in.reply, nil, &Error{Code: CodeMethodNotFound, Message: "the tool has no such method any more", Status: 404}))
		return
	}
	j := job{m, st, in, in.header.Get(wire.HeaderCallID)}
	if run, taken := w.slots.take(j); !taken || !run {
		return // queued for a slot, or nobody can hear the reply: the connection is gone
	}
	select {
	case w.idle <- j: // a runner done with its last call takes it
	default:
		go w.runner(j)
	}
}

// runner runs the call it is started with, then those handed to it while it waits,
// until Run returns. Runners outlive their calls so that a call pays neither for a new
// goroutine nor for its stack growing again through the handler, the encoding and the
// reply (both showed in the worker's profile under load). A runner is started only
// when none waits, and runs the queued calls before it waits, so there are about as
// many runners as the most calls ever run at once.
func (w *Worker) runner(j job) {
	for {
		w.call(j.m, j.st, j.in)
		next, ok := w.slots.next(j)
		if ok {
			j = next
			continue
		}
		select {
		case j = <-w.idle:
		case <-w.done:
			return
		}
	}
}

type job struct {
	m      *Method
	st     *methodStats
	in     inbound
	callID string
}

type inbound struct {
	subject string
	reply   string
	data    []byte
	header  nats.Header
}

// call runs one call and replies, in a slot of w.slots.
func (w *Worker) call(m *Method, st *methodStats, in inbound) {
	st.inFlight.Add(1)
	defer st.inFlight.Add(-1)
	start := time.Now()

	respond := reply
	if m.mcp {
		respond = mcpReply
	}
	req, readErr := w.cfg.subjects.ReadRequest(in.subject, in.header, in.data)
	method := m.Name
	if m.mcp {
		method = req.Method
	}
	c := &Call{
		Tool: w.tool.ID, Method: method, Params: in.data, Header: in.header,
		Account: req.Account, RequestID: req.RequestID, CallID: req.CallID, Session: req.Session,
		Deadline: req.Deadline, LogLevel: req.LogLevel, w: w, req: req, progress: req.Progress,
	}
	if len(req.ClientCapabilityObject) > 0 && json.Valid(req.ClientCapabilityObject) {
		c.ClientCapabilities = json.RawMessage(req.ClientCapabilityObject)
	}

	ctx := wire.Propagator.Extract(w.base, wire.HeaderCarrier(in.header))
	var span trace.Span = noop.Span{}
	if wire.Tracing() { // without a tracer provider the span would record nothing
		spanName := "tool.call " + w.tool.ID + "." + m.Name
		if m.mcp {
			spanName = "tool.mcp " + w.tool.ID + " " + method
		}
		ctx, span = tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(
				attribute.String("messaging.system", "nats"),
				attribute.String("toolgate.tool", w.tool.ID),
				attribute.String("toolgate.method", method),
				attribute.String("toolgate.request_id", c.RequestID),
				attribute.String("toolgate.call_id", c.CallID),
				attribute.String("toolgate.account", c.Account),
				attribute.String("toolgate.instance", w.cfg.instance),
			))
		defer span.End()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	switch {
	case !c.Deadline.IsZero():
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, c.Deadline)
		defer stop()
	case m.Timeout > 0:
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, m.Timeout)
		defer stop()
	}
	rc := w.track(c.CallID, cancel)
	defer w.untrack(c.CallID, rc)

	var result any
	var err error
	switch {
	case readErr != nil:
		// Only a gateway breaking the contract sends one: say so rather than guess.
		err = &Error{Code: wire.CodeBadRequest, Message: readErr.Error()}
		w.log.Warn("call not run: the request breaks the wire contract", "method", method, "err", readErr)
	case ctx.Err() == nil:
		result, err = w.invoke(ctx, m, c)
	case errors.Is(context.Cause(ctx), ErrCancelled):
		// Cancelled while it waited for a slot: nobody waits for the answer, and the
		// handler must not act on a request its caller gave up.
		err = &Error{Code: CodeCancelled, Message: "the caller cancelled the call before it started"}
		w.log.Info("call not run: cancelled before it started", "method", method, "request_id", c.RequestID)
	default:
		err = &Error{Code: CodeTimeout, Message: "the call's deadline passed before it started", Status: 504}
		w.log.Info("call not run: its deadline passed while it waited", "method", method, "request_id", c.RequestID)
	}
	msg := respond(in.reply, result, err)
	if max := w.nc.MaxPayload(); max > 0 {
		if size := wire.MessageSize(msg); size > max {
			err = &Error{Code: CodeReplyTooLarge, Message: fmt.Sprintf("the reply of %d bytes exceeds the bus's max_payload of %d", size, max), Status: 502}
			msg = respond(in.reply, nil, err)
		}
	}
	if w.tool.Capabilities.SessionState && (c.Session != "" || c.Header.Get(wire.HeaderProtocolVersion) != "") {
		// A session's instance, and a 2026-07-28 request's, whose answer may name
		// state held here (a bridged server's task).
		if msg.Header == nil {
			msg.Header = nats.Header{}
		}
		msg.Header[wire.HeaderInstance] = []string{w.cfg.instance} // see onDirect
	}
	st.calls.Add(1)
	st.nanos.Add(int64(time.Since(start)))
	if err != nil {
		st.errors.Add(1)
		te := toolError(err)
		status, code := te.Error(), te.Code
		var asRPC *RPCError
		if m.mcp || errors.As(err, &asRPC) {
			re := rpcError(err)
			status, code = re.Error(), strconv.FormatInt(re.Code, 10)
		}
		span.SetStatus(codes.Error, status)
		span.SetAttributes(attribute.String("toolgate.error_code", code))
		var own *Error
		var rpc *RPCError
		if !errors.As(err, &own) && !errors.As(err, &rpc) {
			w.log.Warn("call failed", "method", method, "request_id", c.RequestID, "trace_id", trace.SpanContextFromContext(ctx).TraceID(), "err", err)
		}
	}
	if in.reply == "" {
		return // published without a reply subject: nobody waits
	}
	if err != nil && !c.Deadline.IsZero() && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// The caller's deadline has passed and the caller reports its own timeout; an
		// error reply would race its timer and make the same timeout look like the tool's.
		return
	}
	if err := w.nc.PublishMsg(msg); err != nil {
		w.log.Warn("reply not sent", "method", method, "request_id", c.RequestID, "err", err)
	}
}

// invoke runs the handler, turning a panic into an error reply: one bad call must
// not take down the instance and every other call it runs.
func (w *Worker) invoke(ctx context.Context, m *Method, c *Call) (result any, err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("handler panicked", "method", c.Method, "request_id", c.RequestID, "panic", p, "stack", string(debug.Stack()))
			result, err = nil, &Error{Code: CodeInternal, Message: "the handler panicked"}
		}
	}()
	return m.Handler(ctx, c)
}

// track makes the call cancellable by a message on its cancel subject, until untrack.
// A call whose cancel came before it started is cancelled at once. A call without an
// id is not tracked (nil).
func (w *Worker) track(callID string, cancel context.CancelCauseFunc) *runningCall {
	if callID == "" {
		return nil
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	if w.cancelled.has(callID, time.Now()) {
		cancel(ErrCancelled)
	}
	rc := &runningCall{cancel: cancel, next: w.running[callID]}
	w.running[callID] = rc
	return rc
}

// untrack ends what track began.
func (w *Worker) untrack(callID string, rc *runningCall) {
	if rc == nil {
		return
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	head := w.running[callID]
	if head == rc {
		if rc.next == nil {
			delete(w.running, callID)
		} else {
			w.running[callID] = rc.next
		}
		return
	}
	for p := head; p != nil; p = p.next {
		if p.next == rc {
			p.next = rc.next
			return
		}
	}
}

// onCancel cancels the running calls a cancel message names, and remembers it for
// calls that have yet to start (see WithCancelMemory). Every instance of the tool
// hears every cancel of the tool's calls; most name a call running elsewhere.
func (w *Worker) onCancel(msg *nats.Msg) {
	tool, id, ok := w.cfg.subjects.ParseCancel(msg.Subject)
	if !ok || tool != w.tool.ID {
		return
	}
	w.cancelMu.Lock()
	defer w.cancelMu.Unlock()
	for rc := w.running[id]; rc != nil; rc = rc.next {
		rc.cancel(ErrCancelled)
	}
	w.cancelled.add(id, time.Now())
}

// drain stops taking calls, lets the ones taken finish and reply, and removes the
// instance's presence.
func (w *Worker) drain(svc micro.Service, closed <-chan nats.Status) error {
	start := time.Now()
	// Stop drains the endpoint subscriptions: the server routes no new call here, and
	// the calls already routed here are still handed to intake.
	w.stopServing()
	stopErr := svc.Stop()
	if w.direct != nil {
		// The edges send the sessions held here to another instance once this one no
		// longer answers.
		stopErr = errors.Join(stopErr, w.direct.Drain())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	presErr := w.ask(ctx, w.cfg.subjects.AskPresenceDeleteMsg(w.tool.ID, w.cfg.instance))

	// Once the server has answered a flush sent after the unsubscriptions, every call
	// it routed here sits in the connection's pending queues; the barrier runs when the
	// subscriptions' callbacks have taken all of them.
	_ = w.nc.FlushTimeout(5 * time.Second)
	taken := make(chan struct{})
	if err := w.nc.Barrier(func() { close(taken) }); err != nil {
		close(taken) // the connection is closed: nothing more will arrive
	}
	select {
	case <-taken:
	case <-closed:
		w.abandon()
	}
	w.waitIdle()
	_ = w.nc.FlushTimeout(5 * time.Second) // the last replies leave before Run returns
	w.log.Info("worker drained", "took_ms", time.Since(start).Milliseconds())

	if stopErr != nil {
		stopErr = fmt.Errorf("workers: tool %s: stop: %w", w.tool.ID, stopErr)
	}
	if presErr != nil {
		presErr = fmt.Errorf("workers: tool %s: presence: %w", w.tool.ID, presErr)
	}
	return errors.Join(stopErr, presErr)
}

// abandon gives up on the calls not yet taken: the connection is gone, so nobody
// would hear their replies.
func (w *Worker) abandon() { w.slots.die() }

// waitIdle returns when no call runs or waits for a slot; it is called only when no
// more calls will be taken.
func (w *Worker) waitIdle() { w.slots.waitIdle() }

type methodStats struct {
	inFlight, calls, errors, nanos atomic.Int64
}

// EndpointStats is the data a method's endpoint adds to nats micro STATS. The
// standard fields count what the endpoint took in; these count what the handlers did.
type EndpointStats struct {
	InFlight       int64         `json:"in_flight"`
	Calls          int64         `json:"calls"`
	Errors         int64         `json:"errors"`
	ProcessingTime time.Duration `json:"processing_time"`
}

func (w *Worker) endpointStats(e *micro.Endpoint) any {
	w.mu.Lock()
	st := w.stats[e.Subject]
	w.mu.Unlock()
	if st == nil {
		return nil
	}
	return EndpointStats{
		InFlight: st.inFlight.Load(), Calls: st.calls.Load(), Errors: st.errors.Load(),
		ProcessingTime: time.Duration(st.nanos.Load()),
	}
}
