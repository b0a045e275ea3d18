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
}

type indexedSession struct {
	seen        registry.Session // as the bucket last showed it
	written     *registry.Session
	writtenJSON []byte
	writtenAt   time.Time
}

// writeHorizon bounds how long a write of this edge outranks what the bucket shows:
// past it, a write the watch never confirmed (another edge's write came after it)
// gives way.
const writeHorizon = 5 * time.Second

func newSessionIndex() *sessionIndex {
	return &sessionIndex{byID: map[string]*indexedSession{}, byTool: map[string]map[string]struct{}{}, byAccount: map[string]map[string]struct{}{}}
}

// entry returns the entry of sess, making one if there is none. x.mu is held.
func (x *sessionIndex) entry(sess *registry.Session) *indexedSession {
	if e := x.byID[sess.ID]; e != nil {
		return e
	}
	e := &indexedSession{seen: *sess}
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

// seen records what the bucket shows of a session: its value, raw.
func (x *sessionIndex) seen(sess *registry.Session, raw []byte) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(sess)
	e.seen = *sess
	if e.written != nil && bytes.Equal(e.writtenJSON, raw) {
		e.written, e.writtenJSON = nil, nil
	}
}

// wrote records a session this edge has just written.
func (x *sessionIndex) wrote(sess *registry.Session) {
	raw, err := json.Marshal(sess)
	if err != nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entry(sess)
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

func (x *sessionIndex) remove(id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	e, ok := x.byID[id]
	if !ok {
		return false
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
	return true
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

// watchSessions loads the sessions bucket and follows it until stop ends; ended is
// called for every session that is deleted or expires.
func watchSessions(ctx, stop context.Context, store *registry.Store, log *slog.Logger, ended func(id string), bg *sync.WaitGroup) (*sessionIndex, error) {
	kv, err := store.JetStream().KeyValue(ctx, registry.BucketSessions)
	if err != nil {
		return nil, fmt.Errorf("sse: sessions bucket: %w", err)
	}
	w, err := kv.WatchAll(stop)
	if err != nil {
		return nil, fmt.Errorf("sse: watch sessions: %w", err)
	}
	x := newSessionIndex()
	apply := func(e jetstream.KeyValueEntry) {
		if e.Operation() != jetstream.KeyValuePut {
			if x.remove(e.Key()) {
				ended(e.Key())
			}
			return
		}
		var s registry.Session
		if err := json.Unmarshal(e.Value(), &s); err != nil {
			log.Error("skipping undecodable session", "session", e.Key(), "err", err)
			return
		}
		x.seen(&s, e.Value())
	}
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, errors.New("sse: watch sessions: stopped while loading")
			}
			if e == nil { // the bucket's current contents are loaded
				bg.Add(1)
				go func() {
					defer bg.Done()
					defer w.Stop()
					for {
						select {
						case <-stop.Done():
							return
						case e, ok := <-w.Updates():
							if !ok {
								return
							}
							if e != nil {
								apply(e)
							}
						}
					}
				}()
				return x, nil
			}
			apply(e)
		case <-ctx.Done():
			w.Stop()
			return nil, fmt.Errorf("sse: watch sessions: %w", ctx.Err())
		}
	}
}

// sessionEnded runs on every edge when a session is deleted or expires: its calls
// here are cancelled and its streams here closed.
func (s *Server) sessionEnded(id string) {
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

// newSession opens a session for p on tool, within the account's limit. The count
// comes from this edge's index of every edge's sessions; two edges admitting at the
// same instant may overshoot by one each.
func (s *Server) newSession(ctx context.Context, p registry.Principal, tool, version string, clientInfo, caps json.RawMessage) (*registry.Session, error) {
	s.admit.Lock()
	defer s.admit.Unlock()
	if limit := s.sessionLimit(p.Account); s.index.count(p.Account) >= limit {
		return nil, &SessionLimitError{Account: p.Account, Limit: limit}
	}
	sess := &registry.Session{
		ID: registry.NewID(""), Account: p.Account, Tool: tool, ProtocolVersion: version,
		ClientInfo: clientInfo, Capabilities: caps, CreatedAt: time.Now().UTC(),
	}
	if err := s.store.CreateSession(ctx, *sess); err != nil {
		return nil, err
	}
	s.index.wrote(sess)
	s.markTouched(sess.ID)
	return sess, nil
}

// updateSession applies change to the session as the bucket holds it, compare-and-set
// (which refreshes its idle TTL), and leaves the result in sess. A session that ended
// meanwhile, deleted by its client through another edge or expired, is not brought
// back: registry.ErrNotFound.
func (s *Server) updateSession(ctx context.Context, sess *registry.Session, change func(*registry.Session)) error {
	wait := time.Now().Add(unknownSessionGrace)
	for {
		got, err := s.store.UpdateSession(ctx, sess.ID, func(cur *registry.Session) error {
			change(cur)
			return nil
		})
		if err == nil {
			*sess = *got
			s.index.wrote(got)
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

// session finds the session id for p on tool. A session of another account or tool
// is not found, like one that never existed.
func (s *Server) session(ctx context.Context, p registry.Principal, tool, id string) (*registry.Session, error) {
	sess, err := s.lookup(ctx, id)
	if err != nil {
		return nil, err
	}
	if sess.Account != p.Account || sess.Tool != tool {
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
	// In a cluster the read may be answered by a replica that has yet to apply the
	// write another edge made an instant ago; give the followed copy a moment before
	// calling the session unknown. Only a miss pays for this.
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

// touch refreshes a session's idle TTL, at most every tenth of it from this edge.
func (s *Server) touch(ctx context.Context, sess *registry.Session) {
	s.touchMu.Lock()
	last := s.lastTouch[sess.ID]
	s.touchMu.Unlock()
	if time.Since(last) < s.cfg.SessionIdleTTL/10 {
		return
	}
	err := s.updateSession(ctx, sess, func(*registry.Session) {})
	if err != nil && !errors.Is(err, registry.ErrNotFound) { // an ended session is for its request to find
		s.log.Warn("refreshing session", "session", sess.ID, "err", err)
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
