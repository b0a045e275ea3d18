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
