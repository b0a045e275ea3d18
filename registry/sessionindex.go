package registry

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
)

// SessionIndex follows the sessions bucket: every MCP session of every edge, as the
// bucket last showed it. Every edge keeps one (Store.FollowSessions), so any of them
// can answer a request of any session without a read from the bucket, count an
// account's sessions, and tell every session of a tool that the tool changed.
//
// A session this edge writes is served as written until the bucket shows the write:
// the watch may still deliver an older version, and a client that has just set its
// log level must find it set.
type SessionIndex struct {
	mu        sync.Mutex
	byID      map[string]*indexedSession
	byTool    map[string]map[string]struct{}
	byAccount map[string]map[string]struct{}
	applied   uint64        // the bucket's latest revision applied here
	advanced  chan struct{} // closed, and replaced, whenever applied grows
}

type indexedSession struct {
	seen        Session // as the bucket last showed it
	since       uint64  // the bucket's revision when the session was first known here
	written     *Session
	writtenJSON []byte
	writtenAt   time.Time
}

// writeHorizon bounds how long a write of this edge outranks what the bucket shows:
// past it, a write the watch never confirmed (another edge's write came after it)
// gives way.
const writeHorizon = 5 * time.Second

func newSessionIndex() *SessionIndex {
	return &SessionIndex{byID: map[string]*indexedSession{}, byTool: map[string]map[string]struct{}{},
		byAccount: map[string]map[string]struct{}{}, advanced: make(chan struct{})}
}

// entry returns the entry of sess, making one, known since rev, if there is none.
// x.mu is held.
func (x *SessionIndex) entry(sess *Session, rev uint64) *indexedSession {
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
func (x *SessionIndex) seen(sess *Session, raw []byte, rev uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	defer x.advance(rev)
	e := x.entry(sess, rev)
	e.seen = *sess
	if e.written != nil && bytes.Equal(e.writtenJSON, raw) {
		e.written, e.writtenJSON = nil, nil
	}
}

// Wrote records a session this edge has just written; rev is the revision of its
// creation, or 0 for a change.
func (x *SessionIndex) Wrote(sess *Session, rev uint64) {
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

// Get returns a copy of session id, and whether the index knows it.
func (x *SessionIndex) Get(id string) (*Session, bool) {
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
func (x *SessionIndex) remove(id string, rev uint64) (tool string, ok bool) {
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

// Sessions returns a copy of every session the index knows, as the bucket shows it.
func (x *SessionIndex) Sessions() []Session {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]Session, 0, len(x.byID))
	for _, e := range x.byID {
		out = append(out, e.seen)
	}
	return out
}

// OfTool returns the ids of the sessions of tool.
func (x *SessionIndex) OfTool(tool string) []string {
	x.mu.Lock()
	defer x.mu.Unlock()
	out := make([]string, 0, len(x.byTool[tool]))
	for id := range x.byTool[tool] {
		out = append(out, id)
	}
	return out
}

// Count is how many sessions account holds.
func (x *SessionIndex) Count(account string) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.byAccount[account])
}

// CountSince counts the sessions of account known here since revision rev or earlier.
func (x *SessionIndex) CountSince(account string, rev uint64) int {
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
func (x *SessionIndex) advance(rev uint64) {
	if rev > x.applied {
		x.applied = rev
		close(x.advanced)
		x.advanced = make(chan struct{})
	}
}

// restart forgets the revisions applied: the bucket is loaded again from scratch, and
// its revisions may count from 1 again (NATS restarted and made it anew).
func (x *SessionIndex) restart() {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.applied = 0
}

// CaughtUp returns once the bucket's revision rev has been applied here, or with
// ctx's error.
func (x *SessionIndex) CaughtUp(ctx context.Context, rev uint64) error {
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

// FollowSessions loads the sessions bucket into a SessionIndex and follows it until
// stop ends, as the view follows its buckets (Follow: a node that dies costs
// seconds); ended is called for every session that is deleted or expires, or that a
// load of the bucket again from scratch no longer brings. It returns once the bucket
// is loaded; bg counts the goroutines that follow it.
func (s *Store) FollowSessions(ctx, stop context.Context, log *slog.Logger, ended func(id, tool string), bg *sync.WaitGroup) (*SessionIndex, error) {
	updates := make(chan Update, 256)
	bg.Add(1)
	go func() {
		defer bg.Done()
		s.Follow(stop, BucketSessions, updates, log)
	}()
	f := &sessionFollower{x: newSessionIndex(), ended: ended, log: log}
	for {
		select {
		case u := <-updates:
			if !f.apply(u) {
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
						f.apply(u)
					}
				}
			}()
			return f.x, nil
		case <-stop.Done():
			return nil, errors.New("registry: follow sessions: stopped while loading")
		case <-ctx.Done():
			return nil, fmt.Errorf("registry: follow sessions: %w", ctx.Err())
		}
	}
}

// sessionFollower applies the sessions bucket's updates to its index.
type sessionFollower struct {
	x        *SessionIndex
	ended    func(id, tool string)
	log      *slog.Logger
	reloaded map[string]bool // the sessions a load from scratch has brought so far
}

// apply applies one update, and reports whether it says the bucket is loaded.
func (f *sessionFollower) apply(u Update) (loaded bool) {
	x := f.x
	switch u.Mark {
	case MarkLoaded:
		return true
	case MarkReload:
		f.reloaded = map[string]bool{}
		x.restart()
		return false
	case MarkReloaded:
		for _, sess := range x.Sessions() {
			if !f.reloaded[sess.ID] {
				if tool, ok := x.remove(sess.ID, 0); ok {
					f.ended(sess.ID, tool)
				}
			}
		}
		f.reloaded = nil
		return false
	}
	e := u.Entry
	if f.reloaded != nil {
		f.reloaded[e.Key()] = true
	}
	if e.Operation() != jetstream.KeyValuePut {
		if tool, ok := x.remove(e.Key(), e.Revision()); ok {
			f.ended(e.Key(), tool)
		}
		return false
	}
	var sess Session
	if err := json.Unmarshal(e.Value(), &sess); err != nil {
		f.log.Error("skipping undecodable session", "session", e.Key(), "err", err)
		x.mu.Lock()
		x.advance(e.Revision())
		x.mu.Unlock()
		return false
	}
	x.seen(&sess, e.Value(), e.Revision())
	return false
}
