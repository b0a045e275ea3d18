package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// ErrNoState is State finding no state bucket for the tool: an admin makes it
// (`toolgate state create TOOL`).
var ErrNoState = errors.New("workers: the tool has no state bucket")

// ErrKeyNotFound is a State read of a key that has no value.
var ErrKeyNotFound = wire.ErrAskNotFound

// ErrKeyExists is a State Create of a key that has a value, or an Update of a
// revision that is not the key's last.
var ErrKeyExists = wire.ErrAskExists

// Inbox makes a connection's inboxes the tool's own (_INBOX.tool.<tool>), the only
// ones a tool's credentials let it receive on, for a connection whose own requests
// (nats.Conn.Request) must be answered. The worker itself does not need it: it waits
// for its answers on a subscription of its own under the tool's inbox.
func Inbox(tool string) nats.Option {
	return nats.CustomInboxPrefix(strings.TrimSuffix(wire.WorkerInbox(tool), "."))
}

// State is the tool's state: a key-value bucket (wire.StateBucket) shared by all the
// tool's instances, that an admin makes (`toolgate state create TOOL`). A worker has
// no JetStream reach of its own: each operation is an ask an edge answers
// (wire.Subjects.AskState), for this tool's bucket only. Keys are letters, digits and
// - / _ = . (wire.CheckStateKey); a value is at most what one NATS message carries.
type State struct {
	w     *Worker
	inbox *inbox
}

// State opens the tool's state bucket, or returns ErrNoState until an admin has made
// it. It waits for an edge to answer, and for JetStream to, until ctx ends. State may be called before Run.
func (w *Worker) State(ctx context.Context) (*State, error) {
	b, err := openInbox(w.nc, w.tool.ID)
	if err != nil {
		return nil, fmt.Errorf("workers: state: %w", err)
	}
	st := &State{w: w, inbox: b}
	// Until an edge answers, and JetStream does; recordAttempt outlasts an edge's own
	// bound, so an attempt past it is an edge that died with the ask.
	err = w.untilDone(ctx, "the state bucket's opening", recordAttempt, func(ctx context.Context) error {
		_, _, err := st.do(ctx, wire.StateInfo, "", nil, 0, 0)
		return err
	})
	switch {
	case errors.Is(err, wire.ErrAskNoBucket):
		b.close()
		return nil, fmt.Errorf("%w: %s (made by an admin: toolgate state create %s)", ErrNoState, wire.StateBucket(w.tool.ID), w.tool.ID)
	case err != nil:
		b.close()
		return nil, fmt.Errorf("workers: state: %s: %w", wire.StateBucket(w.tool.ID), err)
	}
	return st, nil
}

func (s *State) do(ctx context.Context, op wire.StateOp, key string, value []byte, rev uint64, ttl time.Duration) ([]byte, uint64, error) {
	if op != wire.StateKeys && op != wire.StateInfo {
		if err := wire.CheckStateKey(key); err != nil {
			return nil, 0, fmt.Errorf("workers: %w", err)
		}
	}
	answer, err := s.inbox.request(ctx, s.w.cfg.subjects.AskStateMsg(s.w.tool.ID, op, key, value, rev, ttl))
	if err != nil {
		return nil, 0, fmt.Errorf("workers: state %s %s: %w", op, key, err)
	}
	body, rev, err := wire.ReadAskReply(answer)
	if err != nil {
		return nil, 0, fmt.Errorf("workers: state %s %s: %w", op, key, err)
	}
	return body, rev, nil
}

// Get returns the key's value and its revision, or ErrKeyNotFound.
func (s *State) Get(ctx context.Context, key string) ([]byte, uint64, error) {
	return s.do(ctx, wire.StateGet, key, nil, 0, 0)
}

// Put stores the value of key and returns its revision. A positive ttl makes the key
// expire that long after (whole seconds).
func (s *State) Put(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	_, rev, err := s.do(ctx, wire.StatePut, key, value, 0, ttl)
	return rev, err
}

// Create stores the value of a key that has none, or returns ErrKeyExists. A
// positive ttl makes the key expire that long after.
func (s *State) Create(ctx context.Context, key string, value []byte, ttl time.Duration) (uint64, error) {
	_, rev, err := s.do(ctx, wire.StateCreate, key, value, 0, ttl)
	return rev, err
}

// Update stores the value of key if its last revision is revision, or returns
// ErrKeyExists: compare and set.
func (s *State) Update(ctx context.Context, key string, value []byte, revision uint64) (uint64, error) {
	if revision == 0 {
		return 0, fmt.Errorf("workers: state update %s: a revision to replace is needed (Create makes a key)", key)
	}
	_, rev, err := s.do(ctx, wire.StateUpdate, key, value, revision, 0)
	return rev, err
}

// Delete removes the key's value.
func (s *State) Delete(ctx context.Context, key string) error {
	_, _, err := s.do(ctx, wire.StateDelete, key, nil, 0, 0)
	return err
}

// Keys lists the keys that have a value, in no particular order.
func (s *State) Keys(ctx context.Context) ([]string, error) {
	body, _, err := s.do(ctx, wire.StateKeys, "", nil, 0, 0)
	if err != nil {
		return nil, err
	}
	var keys []string
	if err := json.Unmarshal(body, &keys); err != nil {
		return nil, fmt.Errorf("workers: state keys: %w", err)
	}
	return keys, nil
}

// Close stops waiting for answers; the State is not usable after.
func (s *State) Close() { s.inbox.close() }
