package approvals

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// Ask records c, a call that passed the gateway's checks, as waiting for a decision
// under rule, and announces it on the webhook.
func (a *Approvals) Ask(ctx context.Context, c *gateway.Call, rule registry.ApprovalRule) (*Record, error) {
	digest, err := argsDigest(c)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	r := &Record{
		ID: registry.NewID(idPrefix), Account: c.Principal.Account, Tool: c.Tool, Method: c.Method,
		ArgsSHA256: digest, PolicyVersion: rule.Version(), CreatedAt: now,
		ExpiresAt: now.Add(rule.Expiry(a.cfg.Expiry, a.cfg.MaxExpiry)), Decision: Pending,
	}
	if c.Principal.Key != nil {
		r.KeyID = c.Principal.Key.ID
	} else {
		r.Link = true
	}
	if len(c.Params) <= MaxShown {
		r.Arguments = string(c.Params)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("approvals: encode %s: %w", r.ID, err)
	}
	if _, err := a.kv.Create(ctx, r.ID, b); err != nil {
		return nil, fmt.Errorf("approvals: create %s: %w", r.ID, err)
	}
	a.announce(r)
	return r, nil
}

// Await waits for the decision on id until it expires or ctx ends. Approved, it
// claims the record for c (which must be the call it was asked for) and returns nil:
// the call may run, this once. Denied or expired, it returns the failure the caller
// reads (gateway.KindApprovalDenied, gateway.KindApprovalExpired).
func (a *Approvals) Await(ctx context.Context, id string, c *gateway.Call) error {
	defer func() {
		if ctx.Err() != nil { // the call ended first, however far the wait had come
			a.Withdraw(id)
		}
	}()
	w, err := a.kv.Watch(ctx, id)
	if err != nil {
		return fmt.Errorf("approvals: watch %s: %w", id, err)
	}
	defer func() { _ = w.Stop() }()
	r, _, err := a.get(ctx, id)
	if err != nil {
		return err
	}
	expiry := time.NewTimer(time.Until(r.ExpiresAt))
	defer expiry.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-expiry.C:
			// Past its expiry nobody may approve it: the record says so, unless a
			// decision came first, which the next turn reads.
			if err := a.expire(ctx, id); err != nil {
				return err
			}
		case e, ok := <-w.Updates():
			if !ok {
				return fmt.Errorf("approvals: watch %s: ended", id)
			}
			if e == nil || e.Operation() != jetstream.KeyValuePut {
				continue
			}
		}
		done, err := a.settle(ctx, id, c)
		if done {
			return err
		}
	}
}

// settle reads id and reports whether the wait is over: approved and now claimed
// (nil), or decided otherwise (its failure).
func (a *Approvals) settle(ctx context.Context, id string, c *gateway.Call) (bool, error) {
	for {
		r, rev, err := a.get(ctx, id)
		if err != nil {
			return true, err
		}
		switch r.Standing(time.Now()) {
		case Pending:
			return false, nil
		case Denied:
			return true, DeniedError(r)
		case Expired:
			return true, ExpiredError(r)
		case Withdrawn:
			return true, gateway.Fail(gateway.KindCanceled, "the call's approval %s was withdrawn", r.ID)
		}
		if !r.RanAt.IsZero() {
			return true, gateway.Fail(gateway.KindConflict, "the approval %s has been used: an approval lets its call run once", r.ID)
		}
		if err := bound(r, c); err != nil {
			return true, err
		}
		r.RanAt = time.Now().UTC()
		if _, err := a.update(ctx, r, rev); errors.Is(err, registry.ErrChanged) {
			continue
		} else if err != nil {
			return true, err
		}
		return true, nil
	}
}

// bound checks that c is the very call r approves.
func bound(r *Record, c *gateway.Call) error {
	digest, err := argsDigest(c)
	if err != nil {
		return err
	}
	key := ""
	if c.Principal.Key != nil {
		key = c.Principal.Key.ID
	}
	if r.Account != c.Principal.Account || r.KeyID != key || r.Tool != c.Tool || r.Method != c.Method || r.ArgsSHA256 != digest {
		return gateway.Fail(gateway.KindForbidden, "the approval %s is of another call", r.ID)
	}
	return nil
}

// Withdraw marks id withdrawn when it is still pending: its call ended first, or
// never started.
func (a *Approvals) Withdraw(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), withdrawWait)
	defer cancel()
	for {
		r, rev, err := a.get(ctx, id)
		if err != nil || r.Decision != Pending {
			return
		}
		r.Decision = Withdrawn
		if _, err := a.update(ctx, r, rev); !errors.Is(err, registry.ErrChanged) {
			return
		}
	}
}

// withdrawWait bounds the write of a withdrawal, which nobody waits for.
const withdrawWait = 5 * time.Second

// expire marks id expired when it is still pending past its expiry.
func (a *Approvals) expire(ctx context.Context, id string) error {
	for {
		r, rev, err := a.get(ctx, id)
		if err != nil || !r.Lapsed(time.Now()) {
			return err
		}
		r.Decision = Expired
		if _, err := a.update(ctx, r, rev); !errors.Is(err, registry.ErrChanged) {
			return err
		}
	}
}

// Hold is the gateway's Approver: it asks for a decision on c and waits for it, for
// a call that waits in its request (MCP). A caller that follows the call's progress
// hears that it waits, with the approval's id, at once and every ProgressEvery.
func (a *Approvals) Hold(ctx context.Context, c *gateway.Call, rule registry.ApprovalRule) error {
	r, err := a.Ask(ctx, c, rule)
	if err != nil {
		return err
	}
	if c.Progress {
		stop := a.tellWaiting(c, r)
		defer stop()
	}
	return a.Await(ctx, r.ID, c)
}

// ProgressEvery is how often a caller that follows a held call's progress is told
// it still waits (which also keeps clients that time out without progress waiting).
const ProgressEvery = 10 * time.Second

// tellWaiting publishes progress notifications of c saying it waits for r, until
// stop is called.
func (a *Approvals) tellWaiting(c *gateway.Call, r *Record) (stop func()) {
	n := wire.Notification{Kind: wire.KindProgress, Message: "waiting for approval " + r.ID + " until " + r.ExpiresAt.Format(time.RFC3339)}
	body, err := n.Encode()
	if err != nil {
		return func() {}
	}
	subject := a.cfg.Subjects.Progress(c.Tool, c.CallID)
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(ProgressEvery)
		defer tick.Stop()
		for {
			if err := a.nc.Publish(subject, body); err != nil {
				a.log.Warn("approvals: telling a caller its call waits", "approval", r.ID, "err", err)
			}
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() { close(done) }
}
