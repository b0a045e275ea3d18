package core

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// sessionEnded runs on every edge when a session is deleted or expires: its calls
// here are cancelled and its streams here closed, and the tool's workers are told,
// so that they let go of what they hold for it (a bridged server's upstream
// session). Every edge tells them; they take the first.
func (s *Server) sessionEnded(id, tool string) {
	if wire.ValidToken(id) && wire.ValidToken(tool) {
		if err := s.nc.Publish(s.subj.SessionEnd(tool, id), nil); err != nil {
			s.log.Warn("telling workers a session ended", "session", id, "err", err)
		}
	}
	s.calls.cancelSession(id)
	s.streams.end(id)
	s.touchMu.Lock()
	delete(s.lastTouch, id)
	s.touchMu.Unlock()
}

// sessionLimit is how many sessions account may hold.
func (s *Server) sessionLimit(account string) int {
	if a := s.view.Snapshot().Account(account); a != nil && a.Limits.Sessions > 0 {
		return a.Limits.Sessions
	}
	return s.cfg.MaxSessionsPerAccount
}

// NewSession opens a session for p on tool, within the account's limit.
//
// The limit holds across edges. An account at its limit in this edge's copy of the
// bucket is refused at once. Otherwise the session is written, and the bucket, which
// orders every write, decides between sessions admitted at the same instant, on this
// edge or others: once this edge's copy has caught up with the write, the account's
// sessions written before it are all known here, and the session is taken back if
// they already fill the limit.
//
// A session of the legacy transport is its stream: it opens with its stream held.
func (s *Server) NewSession(ctx context.Context, p registry.Principal, tool, version string, clientInfo, caps json.RawMessage, stream bool) (*registry.Session, error) {
	limit := s.sessionLimit(p.Account)
	if s.index.Count(p.Account) >= limit {
		return nil, &SessionLimitError{Account: p.Account, Limit: limit}
	}
	sess := &registry.Session{
		ID: registry.NewID(""), Account: p.Account, Tool: tool, ProtocolVersion: version,
		ClientInfo: clientInfo, Capabilities: caps, Stream: stream, CreatedAt: time.Now().UTC(),
		Credential: credential(s.view.Snapshot(), p, tool),
	}
	rev, err := s.store.CreateSession(ctx, *sess, registry.IdleExpiry(s.cfg.SessionIdle))
	if err != nil {
		return nil, err
	}
	s.index.Wrote(sess, rev)
	s.markTouched(sess.ID)

	wait, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	if err := s.index.CaughtUp(wait, rev); err != nil {
		// The copy lags (a degraded cluster): rather than refuse every new session,
		// admit on the count it had.
		s.log.Warn("session admitted without the exact count: the sessions bucket's copy is behind", "account", p.Account, "err", err)
		return sess, nil
	}
	if s.index.CountSince(p.Account, rev) > limit {
		s.EndSession(sess.ID)
		return nil, &SessionLimitError{Account: p.Account, Limit: limit}
	}
	return sess, nil
}

// admitWait bounds how long a new session waits for this edge's copy of the sessions
// bucket to show its own write.
const admitWait = 2 * time.Second

// updateSession applies change to the session as the bucket holds it, compare-and-set
// (which refreshes its TTL: SessionIdle without a stream open, SessionTTL with one),
// and leaves the result in sess. A session that ended
// meanwhile, deleted by its client through another edge or expired, is not brought
// back: registry.ErrNotFound.
func (s *Server) updateSession(ctx context.Context, sess *registry.Session, change func(*registry.Session)) error {
	wait := time.Now().Add(unknownSessionGrace)
	for {
		got, err := s.store.UpdateSession(ctx, sess.ID, func(cur *registry.Session) error {
			change(cur)
			return nil
		}, registry.IdleExpiry(s.cfg.SessionIdle))
		if err == nil {
			*sess = *got
			s.index.Wrote(got, 0)
			s.markTouched(sess.ID)
			return nil
		}
		// In a cluster a replica that has yet to apply the session's first write
		// answers "not found" too; while this edge's followed copy still holds the
		// session, it has not ended, so look again for a moment.
		if _, known := s.index.Get(sess.ID); !errors.Is(err, registry.ErrNotFound) || !known || time.Now().After(wait) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Session finds the session id for p on tool. A session of another account or tool,
// or opened with another key or link (see credential), is not found, like one that
// never existed.
func (s *Server) Session(ctx context.Context, p registry.Principal, tool, id string) (*registry.Session, error) {
	sess, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if sess.Account != p.Account || sess.Tool != tool || sess.Credential != credential(s.view.Snapshot(), p, tool) {
		return nil, registry.ErrNotFound
	}
	return sess, nil
}

// lookup finds a session in this edge's index, or in the bucket for one that
// another edge opened an instant ago and the index has yet to see.
func (s *Server) lookup(ctx context.Context, id string) (*registry.Session, error) {
	if !wire.ValidToken(id) {
		return nil, registry.ErrNotFound
	}
	if sess, ok := s.index.Get(id); ok {
		return sess, nil
	}
	sess, err := s.store.Session(ctx, id)
	if !errors.Is(err, registry.ErrNotFound) {
		return sess, err
	}
	// The read is the bucket's leader's, which has every write another edge was told
	// was made; should it still miss one (its stream's leader changing just then),
	// give the followed copy a moment before calling the session unknown. Only a miss
	// pays for this.
	for wait := time.Now().Add(unknownSessionGrace); time.Now().Before(wait); {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if sess, ok := s.index.Get(id); ok {
			return sess, nil
		}
	}
	return nil, registry.ErrNotFound
}

// unknownSessionGrace is how long a session id no edge has shown this one yet is
// looked for before it is refused.
const unknownSessionGrace = 500 * time.Millisecond

// Touch refreshes a session's TTL, at most every tenth of SessionIdle from this
// edge: a session without a stream lives SessionIdle after its last request, give or
// take that tenth.
func (s *Server) Touch(ctx context.Context, sess *registry.Session) {
	s.touchMu.Lock()
	last := s.lastTouch[sess.ID]
	s.touchMu.Unlock()
	if time.Since(last) < s.cfg.SessionIdle/10 {
		return
	}
	err := s.updateSession(ctx, sess, func(*registry.Session) {})
	if err != nil && !errors.Is(err, registry.ErrNotFound) { // an ended session is for its request to find
		s.log.Warn("refreshing session", "session", sess.ID, "err", err)
	}
}

// Sustain keeps a session alive while one of its requests runs, however long that
// is, until the returned func is called: a request in flight holds its session as a
// stream does.
func (s *Server) Sustain(sess *registry.Session) (stop func()) {
	if sess == nil {
		return func() {}
	}
	// A timer, not a goroutine with a ticker: most requests end long before the first
	// refresh, and should not pay for a goroutine and the switches to stop it.
	every := max(s.cfg.SessionIdle/3, time.Second)
	k := &keeper{}
	k.mu.Lock()
	k.t = time.AfterFunc(every, func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if k.stopped || s.ctx.Err() != nil {
			return
		}
		s.Touch(s.ctx, sess)
		k.t.Reset(every)
	})
	k.mu.Unlock()
	return func() {
		k.t.Stop()
		k.mu.Lock() // a refresh under way ends before stop returns
		k.stopped = true
		k.mu.Unlock()
	}
}

// keeper is the timer that refreshes a session while one of its requests runs.
type keeper struct {
	mu      sync.Mutex
	t       *time.Timer
	stopped bool
}

// StreamHeld records on a session whether its client holds its standalone stream:
// with it open the session lives SessionTTL from each refresh of the stream's edge,
// without it SessionIdle from its last request.
func (s *Server) StreamHeld(sess *registry.Session, held bool) {
	ctx, cancel := s.detached()
	defer cancel()
	if err := s.updateSession(ctx, sess, func(cur *registry.Session) { cur.Stream = held }); err != nil && !errors.Is(err, registry.ErrNotFound) {
		s.log.Warn("recording the session's stream", "session", sess.ID, "held", held, "err", err)
	}
}

func (s *Server) markTouched(id string) {
	s.touchMu.Lock()
	s.lastTouch[id] = time.Now()
	s.touchMu.Unlock()
}

// EndSession deletes a session; every edge's index sees it and ends its streams and
// calls.
func (s *Server) EndSession(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.DeleteSession(ctx, id); err != nil {
		s.log.Warn("ending session", "session", id, "err", err)
	}
}
