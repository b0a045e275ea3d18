package sse

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// sessionIndex follows the sessions bucket: every session of every edge, as the
// bucket last showed it. Every edge keeps one, so any of them can answer a request
// of any session without a read from the bucket, count an account's sessions, and
// tell every session of a tool that the tool changed.
//
// A session this edge writes is served as written until the bucket shows the write:
// the watch may still deliver an older version, and a client that has just set its
// log level must find it set.
type sessionIndex struct {
	mu        sync.Mutex
	byID      map[string]*indexedSession
	byTool    map[string]map[string]struct{}
	byAccount map[string]map[string]struct{}
	applied   uint64        // the bucket's latest revision applied here
	advanced  chan struct{} // closed, and replaced, whenever applied grows
}

type indexedSession struct {
	seen        registry.Session // as the bucket last showed it
	since       uint64           // the bucket's revision when the session was first known here
	written     *registry.Session
	writtenJSON []byte
	writtenAt   time.Time
}

// writeHorizon bounds how long a write of this edge outranks what the bucket shows:
// past it, a write the watch never confirmed (another edge's write came after it)
// gives way.
const writeHorizon = 5 * time.Second

func newSessionIndex() *sessionIndex {
	return &sessionIndex{byID: map[string]*indexedSession{}, byTool: map[string]map[string]struct{}{},
		byAccount: map[string]map[string]struct{}{}, advanced: make(chan struct{})}
}

// entry returns the entry of sess, making one, known since rev, if there is none.
// x.mu is held.
func (x *sessionIndex) entry(sess *registry.Session, rev uint64) *indexedSession {
	if e := x.byID[sess.ID]; e != nil {
		return e
	}
	e := &indexedSession{seen: *sess, since: rev}
	x.byID[sess.ID] = e
	add := func(m map[string]map[string]struct{}, k string) {
		if m[k] == nil {
			m[k] = map[string]struct{}{}
		}
		m[k][sess.ID] = struct{}{}
	}
	add(x.byTool, sess.Tool)
	add(x.byAccount, sess.Account)
	return e
}

// seen records what the bucket shows of a session at revision rev: its value, raw.
func (x *sessionIndex) seen(sess *registry.Session, raw []byte, rev uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.advance(rev)
	e := x.entry(sess, rev)
	e.seen = *sess
	if e.written != nil && bytes.Equal(e.writtenJSON, raw) {
		e.written, e.writtenJSON = nil, nil
	}
}

// wrote records a session this edge has just written; rev is the revision of its
// creation, or 0 for a change.
func (x *sessionIndex) wrote(sess *registry.Session, rev uint64) {
	raw, err := json.Marshal(sess)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(sess, rev)
	c := *sess
	e.written, e.writtenJSON, e.writtenAt = &c, raw, time.Now()
}

// get returns a copy of session id, and whether the index knows it.
func (x *sessionIndex) get(id string) (*registry.Session, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.byID[id]
	if e == nil {
		return nil, false
	}
	c := e.seen
	if e.written != nil && time.Since(e.writtenAt) < writeHorizon {
		c = *e.written
	}
	return &c, true
}

// remove forgets session id, deleted or expired at revision rev, and reports whether
// it was known.
func (x *sessionIndex) remove(id string, rev uint64) (tool string, ok bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.advance(rev)
	e, ok := x.byID[id]
	if !ok {
		return "", false
	}
	delete(x.byID, id)
	del := func(m map[string]map[string]struct{}, k string) {
		delete(m[k], id)
		if len(m[k]) == 0 {
			delete(m, k)
		}
	}
	del(x.byTool, e.seen.Tool)
	del(x.byAccount, e.seen.Account)
	return e.seen.Tool, true
}

// sessions returns a copy of every session the index knows, as the bucket shows it.
func (x *sessionIndex) sessions() []registry.Session {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]registry.Session, 0, len(x.byID))
	for _, e := range x.byID {
		out = append(out, e.seen)
	}
	return out
}

func (x *sessionIndex) ofTool(tool string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.byTool[tool]))
	for id := range x.byTool[tool] {
		out = append(out, id)
	}
	return out
}

func (x *sessionIndex) count(account string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byAccount[account])
}

// countSince counts the sessions of account known here since revision rev or earlier.
func (x *sessionIndex) countSince(account string, rev uint64) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for id := range x.byAccount[account] {
		if x.byID[id].since <= rev {
			n++
		}
	}
	return n
}

// advance notes that the bucket's revision rev has been applied. x.mu is held.
func (x *sessionIndex) advance(rev uint64) {
	if rev > x.applied {
		x.applied = rev
		close(x.advanced)
		x.advanced = make(chan struct{})
	}
}

// restart forgets the revisions applied: the bucket is loaded again from scratch, and
// its revisions may count from 1 again (NATS restarted and made it anew).
func (x *sessionIndex) restart() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applied = 0
}

// caughtUp returns once the bucket's revision rev has been applied here, or with
// ctx's error.
func (x *sessionIndex) caughtUp(ctx context.Context, rev uint64) error {
	for {
		x.mu.Lock()
		done, advanced := x.applied >= rev, x.advanced
		x.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-advanced:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchSessions loads the sessions bucket and follows it until stop ends, as the
// registry's view follows its buckets (registry.Store.Follow: a node that dies costs
// seconds); ended is called for every session that is deleted or expires, or that a
// load of the bucket again from scratch no longer brings.
func watchSessions(ctx, stop context.Context, store *registry.Store, log *slog.Logger, ended func(id, tool string), bg *sync.WaitGroup) (*sessionIndex, error) {
	updates := make(chan registry.Update, 256)
	bg.Add(1)
	go func() {
		defer bg.Done()
		store.Follow(stop, registry.BucketSessions, updates, log)
	}()
	x := newSessionIndex()
	var reloaded map[string]bool // the sessions a load from scratch has brought so far
	apply := func(u registry.Update) (loaded bool) {
		switch u.Mark {
		case registry.MarkLoaded:
			return true
		case registry.MarkReload:
			reloaded = map[string]bool{}
			x.restart()
			return false
		case registry.MarkReloaded:
			for _, sess := range x.sessions() {
				if !reloaded[sess.ID] {
					if tool, ok := x.remove(sess.ID, 0); ok {
						ended(sess.ID, tool)
					}
				}
			}
			reloaded = nil
			return false
		}
		e := u.Entry
		if reloaded != nil {
			reloaded[e.Key()] = true
		}
		if e.Operation() != jetstream.KeyValuePut {
			if tool, ok := x.remove(e.Key(), e.Revision()); ok {
				ended(e.Key(), tool)
			}
			return false
		}
		var s registry.Session
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			log.Error("skipping undecodable session", "session", e.Key(), "err", err)
			x.mu.Lock()
			x.advance(e.Revision())
			x.mu.Unlock()
			return false
		}
		x.seen(&s, e.Value(), e.Revision())
		return false
	}
	for {
		select {
		case u := <-updates:
			if !apply(u) {
				continue
			}
			bg.Add(1)
			go func() {
				defer bg.Done()
				for {
					select {
					case <-stop.Done():
						return
					case u := <-updates:
						apply(u)
					}
				}
			}()
			return x, nil
		case <-stop.Done():
			return nil, errors.New("sse: watch sessions: stopped while loading")
		case <-ctx.Done():
			return nil, fmt.Errorf("sse: watch sessions: %w", ctx.Err())
		}
	}
}

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

// newSession opens a session for p on tool, within the account's limit.
//
// The limit holds across edges. An account at its limit in this edge's copy of the
// bucket is refused at once. Otherwise the session is written, and the bucket, which
// orders every write, decides between sessions admitted at the same instant, on this
// edge or others: once this edge's copy has caught up with the write, the account's
// sessions written before it are all known here, and the session is taken back if
// they already fill the limit.
//
// A session of the legacy transport is its stream: it opens with its stream held.
func (s *Server) newSession(ctx context.Context, p registry.Principal, tool, version string, clientInfo, caps json.RawMessage, stream bool) (*registry.Session, error) {
	limit := s.sessionLimit(p.Account)
	if s.index.count(p.Account) >= limit {
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
	s.index.wrote(sess, rev)
	s.markTouched(sess.ID)

	wait, cancel := context.WithTimeout(ctx, admitWait)
	defer cancel()
	if err := s.index.caughtUp(wait, rev); err != nil {
		// The copy lags (a degraded cluster): rather than refuse every new session,
		// admit on the count it had.
		s.log.Warn("session admitted without the exact count: the sessions bucket's copy is behind", "account", p.Account, "err", err)
		return sess, nil
	}
	if s.index.countSince(p.Account, rev) > limit {
		s.endSession(sess.ID)
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
			s.index.wrote(got, 0)
			s.markTouched(sess.ID)
			return nil
		}
		// In a cluster a replica that has yet to apply the session's first write
		// answers "not found" too; while this edge's followed copy still holds the
		// session, it has not ended, so look again for a moment.
		if _, known := s.index.get(sess.ID); !errors.Is(err, registry.ErrNotFound) || !known || time.Now().After(wait) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// session finds the session id for p on tool. A session of another account or tool,
// or opened with another key or link (see credential), is not found, like one that
// never existed.
func (s *Server) session(ctx context.Context, p registry.Principal, tool, id string) (*registry.Session, error) {
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
	if !validToken(id) {
		return nil, registry.ErrNotFound
	}
	if sess, ok := s.index.get(id); ok {
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
		if sess, ok := s.index.get(id); ok {
			return sess, nil
		}
	}
	return nil, registry.ErrNotFound
}

// unknownSessionGrace is how long a session id no edge has shown this one yet is
// looked for before it is refused.
const unknownSessionGrace = 500 * time.Millisecond

// touch refreshes a session's TTL, at most every tenth of SessionIdle from this
// edge: a session without a stream lives SessionIdle after its last request, give or
// take that tenth.
func (s *Server) touch(ctx context.Context, sess *registry.Session) {
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

// sustain keeps a session alive while one of its requests runs, however long that
// is, until the returned func is called: a request in flight holds its session as a
// stream does.
func (s *Server) sustain(sess *registry.Session) (stop func()) {
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
		s.touch(s.ctx, sess)
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

// streamHeld records on a session whether its client holds its standalone stream:
// with it open the session lives SessionTTL from each refresh of the stream's edge,
// without it SessionIdle from its last request.
func (s *Server) streamHeld(sess *registry.Session, held bool) {
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

// endSession deletes a session; every edge's index sees it and ends its streams and
// calls.
func (s *Server) endSession(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.store.DeleteSession(ctx, id); err != nil {
		s.log.Warn("ending session", "session", id, "err", err)
	}
}
