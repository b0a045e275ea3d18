// Package gateway is the one path every tool call takes, whichever door it came in by
// (the HTTP tool-call route, the direct tool API, an MCP session): the tool and method
// must be visible to the caller, the parameters a JSON object valid against the
// method's input schema, the caller within its rate; then the call goes over the bus
// with its deadline and comes back as the tool answered it. The other MCP requests a
// session forwards to a tool (resources, prompts, completion) take the same path
// (Forward), without a method schema to check.
package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"
	"golang.org/x/time/rate"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/payloads"
	"github.com/toolgate/toolgate/registry"
)

// ErrInvalidJSON: the parameters are not a JSON object.
var ErrInvalidJSON = errors.New("parameters must be a JSON object")

// RateLimitedError says the caller is over its rate and when to try again.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited: retry after %v", e.RetryAfter)
}

// Config holds the gateway's limits.
type Config struct {
	// DefaultTimeout bounds a call whose method names no timeout.
	DefaultTimeout time.Duration
	// MaxTimeout bounds every call, whatever the method or caller asks.
	MaxTimeout time.Duration
	// AsyncMaxTimeout bounds a call that outlives its request (an HTTP caller's
	// Prefer: respond-async, package calls) instead of MaxTimeout: its caller does not
	// hold a connection open for it.
	AsyncMaxTimeout time.Duration
	// Rate and Burst apply per key (or per link) when the account sets no limits.
	Rate  float64
	Burst int
	// CallLostAfter is how long a call of a tool whose workers name the calls they hold
	// (wire.Tool.Holding) may go unheard of before it is given up as lost (503,
	// worker_lost): 0 for wire.HoldingLost, else at least bus.MinCallLost. Longer
	// suits workers on hosts so loaded that their word on a call can come late.
	CallLostAfter time.Duration
	// Subjects names the bus subjects.
	Subjects wire.Subjects
}

// DefaultConfig: 30 s per call unless the method says otherwise, 5 min at most (15
// min for a call that outlives its request), 50 calls a second with bursts of 100, a
// call unheard of for a second lost.
func DefaultConfig() Config {
	return Config{DefaultTimeout: 30 * time.Second, MaxTimeout: 5 * time.Minute, AsyncMaxTimeout: DefaultAsyncMaxTimeout,
		Rate: 50, Burst: 100, CallLostAfter: wire.HoldingLost, Subjects: wire.DefaultSubjects}
}

// DefaultAsyncMaxTimeout is Config.AsyncMaxTimeout by default.
const DefaultAsyncMaxTimeout = 15 * time.Minute

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case c.DefaultTimeout <= 0:
		return errors.New("gateway: default-timeout: must be positive")
	case c.MaxTimeout < c.DefaultTimeout:
		return errors.New("gateway: max-timeout: must be at least default-timeout")
	case c.AsyncMaxTimeout < c.MaxTimeout:
		return errors.New("gateway: async-max-timeout: must be at least max-timeout")
	case c.Rate <= 0:
		return errors.New("gateway: rate: must be positive")
	case c.Burst < 1:
		return errors.New("gateway: burst: must be at least 1")
	case c.CallLostAfter != 0 && c.CallLostAfter < bus.MinCallLost:
		return fmt.Errorf("gateway: call-lost-after: must be at least %v", bus.MinCallLost)
	}
	return nil
}

// Gateway executes tool calls.
type Gateway struct {
	nc     *nats.Conn
	view   *registry.View
	cfg    Config
	shared *registry.Store // the shared rate buckets; nil keeps them in this process
	log    *slog.Logger
	calls  *bus.Watcher // gives up the calls whose worker died
	trail  *audit.Trail // nil: no audit trail
	creds  Credentials  // nil: calls carry no connection values
	// connectURL names where an account connects a tool (WithConnectURL); nil: nowhere
	connectURL func(tool string) string
	quotas     *quotaCounts // nil: no quotas (WithQuotas)
	// approver holds the calls that need a person's approval (WithApprovals).
	approver Approver

	payloads     *payloads.Store // nil: no claim check (WithPayloads)
	payloadLimit int64

	fallbackLogged atomic.Int64 // unix seconds of the last warning that the shared buckets failed
	sharedDown     atomic.Int64 // unix nanoseconds until which the shared buckets are left alone

	mu       sync.RWMutex
	limiters map[limiterKey]*limiter
}

// Option configures a Gateway.
type Option func(*Gateway)

// WithSharedRates keeps rate limits in the registry's shared token buckets, so that a
// key's rate holds across every edge, not per edge. Each edge takes tokens from a
// key's bucket a lease at a time (a tenth of a second's worth, at least one) and
// spends them locally, so a call waits on the bus only when its edge's lease is spent.
// What a lease has left after LeaseTime goes back with the edge's next take. When the bucket cannot be reached, the
// edge falls back to a bucket of its own and logs it on log.
func WithSharedRates(store *registry.Store, log *slog.Logger) Option {
	return func(g *Gateway) { g.shared, g.log = store, log }
}

// WithLogger logs what the gateway has to say on log.
func WithLogger(log *slog.Logger) Option {
	return func(g *Gateway) { g.log = log }
}

// LeaseTime is how much of a key's rate an edge takes from its shared bucket at once,
// and how long it keeps what it has not spent.
const LeaseTime = 100 * time.Millisecond

// A call waits at most SharedRateTimeout for a lease from a shared bucket; past it, or
// on any failure, the edge's own buckets apply, and the shared ones are tried again
// SharedRateRetry later. A shared bucket is out of reach while its stream elects a
// new leader (a NATS node died): calls must not wait for that, one after the other
// behind the key's lease.
const (
	SharedRateTimeout = 250 * time.Millisecond
	SharedRateRetry   = time.Second
)

// New returns a Gateway that calls tools over nc and checks calls against view.
func New(nc *nats.Conn, view *registry.View, cfg Config, opts ...Option) (*Gateway, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	g := &Gateway{nc: nc, view: view, cfg: cfg, limiters: map[limiterKey]*limiter{}, log: slog.Default()}
	for _, o := range opts {
		o(g)
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	if g.quotas != nil {
		g.quotas.log = g.log
	}
	var err error
	if g.calls, err = bus.NewWatcher(nc, cfg.Subjects, cfg.CallLostAfter, g.log); err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return g, nil
}

// View returns the registry view calls are checked against.
func (g *Gateway) View() *registry.View { return g.view }

// Conn returns the NATS connection calls travel on.
func (g *Gateway) Conn() *nats.Conn { return g.nc }

// Config returns the gateway's configuration.
func (g *Gateway) Config() Config { return g.cfg }

// Call is one tool call.
type Call struct {
	Principal registry.Principal
	Tool      string
	Method    string
	Params    []byte
	// Transport names the door the call came in by, for the audit trail (audit's
	// Transport names); empty for an MCP transport that does not say which.
	Transport string
	// Arrived is when the call reached its door, from which the audit trail times it;
	// zero: when it reached the gateway.
	Arrived time.Time
	// CallID names the call on the bus: its cancel and progress subjects. Call makes a
	// random one when it is empty; a caller that must know it beforehand (to follow
	// the call's progress) makes it, never from anything its client sent.
	CallID string
	// RequestID is the caller's request id, for logs: it reaches the tool, and names
	// nothing on the bus.
	RequestID string
	// Timeout is what the caller asked for (0: no preference); the method's timeout and
	// the gateway's maximum still bound it.
	Timeout time.Duration
	// MCPContext is what the call carries of the MCP client it is made for (its
	// session, capabilities, log level, the stream it is answered on, the worker
	// instance holding its session), made once by the edge serving the client and put
	// on the request as it is. When Instance no longer answers, the call goes to any
	// instance, which names itself in the reply (wire.HeaderInstance).
	wire.MCPContext
	// Entry is the method, when the caller has already found it visible to Principal
	// in the view (the edge does, to answer in the documented order); Check then does
	// not look it up again.
	Entry *registry.MethodEntry

	// Payload is the request's params, stored by the caller as a payload (an edge that
	// streamed a large body there, checking on the way that it is a JSON object);
	// Params is then left empty, and the params are checked against the schema by the
	// tool rather than here, which would need them whole in memory.
	Payload *wire.Payload
	// StreamReply says the caller streams a reply that names a payload itself
	// (Reply.Payload), and removes it; otherwise the reply comes back whole.
	StreamReply bool

	sealed string // the account's connection values sealed to the tool (WithCredentials)
	// sealedAt is when the values were read to be sealed: a grant the tool's server
	// refuses is marked refused only if it was not renewed since.
	sealedAt time.Time
	// hold is what the call holds of its quotas' calls at once, from Check until it
	// is answered (Call, Forward, Refuse, Answered).
	hold *quotaHold
}

// Check runs every check a call must pass before it is sent, against the current
// registry, and returns the method it calls. ctx bounds taking a lease of the caller's
// rate from its shared bucket. It leaves in c.Params what the tool is sent: whole
// numbers in their integer form (registry.IntegerForm).
func (g *Gateway) Check(ctx context.Context, c *Call) (*registry.MethodEntry, error) {
	m := c.Entry
	if m == nil {
		var err error
		if m, err = g.view.Snapshot().Method(c.Principal, c.Tool, c.Method); err != nil {
			return nil, g.Unlisted(ctx, c, err)
		}
	}
	if c.Payload == nil {
		if !registry.IsObject(c.Params) {
			return nil, ErrInvalidJSON
		}
		if err := m.Validate(c.Params); err != nil {
			return nil, err
		}
	}
	if err := g.checkAudit(c.Principal.Account); err != nil {
		return nil, err
	}
	if err := g.allow(ctx, c.Principal); err != nil {
		return nil, err
	}
	if err := g.sealCredentials(ctx, c, m.Tool, true); err != nil {
		return nil, err
	}
	hold, err := g.takeQuotas(ctx, c.Principal, c.Tool, c.Method)
	if err != nil {
		return nil, err
	}
	c.hold = hold
	if c.Payload == nil {
		c.Params = registry.IntegerForm(c.Params)
	}
	return m, nil
}

// Call checks c and sends it to the tool, returning the tool's reply or a typed error
// (registry, gateway or bus errors). A call of a tool whose workers name the calls
// they hold fails with bus.ErrCallLost once its worker stops naming it.
//
// A call that finds no worker on the bus while the registry holds live instances of
// the tool is sent again, for up to MovingWorkersWait (see send). Once answered, the
// call is recorded in the audit trail (WithAudit).
func (g *Gateway) Call(ctx context.Context, c *Call) (*wire.Reply, error) {
	began, params := time.Now(), c.Params
	if c.CallID == "" {
		c.CallID = nuid.Next() // the record's id too
	}
	reply, err := g.call(ctx, c)
	g.ended(ctx, c)
	return g.audited(ctx, c, began, params, reply, err)
}

// call is Call before its record in the audit trail.
func (g *Gateway) call(ctx context.Context, c *Call) (*wire.Reply, error) {
	m, err := g.Check(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := g.hold(ctx, c); err != nil {
		return nil, err
	}
	return g.Send(ctx, c, m, g.Timeout(m.Method, c.Timeout))
}

// Send sends c, a call of m that Check passed, with timeout as its deadline (Timeout's,
// or AsyncTimeout's for a call that outlives its request), as Call does; the audit
// trail's record of it is its caller's (Answered).
func (g *Gateway) Send(ctx context.Context, c *Call, m *registry.MethodEntry, timeout time.Duration) (*wire.Reply, error) {
	reply, err := g.send(ctx, c, false, timeout, m.Tool.Holding)
	return reply, g.refusedGrant(ctx, c, m.Tool, err)
}

// Forward sends an MCP request other than a tool call to the tool's workers, on its
// tg.mcp subject: c.Method is the MCP method (resources, prompts, completion), c.Params
// its params (nothing or null is an empty object). It passes the checks every call
// passes, in the same order as Call: the tool is visible to c.Principal (a registry error
// otherwise), the params are a JSON object (ErrInvalidJSON), the caller is within its
// rate (*RateLimitedError) and its quotas (*QuotaExceededError); it then takes the default timeout, shortened by
// c.Timeout. A JSON-RPC error the workers answer with is a *wire.RPCError. Once
// answered, the request is recorded in the audit trail (WithAudit) as a call is.
func (g *Gateway) Forward(ctx context.Context, c *Call) (*wire.Reply, error) {
	began, params := time.Now(), c.Params
	if c.CallID == "" {
		c.CallID = registry.NewID("mcp-") // the record's id too
	}
	reply, err := g.forward(ctx, c)
	g.ended(ctx, c)
	return g.audited(ctx, c, began, params, reply, err)
}

// forward is Forward before its record in the audit trail.
func (g *Gateway) forward(ctx context.Context, c *Call) (*wire.Reply, error) {
	t, err := g.view.Snapshot().Tool(c.Principal, c.Tool)
	if err != nil {
		return nil, err
	}
	if len(c.Params) == 0 || string(c.Params) == "null" {
		c.Params = []byte("{}")
	}
	if !registry.IsObject(c.Params) {
		return nil, ErrInvalidJSON
	}
	if err := g.checkAudit(c.Principal.Account); err != nil {
		return nil, err
	}
	if err := g.allow(ctx, c.Principal); err != nil {
		return nil, err
	}
	if err := g.sealCredentials(ctx, c, t.Tool, false); err != nil {
		return nil, err
	}
	hold, err := g.takeQuotas(ctx, c.Principal, c.Tool, c.Method)
	if err != nil {
		return nil, err
	}
	c.hold = hold
	if err := g.holdForwarded(ctx, c); err != nil {
		return nil, err
	}
	f := *c
	if f.RequestID == "" {
		f.RequestID = f.CallID // the request has no id of its own
	}
	reply, err := g.send(ctx, &f, true, g.Timeout(nil, c.Timeout), t.Tool.Holding)
	return reply, g.refusedGrant(ctx, &f, t.Tool, err)
}

// send puts a checked call on the bus, naming it when the caller did not.
//
// A call that finds no worker on the bus while the registry holds live instances of
// the tool is sent again, for up to MovingWorkersWait: its workers are moving to
// another NATS node (theirs died or was cut off) and will subscribe there in a moment.
// Nothing received the call, so sending it again cannot run it twice.
func (g *Gateway) send(ctx context.Context, c *Call, mcp bool, timeout time.Duration, holding bool) (*wire.Reply, error) {
	callID := c.CallID
	if callID == "" {
		callID = nuid.Next()
	}
	req := &wire.Request{
		Tool:       c.Tool,
		MCP:        mcp,
		Method:     c.Method,
		CallID:     callID,
		RequestID:  c.RequestID,
		Account:    c.Principal.Account,
		Deadline:   time.Now().Add(timeout),
		Data:       c.Params,
		MCPContext: c.MCPContext,
	}
	req.Header = withSealed(req.Header, c.sealed)
	stored, err := g.storeParams(ctx, c, req)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		defer g.payloads.Delete(context.WithoutCancel(ctx), c.Tool, *stored)
	}
	began := time.Now()
	for {
		reply, err := g.calls.Send(ctx, req, holding)
		if err == nil {
			return g.takeReply(ctx, c, reply)
		}
		if errors.Is(err, bus.ErrNoResponders) && req.Instance != "" {
			// The instance that held the session is gone (stopped, or draining): any
			// other takes it, and names itself in its reply. Nothing received the
			// call, so sending it again cannot run it twice.
			req.Instance = ""
			continue
		}
		if !errors.Is(err, bus.ErrNoResponders) || g.view.Snapshot().Instances(c.Tool) == 0 ||
			time.Since(began) >= MovingWorkersWait || time.Now().After(req.Deadline) {
			return reply, err
		}
		select {
		case <-ctx.Done():
			return reply, err
		case <-time.After(movingWorkersRetry):
		}
	}
}

// MovingWorkersWait bounds how long a call waits for the workers of a tool the
// registry says is online when none is on the bus (see send): longer than a worker
// takes to notice its NATS node is gone and reconnect to another (bus.PingInterval
// times bus.MaxPingsOut and a little).
const (
	MovingWorkersWait  = 2 * time.Second
	movingWorkersRetry = 100 * time.Millisecond
)

// Timeout is how long a call of m may take: the method's own timeout (or the
// default), shortened by what the caller asked for, never beyond the maximum.
func (g *Gateway) Timeout(m *registry.Method, asked time.Duration) time.Duration {
	return min(g.wanted(m, asked), g.cfg.MaxTimeout)
}

// AsyncTimeout is how long a call of m that outlives its request may take: as Timeout,
// bounded by AsyncMaxTimeout instead.
func (g *Gateway) AsyncTimeout(m *registry.Method, asked time.Duration) time.Duration {
	return min(g.wanted(m, asked), g.cfg.AsyncMaxTimeout)
}

// wanted is the method's own timeout (or the default), shortened by what the caller
// asked for.
func (g *Gateway) wanted(m *registry.Method, asked time.Duration) time.Duration {
	d := g.cfg.DefaultTimeout
	if m != nil && m.Timeout > 0 {
		d = time.Duration(m.Timeout)
	}
	if asked > 0 && asked < d {
		d = asked
	}
	return d
}

type limiter struct {
	rate  float64
	burst int
	l     *rate.Limiter // this process's bucket: the whole limit, or the fallback

	// A lease from the shared bucket (WithSharedRates). mu is held while a lease is
	// taken, so one call of a key goes to the bus for it and the others wait for it.
	mu      sync.Mutex
	tokens  int
	expires time.Time
}

// limiterKey names a token bucket: a key's, or a link's (its account and tool). It is a
// struct of strings, not a string made per call, so that finding a bucket allocates
// nothing.
type limiterKey struct {
	key, account, tool string
}

// allow applies the token bucket of p's key (or link): the shared one with
// WithSharedRates, else this process's, with which N edges behind a balancer give an
// account up to N times its rate.
func (g *Gateway) allow(ctx context.Context, p registry.Principal) error {
	r, burst := g.cfg.Rate, g.cfg.Burst
	if a := g.view.Snapshot().Account(p.Account); a != nil {
		if a.Limits.Rate > 0 {
			r = a.Limits.Rate
		}
		if a.Limits.Burst > 0 {
			burst = a.Limits.Burst
		}
	}
	id := limiterKey{account: p.Account, tool: p.Tool}
	if p.Key != nil {
		id = limiterKey{key: p.Key.ID}
	}
	g.mu.RLock()
	lim := g.limiters[id]
	g.mu.RUnlock()
	if lim == nil || lim.rate != r || lim.burst != burst {
		lim = &limiter{rate: r, burst: burst, l: rate.NewLimiter(rate.Limit(r), burst)}
		g.mu.Lock()
		g.limiters[id] = lim
		g.mu.Unlock()
	}
	if g.shared != nil {
		if handled, err := g.allowShared(ctx, id, lim); handled {
			return err
		}
	}
	if lim.l.Allow() {
		return nil
	}
	// Over the rate (or at its edge: the bucket may have filled since): the wait a
	// reservation would have is when to try again.
	res := lim.l.Reserve()
	if d := res.Delay(); d > 0 {
		res.Cancel()
		return &RateLimitedError{RetryAfter: d}
	}
	return nil
}

// allowShared spends a token of this edge's lease on the shared bucket of id, taking a
// new lease when it is spent. handled is false when the shared bucket could not be
// reached, and the caller falls back to this process's bucket.
func (g *Gateway) allowShared(ctx context.Context, id limiterKey, lim *limiter) (handled bool, err error) {
	lim.mu.Lock()
	defer lim.mu.Unlock()
	now := time.Now()
	if lim.tokens > 0 && now.Before(lim.expires) {
		lim.tokens--
		return true, nil
	}
	want := max(1, min(lim.burst, int(math.Ceil(lim.rate*LeaseTime.Seconds()))))
	rid := registry.LinkRateID(id.account, id.tool)
	if id.key != "" {
		rid = registry.KeyRateID(id.key)
	}
	if now.UnixNano() < g.sharedDown.Load() {
		return false, nil // it failed a moment ago: see SharedRateRetry
	}
	tctx, cancel := context.WithTimeout(ctx, SharedRateTimeout)
	took, wait, err := g.shared.TakeTokens(tctx, rid, lim.rate, lim.burst, want, lim.tokens, now)
	cancel()
	if err != nil {
		if ctx.Err() == nil {
			g.sharedDown.Store(now.Add(SharedRateRetry).UnixNano())
		}
		if last := g.fallbackLogged.Load(); ctx.Err() == nil && now.Unix()-last >= 60 && g.fallbackLogged.CompareAndSwap(last, now.Unix()) {
			g.log.Warn("rate limit: the shared bucket cannot be reached; each edge's own bucket applies (logged at most once a minute)", "err", err)
		}
		return false, nil
	}
	lim.tokens = 0 // given back
	if took == 0 {
		return true, &RateLimitedError{RetryAfter: max(wait, time.Millisecond)}
	}
	lim.tokens, lim.expires = took-1, now.Add(LeaseTime)
	return true, nil
}
