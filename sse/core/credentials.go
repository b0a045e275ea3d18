package core

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/registry"
)

// A session belongs to the credential that opened it: an API key, a link, or the
// grant (or the identity provider's user) of an access token. Only that credential
// may use it, and the session ends, on every edge, once the credential no longer opens
// it: the key revoked, expired or deleted, the link rotated or its tool disconnected,
// the grant revoked (its user deleted too), the account deleted. An account deleted and
// created again under the same id has new keys and links, so the old account's
// sessions are not its own.

// credential names what p authenticated with to reach tool: "key:<key id>";
// "grant:<grant>" for a token of the deployment's own authorization server, whose
// refreshed tokens keep the grant; "user:<name>" for a token of the identity provider;
// or "link:<digest of the connection's link nonce>" (the nonce changes when the link
// is rotated). "" when p reaches tool by none.
func credential(snap *registry.Snapshot, p registry.Principal, tool string) string {
	if p.Key != nil {
		return "key:" + p.Key.ID
	}
	c := snap.Connection(p.Account, tool)
	if c == nil || p.Tool != tool {
		return ""
	}
	switch {
	case p.Grant != "":
		return "grant:" + p.Grant
	case p.User != "":
		return "user:" + p.User
	}
	return linkCredential(c)
}

// linkCredential names the current link of a connection. A digest, not the nonce: the
// sessions bucket has no need of what derives the link.
func linkCredential(c *registry.Connection) string {
	sum := sha256.Sum256([]byte(c.LinkNonce))
	return "link:" + hex.EncodeToString(sum[:16])
}

// credentialValid reports whether the credential that opened sess still reaches its
// tool in snap at now.
func credentialValid(snap *registry.Snapshot, sess *registry.Session, now time.Time) bool {
	conn := snap.Connection(sess.Account, sess.Tool)
	if snap.Account(sess.Account) == nil || conn == nil {
		return false
	}
	if id, ok := strings.CutPrefix(sess.Credential, "key:"); ok {
		p, err := snap.AuthenticateKeyID(id, "", sess.Account, now)
		return err == nil && p.Key.Allows(sess.Tool)
	}
	if grant, ok := strings.CutPrefix(sess.Credential, "grant:"); ok {
		// A deleted user's grants are revoked with it. A revocation is held past the
		// grant's tokens' lifetime, and the sweeper ends the session well before.
		return !snap.Revoked(registry.RevokedGrant, grant)
	}
	if user, ok := strings.CutPrefix(sess.Credential, "user:"); ok {
		// An account that lists users with subjects takes only theirs (as the token
		// check does); one that lists none takes any subject its provider names.
		return !snap.HasSubjectUsers(sess.Account) || snap.User(sess.Account, user) != nil
	}
	return sess.Credential != "" && sess.Credential == linkCredential(conn)
}

// credentialBuckets are the buckets whose changes can take a session's
// credential away.
var credentialBuckets = map[string]bool{
	registry.BucketAccounts: true, registry.BucketKeys: true, registry.BucketConnections: true, registry.BucketLinks: true,
}

// credentialGrace is how long a session's credential must be seen not to open it
// before the session is ended. This edge's copy of the registry may lag its copy of
// the sessions bucket: a session opened on another edge with a key created an instant
// before can be known here before the key is.
const credentialGrace = 3 * time.Second

// sweepEvery is how often sessions are checked when nothing in the registry changes:
// keys expire without a change.
const sweepEvery = time.Minute

// sweeper ends the sessions whose credential no longer opens them. Every edge runs one
// over every session it knows of (each edge follows the whole sessions bucket), so a
// session ends even when the edge that opened it is gone; deleting a session twice is
// harmless.
type sweeper struct {
	wake chan struct{}

	mu      sync.Mutex
	suspect map[string]time.Time // session id -> when its credential was first seen not to open it
}

func newSweeper() *sweeper {
	return &sweeper{wake: make(chan struct{}, 1), suspect: map[string]time.Time{}}
}

// note wakes the sweeper after a change in the registry that may take credentials away.
func (w *sweeper) note(c registry.Change) {
	if !credentialBuckets[c.Bucket] && c.Revoked == "" {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// endRevokedSessions runs the sweeper until the server closes.
func (s *Server) endRevokedSessions() {
	tick := time.NewTicker(sweepEvery)
	defer tick.Stop()
	var again <-chan time.Time // when a suspect's grace ends
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.sweep.wake:
		case <-tick.C:
		case <-again:
		}
		again = nil
		if next := s.sweepSessions(time.Now()); !next.IsZero() {
			again = time.After(time.Until(next))
		}
	}
}

// sweepSessions ends the sessions whose credential has not opened them for
// credentialGrace, and returns when the next suspect's grace ends (zero for none).
func (s *Server) sweepSessions(now time.Time) time.Time {
	snap := s.view.Snapshot()
	var ending []string
	var next time.Time
	s.sweep.mu.Lock()
	seen := map[string]bool{}
	for _, sess := range s.index.Sessions() {
		if credentialValid(snap, &sess, now) {
			continue
		}
		seen[sess.ID] = true
		since, ok := s.sweep.suspect[sess.ID]
		if !ok {
			since = now
			s.sweep.suspect[sess.ID] = now
		}
		due := since.Add(credentialGrace)
		if !now.Before(due) {
			ending = append(ending, sess.ID)
			due = now.Add(credentialGrace) // looked at again, should ending it fail
		}
		if next.IsZero() || due.Before(next) {
			next = due
		}
	}
	for id := range s.sweep.suspect {
		if !seen[id] {
			delete(s.sweep.suspect, id) // ended, or its credential is back (a lagging copy caught up)
		}
	}
	s.sweep.mu.Unlock()
	for _, id := range ending {
		if _, known := s.index.Get(id); known { // another edge may have ended it meanwhile
			s.log.Info("ending a session whose credential was revoked", "session", id)
			s.EndSession(id)
		}
	}
	return next
}
