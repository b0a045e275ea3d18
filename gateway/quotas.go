package gateway

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/registry"
)

// QuotaExceededError says a call is over one of its account's quotas: the rule (its
// index in the account's list), the window (or WindowConcurrent), its limit, when the
// window resets, and when to try again.
type QuotaExceededError struct {
	Account    string
	Index      int
	Rule       registry.Quota
	Window     string
	Limit      int64
	ResetsAt   time.Time // zero for calls at once
	RetryAfter time.Duration
}

// WindowConcurrent names the limit of calls at once in a QuotaExceededError.
const WindowConcurrent = "concurrent"

func (e *QuotaExceededError) Error() string {
	if e.Window == WindowConcurrent {
		return fmt.Sprintf("quota %d of account %s: %d calls at once", e.Index, e.Account, e.Limit)
	}
	return fmt.Sprintf("quota %d of account %s: %d calls per %s, resets at %s", e.Index, e.Account, e.Limit, e.Window,
		e.ResetsAt.Format(time.RFC3339))
}

// QuotaDetail is the detail of a quota_exceeded failure, and its JSON-RPC data.
type QuotaDetail struct {
	Rule         int            `json:"rule"`
	Quota        registry.Quota `json:"quota"`
	Window       string         `json:"window"`
	Limit        int64          `json:"limit"`
	ResetsAt     *time.Time     `json:"resets_at,omitempty"`
	RetryAfterMs int64          `json:"retryAfterMs"`
}

// WithQuotas counts calls against the quotas of their accounts (registry.Quota) in the
// registry's quota bucket, so that they hold across every edge.
//
// A window's count is taken a lease at a time: an edge takes QuotaLease(N) calls of a
// limit of N compare-and-set, spends them on its own, and takes the next lease when
// they are spent. A window never admits more than N while the bucket answers: a lease
// is what the count says was taken, and a lease the window cannot fill in full is cut
// to what is left. An edge whose calls of a rule stop holds what it has not spent
// until its next call of the rule (which gives it back) or the window's end: fewer
// than N may be admitted then, by at most a lease per edge. A take whose answer is
// lost (it timed out) is named by the edge's next, which is told what it took
// (registry.QuotaTake.Lost), so only an edge that dies loses a lease. An edge that
// cannot reach the bucket admits, on its own, at most one lease more of each window
// and then refuses until the bucket answers: at most N + E·QuotaLease(N) with E
// edges cut off, N + 1% with two.
//
// Calls at once are held in the bucket by each edge (registry.Store.HoldSlots): one
// more when a call starts beyond what the edge holds, let go when it ends, so that
// every edge together never runs more than the limit; an edge renews what it holds
// every QuotaHoldTime/3, and what an edge that died held is free again QuotaHoldTime
// later. An edge that cannot reach the bucket holds its own calls to the limit: at
// most E times the limit then, with E edges cut off.
func WithQuotas(store *registry.Store) Option {
	return func(g *Gateway) {
		g.quotas = &quotaCounts{store: store, edge: nuid.Next(), leases: map[string]*quotaLease{}, slots: map[string]*quotaSlots{}}
	}
}

// QuotaLease is how many calls an edge takes at once from a window that admits limit:
// a two-hundredth of it, at least one.
func QuotaLease(limit int64) int64 { return max(1, limit/200) }

// QuotaHoldTime is how long the calls at once an edge holds stand unless renewed.
const QuotaHoldTime = 15 * time.Second

// QuotaTimeout bounds a call's wait for the quota bucket; past it, the edge goes on
// on its own as WithQuotas says. Longer than SharedRateTimeout: what an edge admits on
// its own is over the quota, so it is kept for a bucket truly out of reach rather
// than a slow answer.
const QuotaTimeout = time.Second

// QuotaBusyRetry is the Retry-After of a call over its limit of calls at once, or
// refused because the quota bucket could not be reached: a call may end any moment.
const QuotaBusyRetry = time.Second

// quotaCounts is an edge's side of the quota bucket: its leases and held calls.
type quotaCounts struct {
	store  *registry.Store
	edge   string // names this edge's holds of calls at once
	log    *slog.Logger
	warned atomic.Int64 // unix seconds of the last warning that the bucket failed

	mu     sync.Mutex
	leases map[string]*quotaLease // by counter, without the window's start
	slots  map[string]*quotaSlots // by registry.QuotaSlots key
}

// quotaLease is what an edge holds of a window's count.
type quotaLease struct {
	mu     sync.Mutex
	start  time.Time // the window the lease is of
	limit  int64     // the limit it was taken under
	tokens int64     // taken and not spent
	credit int64     // admitted on the edge's own while the bucket could not be reached
	lost   string    // the last take whose answer did not come: the next asks what it took
	// spent is when the window was last found spent: until QuotaRecheck later, calls
	// are refused without asking the bucket again.
	spent time.Time
}

// QuotaRecheck is how long an edge that found a window spent refuses its calls
// without asking the bucket again: an edge that gives back a lease may free calls.
const QuotaRecheck = 100 * time.Millisecond

// quotaSlots is what an edge holds of a subject's calls at once.
type quotaSlots struct {
	mu      sync.Mutex
	held    int // in the bucket
	running int // calls running on this edge
	limit   int // the rule's, as of the last call
	renew   *time.Timer
}

// quotaHold is what a call holds of its quotas' calls at once, let go when it ends.
type quotaHold struct {
	once  sync.Once
	slots []quotaSlotRef
}

type quotaSlotRef struct {
	key   string
	limit int
	s     *quotaSlots
}

// takeQuotas counts a call of tool and method by p against its account's quotas. It
// returns what the call holds of calls at once (nil when nothing), to let go with
// release when the call ends; a *QuotaExceededError when over a quota.
func (g *Gateway) takeQuotas(ctx context.Context, p registry.Principal, tool, method string) (*quotaHold, error) {
	q := g.quotas
	if q == nil {
		return nil, nil
	}
	a := g.view.Snapshot().Account(p.Account)
	if a == nil || len(a.Limits.Quotas) == 0 {
		return nil, nil
	}
	now := time.Now()
	var (
		hold  = &quotaHold{}
		taken []*quotaLease
	)
	undo := func() {
		for _, l := range taken {
			l.giveBack()
		}
		q.release(ctx, hold)
	}
	for i, rule := range a.Limits.Quotas {
		subject, ok := rule.Counts(p, tool, method)
		if !ok {
			continue
		}
		for _, w := range registry.Windows {
			limit := rule.Limit(w)
			if limit <= 0 {
				continue
			}
			l, err := q.take(ctx, registry.QuotaCounter(p.Account, rule, subject, w), w, limit, now)
			if err != nil {
				undo()
				return nil, exceeded(p.Account, i, rule, string(w), limit, err, now)
			}
			if l != nil {
				taken = append(taken, l)
			}
		}
		if rule.Concurrent > 0 {
			ref, err := q.hold(ctx, registry.QuotaSlots(p.Account, rule, subject), rule.Concurrent, now)
			if err != nil {
				undo()
				return nil, exceeded(p.Account, i, rule, WindowConcurrent, int64(rule.Concurrent), err, now)
			}
			hold.slots = append(hold.slots, ref)
		}
	}
	if len(hold.slots) == 0 {
		return nil, nil
	}
	return hold, nil
}

// errOverQuota is take or hold finding the limit reached; resetsAt is when the
// window ends (zero for calls at once).
type errOverQuota struct{ resetsAt time.Time }

func (e errOverQuota) Error() string { return "over quota" }

func exceeded(account string, i int, rule registry.Quota, window string, limit int64, err error, now time.Time) *QuotaExceededError {
	e := &QuotaExceededError{Account: account, Index: i, Rule: rule, Window: window, Limit: limit, RetryAfter: QuotaBusyRetry}
	if over, ok := err.(errOverQuota); ok && !over.resetsAt.IsZero() {
		e.ResetsAt, e.RetryAfter = over.resetsAt, max(over.resetsAt.Sub(now), time.Millisecond)
	}
	return e
}

// take spends a call of this edge's lease of the window of kind w (counter names it
// but for its start) that admits limit, taking a new lease when it is spent. It
// returns the lease the call was spent from, nil for a call admitted on the edge's
// own credit.
func (q *quotaCounts) take(ctx context.Context, counter string, w registry.Window, limit int64, now time.Time) (*quotaLease, error) {
	q.mu.Lock()
	l := q.leases[counter]
	if l == nil {
		l = &quotaLease{}
		q.leases[counter] = l
	}
	q.mu.Unlock()
	start, end := w.Bounds(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.start.Equal(start) {
		// A new window: the last one's lease is void.
		l.start, l.limit, l.tokens, l.credit, l.spent, l.lost = start, limit, 0, 0, time.Time{}, ""
	}
	if l.tokens > 0 && l.limit == limit {
		l.tokens--
		return l, nil
	}
	if l.limit == limit && now.Sub(l.spent) < QuotaRecheck {
		return nil, errOverQuota{resetsAt: end}
	}
	// Spent, or taken under another limit: what is left goes back with the next take.
	unspent := l.tokens
	l.tokens, l.limit = 0, limit
	take := registry.QuotaTake{ID: nuid.Next(), Want: QuotaLease(limit), Unspent: unspent, Lost: l.lost}
	tctx, cancel := context.WithTimeout(ctx, QuotaTimeout)
	took, recovered, err := q.store.TakeQuota(tctx, registry.QuotaWindow(counter, start), limit, take, end, now)
	cancel()
	q.warn(ctx, err, now)
	if err != nil {
		l.lost = take.ID // it may have been written: the next take asks
	} else {
		// A lost take's calls are the edge's after all, less those it admitted on
		// its own meanwhile.
		l.lost, l.tokens = "", max(recovered-l.credit, 0)
		l.credit = max(l.credit-recovered, 0)
	}
	switch {
	case err != nil && l.credit < QuotaLease(limit):
		l.credit++ // the bucket is out of reach: a lease's worth on the edge's own
		return nil, nil
	case err != nil:
		return nil, errOverQuota{}
	}
	l.tokens += took
	if l.tokens == 0 {
		l.spent = now
		return nil, errOverQuota{resetsAt: end}
	}
	l.tokens--
	return l, nil
}

// giveBack returns a call spent from the lease by a call that was then refused.
func (l *quotaLease) giveBack() {
	l.mu.Lock()
	l.tokens++
	l.mu.Unlock()
}

// hold takes one of the calls at once a subject (key) may run, of limit.
func (q *quotaCounts) hold(ctx context.Context, key string, limit int, now time.Time) (quotaSlotRef, error) {
	q.mu.Lock()
	s := q.slots[key]
	if s == nil {
		s = &quotaSlots{}
		q.slots[key] = s
	}
	q.mu.Unlock()
	ref := quotaSlotRef{key: key, limit: limit, s: s}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limit = limit
	if s.running < s.held && s.running < limit {
		s.running++
		return ref, nil
	}
	tctx, cancel := context.WithTimeout(ctx, QuotaTimeout)
	ok, err := q.store.HoldSlots(tctx, key, q.edge, s.running+1, limit, now.Add(QuotaHoldTime), now)
	cancel()
	q.warn(ctx, err, now)
	switch {
	case err != nil && s.running < limit:
		s.running++ // the bucket is out of reach: the edge holds its own calls to the limit
		return ref, nil
	case err != nil, !ok:
		return ref, errOverQuota{}
	}
	s.running++
	s.held = s.running
	q.renewLater(key, s)
	return ref, nil
}

// renewLater keeps what the edge holds of key standing while it holds any: a timer
// writes it again every QuotaHoldTime/3. Called with s.mu held.
func (q *quotaCounts) renewLater(key string, s *quotaSlots) {
	if s.renew != nil {
		return
	}
	s.renew = time.AfterFunc(QuotaHoldTime/3, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.renew = nil
		if s.held == 0 {
			return
		}
		now := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), QuotaTimeout)
		// No more than it holds already: a write of no more is always taken, unless
		// the hold lapsed meanwhile (the bucket out of reach), when it is taken again
		// within the limit.
		_, _ = q.store.HoldSlots(ctx, key, q.edge, s.held, s.limit, now.Add(QuotaHoldTime), now)
		cancel()
		q.renewLater(key, s)
	})
}

// release lets go of what a call held of calls at once, once, whichever way it ended.
func (q *quotaCounts) release(ctx context.Context, h *quotaHold) {
	if h == nil {
		return
	}
	h.once.Do(func() {
		for _, ref := range h.slots {
			q.letGo(context.WithoutCancel(ctx), ref)
		}
	})
}

// letGo ends one running call of ref, and gives back in the bucket what the edge
// holds beyond the calls it runs, so that another edge may run them.
func (q *quotaCounts) letGo(ctx context.Context, ref quotaSlotRef) {
	s := ref.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = max(s.running-1, 0)
	if s.held <= s.running {
		return
	}
	now := time.Now()
	tctx, cancel := context.WithTimeout(ctx, QuotaTimeout)
	defer cancel()
	if _, err := q.store.HoldSlots(tctx, ref.key, q.edge, s.running, ref.limit, now.Add(QuotaHoldTime), now); err == nil {
		s.held = s.running
	}
}

// warn logs err, a failure of the quota bucket while the caller still waits, at most
// once a minute.
func (q *quotaCounts) warn(ctx context.Context, err error, now time.Time) {
	if err == nil || ctx.Err() != nil {
		return
	}
	if last := q.warned.Load(); now.Unix()-last >= 60 && q.warned.CompareAndSwap(last, now.Unix()) {
		q.log.Warn("quota: the bucket cannot be reached; each edge admits at most a lease more of each window on its own (logged at most once a minute)", "err", err)
	}
}

// ended lets go of what c held of its quotas' calls at once: c was answered.
func (g *Gateway) ended(ctx context.Context, c *Call) {
	if g.quotas != nil {
		g.quotas.release(ctx, c.hold)
	}
}
