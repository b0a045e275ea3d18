// Package calls keeps the tool calls that outlive their request (an HTTP caller's
// Prefer: respond-async). Each call's record in the JetStream KV bucket tg-calls says
// how the call goes and, once it ended, holds its answer, so that any edge reads it and
// cancels it, for the key that made it. The edge that took the call runs it to its end,
// bounded by its deadline, and records the end; a record an edge left working past its
// deadline reads as timed out (Record.Overdue).
package calls

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Config configures the calls of one edge.
type Config struct {
	// TTL is how long a record is kept after its last change; 0 takes the bucket's own
	// (DefaultTTL when making it).
	TTL time.Duration
	// Update changes the bucket's TTL to TTL when it has another, instead of refusing.
	Update bool
	// Subjects names the bus subjects (a call's cancel and progress).
	Subjects wire.Subjects
}

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	if c.TTL < 0 {
		return errors.New("calls: ttl: must not be negative")
	}
	return nil
}

// Calls starts, reads and cancels the calls that outlive their request.
type Calls struct {
	nc       *nats.Conn
	recs     *records
	subjects wire.Subjects
	log      *slog.Logger
	cancels  *nats.Subscription
	ttl      time.Duration // the bucket's: how long a record is kept after its last change

	mu       sync.Mutex
	running  map[string]context.CancelCauseFunc // this edge's calls, by their id on the bus
	wg       sync.WaitGroup
	draining bool  // Drain began: no call starts
	stopped  error // Drain ran out: the cause every call still running is stopped with

	adopt adoption // the ends of calls other edges ran, recorded here (adopt.go)
}

// errDraining is a call that would start on an edge that is stopping.
var errDraining = gateway.Fail(gateway.KindToolUnavailable, "this edge is stopping: make the call again, through another edge")

// Open opens the bucket (see Config.TTL) and follows the cancels of calls, which a
// DELETE through any edge publishes, for the calls this edge runs.
func Open(ctx context.Context, nc *nats.Conn, store *registry.Store, cfg Config, log *slog.Logger) (*Calls, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	recs, err := openRecords(ctx, store, cfg.TTL, cfg.Update)
	if err != nil {
		return nil, err
	}
	cs := &Calls{nc: nc, recs: recs, subjects: cfg.Subjects, log: log, running: map[string]context.CancelCauseFunc{}, ttl: DefaultTTL}
	if st, err := recs.kv.Status(ctx); err == nil {
		cs.ttl = st.TTL()
	}
	cs.cancels, err = nc.Subscribe(cfg.Subjects.CancelAll(), func(m *nats.Msg) {
		if _, callID, ok := cfg.Subjects.ParseCancel(m.Subject); ok {
			cs.stop(callID, ErrCancelled)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("calls: follow cancels: %w", err)
	}
	return cs, nil
}

// TTL is how long a record is kept after its last change.
func (cs *Calls) TTL() time.Duration { return cs.ttl }

// ErrCancelled is the cause of a running call's end when it was cancelled.
var ErrCancelled = errors.New("calls: the call was cancelled")

// Run runs one call: given a context that ends at the call's deadline, when the call
// is cancelled (its cause ErrCancelled) or when the edge stops (Drain, its cause what
// Drain was given), it reports how the call ended. rec is the call's record as made.
type Run func(ctx context.Context, rec Record) Outcome

// Start records a call of p's, rec (its tool, method, request id and deadline), and
// runs it on this edge with run, whatever becomes of ctx (the request that started
// it), to its end, which it then records unless the call was cancelled meanwhile. The
// tool's progress notifications of the call are recorded as they come, at most every
// ProgressEvery.
func (cs *Calls) Start(ctx context.Context, p registry.Principal, rec Record, run Run) (*Record, error) {
	if p.Key == nil && p.Tool == "" {
		return nil, errors.New("calls: a call that outlives its request is made with an API key or a link")
	}
	cs.mu.Lock()
	if cs.draining {
		cs.mu.Unlock()
		return nil, errDraining
	}
	cs.wg.Add(1) // before Drain can wait: this call is one it waits for
	cs.mu.Unlock()
	rec.ID, rec.CallID = registry.NewID(idPrefix), registry.NewID("async-")
	rec.Account = p.Account
	if p.Key != nil {
		rec.KeyID = p.Key.ID
	} else {
		rec.Link = p.Tool
	}
	if rec.Status != AwaitingApproval {
		rec.Status = Working
	}
	rec.CreatedAt = time.Now()
	notes := &progressNotes{}
	sub, err := cs.nc.Subscribe(cs.subjects.Progress(rec.Tool, rec.CallID), notes.hear)
	if err != nil {
		cs.wg.Done()
		return nil, fmt.Errorf("calls: follow progress: %w", err)
	}
	rev, err := cs.recs.create(ctx, &rec)
	if err != nil {
		cs.wg.Done()
		_ = sub.Unsubscribe()
		return nil, err
	}
	runCtx, stopDeadline := context.WithDeadline(context.WithoutCancel(ctx), rec.Deadline)
	runCtx, stop := context.WithCancelCause(runCtx)
	cs.mu.Lock()
	cs.running[rec.CallID] = stop
	if cs.stopped != nil { // Drain ran out while this call was being recorded
		stop(cs.stopped)
	}
	cs.mu.Unlock()
	go func() {
		defer cs.wg.Done()
		defer stopDeadline()
		defer func() { _ = sub.Unsubscribe() }()
		cs.follow(runCtx, rec, rev, run, notes)
		cs.mu.Lock()
		delete(cs.running, rec.CallID)
		cs.mu.Unlock()
		stop(nil)
	}()
	return &rec, nil
}

// ProgressEvery is how often a running call's record takes the progress its tool
// reported since.
const ProgressEvery = 500 * time.Millisecond

// follow runs the call and records its progress, then its end.
func (cs *Calls) follow(ctx context.Context, rec Record, rev uint64, run Run, notes *progressNotes) {
	done := make(chan Outcome, 1)
	go func() { done <- run(ctx, rec) }()
	tick := time.NewTicker(ProgressEvery)
	defer tick.Stop()
	for {
		select {
		case out := <-done:
			cs.finish(rec, rev, out)
			return
		case <-tick.C:
			p := notes.take()
			if p == nil {
				continue
			}
			rec.Progress = p
			wctx, cancel := context.WithTimeout(context.Background(), writeWait)
			_, err := cs.modify(wctx, rec.ID, func(r *Record) error {
				if !r.Status.Active() {
					return errConflict // cancelled: it records no more
				}
				r.Progress = p
				return nil
			})
			cancel()
			if err != nil && !errors.Is(err, errConflict) {
				cs.log.Warn("calls: recording progress", "call", rec.ID, "err", err)
			}
		}
	}
}

// writeWait bounds each write of a record, and finishWait the recording of a call's
// end, tried again while the bucket's stream elects a leader.
const (
	writeWait  = 5 * time.Second
	finishWait = 15 * time.Second
)

// finish records how the call ended: its answer first, so that a record that says it
// ended has it, then the record, unless another write (a cancel) came first.
func (cs *Calls) finish(rec Record, rev uint64, out Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), finishWait)
	defer cancel()
	rec.Status, rec.EndedAt = out.Status, time.Now()
	out.Answer.Size = len(out.Body)
	rec.Answer = &out.Answer
	err := persist(ctx, func(ctx context.Context) (err error) {
		rec.Answer.InStore, err = cs.recs.putAnswer(ctx, rec.ID, out.Body)
		return err
	})
	if err == nil {
		err = persist(ctx, func(ctx context.Context) error {
			rec.Input = nil
			_, err := cs.recs.update(ctx, &rec, rev)
			if !errors.Is(err, errConflict) {
				return err
			}
			// Another write came first: a cancel, which stands, the end recorded by
			// another edge from the same answer (adopt.go), or a write of progress or
			// input.
			cur, curRev, gerr := cs.recs.get(ctx, rec.ID)
			switch {
			case gerr != nil:
				return gerr
			case cur.Status == Cancelled:
				return errConflict
			case !cur.Status.Active():
				return errEndedElsewhere
			}
			rev = curRev
			return errAgain
		})
	}
	switch {
	case err == nil && out.Recorded != nil:
		out.Recorded(rec)
	case errors.Is(err, errConflict): // cancelled meanwhile: its answer is the cancel's
		cs.recs.dropAnswer(ctx, rec.ID)
	case errors.Is(err, errEndedElsewhere):
	case err != nil:
		cs.log.Error("calls: recording the end of a call; it reads as timed out past its deadline", "call", rec.ID, "err", err)
	}
}

// errEndedElsewhere: another edge recorded the call's end first.
var errEndedElsewhere = errors.New("calls: ended through another edge")

// errAgain asks persist for another attempt at once.
var errAgain = errors.New("calls: again")

// persist runs op until it succeeds, fails for good (a conflict) or ctx ends.
func persist(ctx context.Context, op func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, writeWait)
		err := op(attempt)
		cancel()
		if err == nil || errors.Is(err, errConflict) || errors.Is(err, errEndedElsewhere) {
			return err
		}
		if errors.Is(err, errAgain) && ctx.Err() == nil {
			continue
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// Get reads p's call id and, when it completed or failed, its answer's body, whole
// (an MCP task's result, which is encoded whole). Another key's call is ErrNotFound,
// as one that does not exist.
func (cs *Calls) Get(ctx context.Context, p registry.Principal, id string) (*Record, []byte, error) {
	rec, body, err := cs.Open(ctx, p, id)
	if err != nil || body == nil {
		return rec, nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, nil, fmt.Errorf("calls: read the answer of %s: %w", id, err)
	}
	return rec, b, nil
}

// Open is Get with the answer's body to read as it arrives (nil while the call has
// not completed or failed), for a reader that streams it; the caller closes it.
func (cs *Calls) Open(ctx context.Context, p registry.Principal, id string) (*Record, io.ReadCloser, error) {
	rec, _, err := cs.owned(ctx, p, id)
	if err != nil {
		return nil, nil, err
	}
	if rec.Status != Completed && rec.Status != Failed {
		return rec, nil, nil
	}
	body, err := cs.recs.answer(ctx, id, rec.Answer)
	if err != nil {
		return nil, nil, err
	}
	return rec, body, nil
}

func (cs *Calls) owned(ctx context.Context, p registry.Principal, id string) (*Record, uint64, error) {
	rec, rev, err := cs.recs.get(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	if !rec.OwnedBy(p) {
		return nil, 0, ErrNotFound
	}
	rec, rev = cs.adopted(ctx, rec, rev)
	return rec, rev, nil
}

// Cancel cancels p's working call id: its record says cancelled, and its cancel is
// published, which the worker running it and the edge running it follow. A call that
// ended (or is overdue) is left as it is, with ErrEnded.
func (cs *Calls) Cancel(ctx context.Context, p registry.Principal, id string) (*Record, error) {
	for {
		rec, rev, err := cs.owned(ctx, p, id)
		if err != nil {
			return nil, err
		}
		if !rec.Status.Active() || rec.Overdue(time.Now()) {
			return rec, ErrEnded
		}
		rec.Status, rec.EndedAt, rec.Input = Cancelled, time.Now(), nil
		_, err = cs.recs.update(ctx, rec, rev)
		if errors.Is(err, errConflict) {
			continue // progress, or the end: look again
		}
		if err != nil {
			return nil, err
		}
		cs.stop(rec.CallID, ErrCancelled)
		if err := cs.nc.Publish(cs.subjects.Cancel(rec.Tool, rec.CallID), nil); err != nil {
			cs.log.Warn("calls: publishing a cancel", "call", rec.ID, "err", err)
		}
		return rec, nil
	}
}

// Approved records that the call id, which awaited approval, now runs.
func (cs *Calls) Approved(ctx context.Context, id string) error {
	return persist(ctx, func(ctx context.Context) error {
		rec, rev, err := cs.recs.get(ctx, id)
		if err != nil {
			return err
		}
		if rec.Status != AwaitingApproval {
			return errConflict // cancelled meanwhile: its run ends with the cancel
		}
		rec.Status = Working
		_, err = cs.recs.update(ctx, rec, rev)
		if errors.Is(err, errConflict) {
			return errAgain
		}
		return err
	})
}

// stop ends this edge's run of the call callID, if it runs here.
func (cs *Calls) stop(callID string, cause error) {
	cs.mu.Lock()
	stop := cs.running[callID]
	cs.mu.Unlock()
	if stop != nil {
		stop(cause)
	}
}

// Drain waits for the calls this edge runs to end, until ctx ends; it then stops
// those still running, with cause, and waits for their ends to be recorded. It stops
// following cancels.
func (cs *Calls) Drain(ctx context.Context, cause error) {
	cs.mu.Lock()
	cs.draining = true
	cs.mu.Unlock()
	done := make(chan struct{})
	go func() { cs.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		cs.mu.Lock()
		cs.stopped = cause
		for _, stop := range cs.running {
			stop(cause)
		}
		cs.mu.Unlock()
		<-done
	}
	_ = cs.cancels.Unsubscribe()
}

// progressNotes keeps the last progress a call's tool reported, until it is recorded.
type progressNotes struct {
	mu   sync.Mutex
	last *Progress
}

func (n *progressNotes) hear(m *nats.Msg) {
	note, err := wire.ReadNotification(m.Data)
	if err != nil || note.Kind != wire.KindProgress {
		return
	}
	n.mu.Lock()
	n.last = &Progress{Progress: note.Progress, Total: note.Total, Message: note.Message}
	n.mu.Unlock()
}

func (n *progressNotes) take() *Progress {
	n.mu.Lock()
	defer n.mu.Unlock()
	p := n.last
	n.last = nil
	return p
}
