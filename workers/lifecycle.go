package workers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/toolgate/toolgate/bus/wire"
)

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
	methods, mcpHandler, err := w.begin()
	if err != nil {
		return err
	}
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

	stopHolding := w.takeCalls(ctx)
	defer stopHolding()
	unfollow, err := w.follow()
	if err != nil {
		return err
	}
	defer unfollow()

	svc, err := w.serve(methods, mcpHandler)
	if err != nil {
		return err
	}
	presence := w.presence()
	if err := w.putPresence(ctx, presence); err != nil {
		if ctx.Err() != nil { // stopped while starting: a clean stop, not a failure
			return w.drain(svc, closed)
		}
		return errors.Join(fmt.Errorf("workers: tool %s: presence: %w", w.tool.ID, err), w.drain(svc, closed))
	}
	close(w.ready)
	w.log.Info("worker serving", "methods", len(methods), "concurrency", w.cfg.concurrency)
	return w.heartbeat(ctx, presence, svc, closed)
}

// begin marks the worker started, once, and takes the methods and MCP handler
// declared before Run.
func (w *Worker) begin() ([]Method, MCPHandler, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return nil, nil, errors.New("workers: Run called twice")
	}
	w.started = true
	return slices.Clone(w.methods), w.mcp, nil
}

// takeCalls readies the worker for the calls it will take, and names those it holds
// on the tool's Holding subject (see announceHolding) until the returned stopHolding.
func (w *Worker) takeCalls(ctx context.Context) (stopHolding func()) {
	w.base = context.WithoutCancel(ctx)
	w.slots = newSlots(w.cfg.concurrency)
	w.idle = make(chan job)
	holding, stop := context.WithCancel(context.Background())
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		w.announceHolding(holding)
	}()
	return func() { stop(); <-announced }
}

// follow subscribes to the tool's cancels and to its sessions' ends, until the
// returned unfollow.
func (w *Worker) follow() (unfollow func(), err error) {
	cancels, err := w.nc.Subscribe(w.cfg.subjects.CancelTool(w.tool.ID), w.onCancel)
	if err != nil {
		return nil, fmt.Errorf("workers: tool %s: subscribe to cancellations: %w", w.tool.ID, err)
	}
	ends, err := w.nc.Subscribe(w.cfg.subjects.SessionEnds(w.tool.ID), w.onSessionEnd)
	if err != nil {
		_ = cancels.Unsubscribe()
		return nil, fmt.Errorf("workers: tool %s: subscribe to session ends: %w", w.tool.ID, err)
	}
	return func() {
		_ = ends.Unsubscribe()
		_ = cancels.Unsubscribe()
	}, nil
}

// presence is the instance's record in the presence bucket.
func (w *Worker) presence() *wire.Presence {
	p := &wire.Presence{Tool: w.tool.ID, Instance: w.cfg.instance, Version: w.tool.Version, StartedAt: time.Now().UTC()}
	p.Host, _ = os.Hostname()
	return p
}

// heartbeat refreshes the instance's presence until ctx ends, then drains; or until
// the connection closes under it, then waits for the calls it has taken, whose
// replies cannot leave, and says so.
func (w *Worker) heartbeat(ctx context.Context, presence *wire.Presence, svc micro.Service, closed <-chan nats.Status) error {
	beat := time.NewTicker(w.cfg.heartbeat)
	defer beat.Stop()
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
		case <-beat.C:
			hctx, cancel := context.WithTimeout(ctx, w.cfg.heartbeat)
			if err := w.putPresence(hctx, presence); err != nil && ctx.Err() == nil {
				w.log.Warn("presence heartbeat failed", "err", err)
			}
			cancel()
		}
	}
}

// stopServing makes SetMethods refuse from now on: the service is stopping.
func (w *Worker) stopServing() {
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
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
