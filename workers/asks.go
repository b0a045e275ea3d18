package workers

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

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
