package calls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/registry"
)

// An MCP task's tool may ask its client for input (an input_required result of its
// own): the task then waits, its record saying input_required with the requests, until
// its client has answered every one of them (tasks/update, through any edge, in as
// many parts as it likes); the edge running the task then calls the tool again with
// the answers and the tool's requestState, as a client's retry would.

// Input is what a task's tool asked its client, and what the client answered so far.
type Input struct {
	// Requests are the questions still unanswered, by the tool's keys.
	Requests map[string]json.RawMessage `json:"requests,omitempty"`
	// Responses are the answers given, by the same keys.
	Responses map[string]json.RawMessage `json:"responses,omitempty"`
	// State is the tool's requestState, which its next call takes back; never shown.
	State string `json:"state,omitempty"`
}

// InputPoll is how often a task waiting for its client's answers reads its record.
const InputPoll = 250 * time.Millisecond

// modify changes the record id with change, read and written compare-and-set, again
// while other writes come first; change's error (errConflict: leave it) ends it.
func (cs *Calls) modify(ctx context.Context, id string, change func(*Record) error) (*Record, error) {
	for {
		rec, rev, err := cs.recs.get(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := change(rec); err != nil {
			return nil, err
		}
		if _, err = cs.recs.update(ctx, rec, rev); !errors.Is(err, errConflict) {
			return rec, err
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// AwaitInput records that the task id's tool asked its client for input (in) and
// waits, until ctx ends, for its client's answers to every request; it returns them,
// the task working again.
func (cs *Calls) AwaitInput(ctx context.Context, id string, in Input) (map[string]json.RawMessage, error) {
	if len(in.Requests) == 0 {
		return nil, errors.New("calls: input asked with no request")
	}
	wctx, cancel := context.WithTimeout(ctx, writeWait)
	_, err := cs.modify(wctx, id, func(r *Record) error {
		if !r.Status.Active() {
			return errConflict
		}
		r.Status, r.Input = InputRequired, &in
		return nil
	})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("calls: recording the input a task asks: %w", err)
	}
	tick := time.NewTicker(InputPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		case <-tick.C:
		}
		rec, _, err := cs.recs.get(ctx, id)
		if err != nil {
			continue // the stream elects a leader: read again
		}
		switch {
		case !rec.Status.Active():
			return nil, ErrCancelled
		case rec.Status == Working && rec.Input != nil:
			return rec.Input.Responses, nil
		}
	}
}

// Answer takes p's answers to the requests its task id waits on: those of them it
// asked are recorded, and once none is left the task works again. Answers to nothing
// asked, or to a task that asks nothing, change nothing.
func (cs *Calls) Answer(ctx context.Context, p registry.Principal, id string, answers map[string]json.RawMessage) error {
	if _, _, err := cs.owned(ctx, p, id); err != nil {
		return err
	}
	_, err := cs.modify(ctx, id, func(r *Record) error {
		if r.Status != InputRequired || r.Input == nil {
			return errConflict
		}
		for key, answer := range answers {
			if _, asked := r.Input.Requests[key]; asked {
				if r.Input.Responses == nil {
					r.Input.Responses = map[string]json.RawMessage{}
				}
				r.Input.Responses[key] = answer
				delete(r.Input.Requests, key)
			}
		}
		if len(r.Input.Requests) == 0 {
			r.Status = Working
		}
		return nil
	})
	if errors.Is(err, errConflict) {
		return nil
	}
	return err
}
