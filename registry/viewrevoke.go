package registry

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// How a View applies the revocations it hears (see Revocation), and how it answers
// for a key or link while a follower of its buckets is behind.

// revokedID is a revocation's kind and id, as a Snapshot files it.
type revokedID struct{ kind, id string }

// Revoked reports whether the snapshot holds a revocation of kind and id that its
// buckets may not show yet: every check of a credential asks it. A kind the view's
// buckets do not hold (an OAuth grant or token) is asked here by what checks it.
func (s *Snapshot) Revoked(kind, id string) bool {
	if len(s.revoked) == 0 {
		return false
	}
	h, ok := s.revoked[revokedID{kind, id}]
	return ok && (h.Until.IsZero() || time.Now().Before(h.Until))
}

// revokedAccount reports whether account or its connection to tool ("" for none)
// was revoked.
func (s *Snapshot) revokedAccount(account, tool string) bool {
	if len(s.revoked) == 0 {
		return false
	}
	return s.Revoked(RevokedAccount, account) || (tool != "" && s.Revoked(RevokedConnection, account+"."+tool))
}

// hear adds r to the working copy, unless the view already holds the write that made
// it. It returns the change the view's listeners are told of (so that the sessions a
// revoked key opened end at once), if any.
func (s *Snapshot) hear(r Revocation, now time.Time) (Change, bool) {
	if r.Kind == "" || r.ID == "" {
		return Change{}, false
	}
	b, inView := viewBucket[r.Bucket]
	if (inView && r.Revision > 0 && s.revs[b] >= r.Revision) || (r.Bucket != "" && !inView) {
		return Change{}, false // the view has it, or a copy of another bucket applies it
	}
	if limit := now.Add(RevocationHold); r.Until.IsZero() || r.Until.After(limit) {
		r.Until = limit
	}
	s.revoked = maps.Clone(s.revoked)
	if s.revoked == nil {
		s.revoked = map[revokedID]heard{}
	}
	s.revoked[revokedID{r.Kind, r.ID}] = heard{Revocation: r, at: now}
	if !inView {
		return Change{Key: r.ID, Deleted: true, Revoked: r.Kind}, true
	}
	return Change{Bucket: r.Bucket, Key: r.ID, Deleted: true}, true
}

// heard is a revocation held, with when it was heard.
type heard struct {
	Revocation
	at time.Time
}

// settle drops the revocations the view no longer needs to hold: its follower of the
// bucket has applied the write, the bucket was loaded again from scratch (reloaded),
// or the revocation ended.
func (s *Snapshot) settle(reloaded map[int]bool, now time.Time) {
	var drop []revokedID
	for id, h := range s.revoked {
		b, inView := viewBucket[h.Bucket]
		switch {
		case inView && h.Revision > 0 && s.revs[b] >= h.Revision, inView && reloaded[b],
			!h.Until.IsZero() && now.After(h.Until), now.Sub(h.at) > RevocationHold:
			drop = append(drop, id)
		}
	}
	if len(drop) == 0 {
		return
	}
	s.revoked = maps.Clone(s.revoked)
	for _, id := range drop {
		delete(s.revoked, id)
	}
}

// listen follows the revocations announced on subject until ctx ends, handing each
// to the view's goroutine.
func (v *View) listen(ctx context.Context, subject string) error {
	sub, err := v.store.js.Conn().Subscribe(subject, func(m *nats.Msg) {
		var r Revocation
		if err := json.Unmarshal(m.Data, &r); err != nil {
			v.log.Warn("registry: a revocation that does not decode is ignored", "err", err)
			return
		}
		select {
		case v.heard <- r:
		case <-ctx.Done():
		}
	})
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
	return nil
}

// DefaultConfirmWait bounds how long a view whose follower is behind waits for a stream's
// leader to confirm a key or link (View.Confirm). A leader that does not answer in
// time (while JetStream elects one) leaves the decision to the view and the
// revocations it heard. Options.ConfirmWait (toolgate edge
// --revocation-check-wait) sets another.
const DefaultConfirmWait = 500 * time.Millisecond

// confirmFresh is how long a leader's answer for a credential stands, so that an edge
// under load whose view is behind asks once per credential in that time, not once
// per request.
const confirmFresh = 250 * time.Millisecond

// confirmations are the leader's recent answers, by kind and hash.
type confirmations struct {
	mu      sync.Mutex
	answers map[revokedID]confirmation
	// asking bounds the leader's lookups of credentials the view does not hold
	// (see lookUp): a caller sending made-up keys while the view is behind asks the
	// stream's leader at most this many times at once.
	asking chan struct{}
}

// leaderLookups is how many lookups of credentials the view does not hold may ask
// the leaders at once; past it, the view's answer stands (the credential is refused).
const leaderLookups = 8

// confirmation is a leader's answer for a credential.
type confirmation struct {
	at time.Time
	// refused: the leader holds no record of the credential, or (a key) one revoked.
	// A leader that did not answer within Options.ConfirmWait refuses nothing.
	refused  bool
	record   []byte // the record it holds; nil when it holds none (or did not answer)
	revision uint64 // the record's revision in its bucket
}

// viewBuckets' followers tell the view whether they are current (see Store.follow).
type currency [nViewBuckets]atomic.Bool

// behind reports whether a follower a credential's check rests on is not current.
func (c *currency) behind() bool {
	for _, b := range []int{bKeys, bLinks, bAccounts, bConns} {
		if !c[b].Load() {
			return true
		}
	}
	return false
}

// ConfirmSecret is Confirm of a key or link by the secret itself, hashed only when
// the view is behind: a current view, every request's case, needs no hash.
func (v *View) ConfirmSecret(ctx context.Context, kind, secret string) error {
	if !v.current.behind() {
		return nil
	}
	return v.Confirm(ctx, kind, Hash(secret))
}

// Confirm checks a key (kind RevokedKey) or link (RevokedLink) the view just
// accepted, by its hash, against the leader of its bucket's stream, when one of the
// view's followers is behind (its consumer lost or being made again): a revocation
// announced while this edge could not hear it is then still refused. It returns
// ErrUnauthenticated for a credential the leader says is gone or revoked; nil when
// the view is current, or the leader does not answer within Options.ConfirmWait.
func (v *View) Confirm(ctx context.Context, kind, hash string) error {
	if !v.current.behind() {
		return nil
	}
	if c, _ := v.leader(ctx, kind, hash, false); c.refused {
		return ErrUnauthenticated
	}
	return nil
}

// AuthenticateKey authenticates an API key as the snapshot does and, while one of
// the view's followers is behind, by the keys bucket's leader as well: a key the view
// accepts is refused if the leader holds it revoked or gone (Confirm), and a key the
// view does not hold yet, made while its follower was behind, is accepted if the
// leader holds it usable. Every refusal is ErrUnauthenticated.
func (v *View) AuthenticateKey(ctx context.Context, secret string, now time.Time) (Principal, error) {
	snap := v.Snapshot()
	p, err := snap.AuthenticateKey(secret, now)
	if err == nil {
		return p, v.ConfirmSecret(ctx, RevokedKey, secret)
	}
	var k Key
	hash, c, ok := v.lookUp(ctx, snap, RevokedKey, secret, &k)
	if !ok {
		return p, err
	}
	if p, err = snap.keyPrincipal(hash, &k, now); err == nil {
		v.learn(BucketKeys, hash, c)
	}
	return p, err
}

// AuthenticateLink is AuthenticateKey for a link token, by the links bucket's leader.
func (v *View) AuthenticateLink(ctx context.Context, token string) (Principal, error) {
	snap := v.Snapshot()
	p, err := snap.AuthenticateLink(token)
	if err == nil {
		return p, v.ConfirmSecret(ctx, RevokedLink, token)
	}
	var l Link
	hash, c, ok := v.lookUp(ctx, snap, RevokedLink, token, &l)
	if !ok {
		return p, err
	}
	if p, err = snap.linkPrincipal(hash, &l); err == nil {
		v.learn(BucketLinks, hash, c)
	}
	return p, err
}

// lookUp reads into record what the leader holds of a credential snap does not
// hold, while a follower is behind; false when the view is current, snap holds the
// credential (and refused it), or the leader holds none or does not answer.
func (v *View) lookUp(ctx context.Context, snap *Snapshot, kind, secret string, record any) (string, confirmation, bool) {
	if secret == "" || !v.current.behind() {
		return "", confirmation{}, false
	}
	hash := Hash(secret)
	if (kind == RevokedKey && snap.keys[hash] != nil) || (kind == RevokedLink && snap.links[hash] != nil) {
		return "", confirmation{}, false
	}
	c, asked := v.leader(ctx, kind, hash, true)
	if !asked || c.record == nil || json.Unmarshal(c.record, record) != nil {
		return "", confirmation{}, false
	}
	return hash, c, true
}

// learned is a record read from its bucket's leader for the view to hold before its
// follower brings it.
type learned struct {
	bucket, key string
	record      []byte
	revision    uint64
}

// learn hands the view's goroutine a usable credential the leader holds and the view
// did not: the next requests with it find it in the snapshot, and so does an admin
// change of it by id, without asking the leader again. A view too busy to take it
// goes on asking.
func (v *View) learn(bucket, key string, c confirmation) {
	select {
	case v.learned <- learned{bucket: bucket, key: key, record: c.record, revision: c.revision}:
	default:
	}
}

// applyLearned applies a record learned from its bucket's leader to the working copy
// and publishes it, unless the follower has applied that revision or a later one
// already. Its revision is not the follower's: the follower still brings every write
// before it, and this one again.
func (v *View) applyLearned(work *Snapshot, l learned) {
	b := viewBucket[l.bucket]
	if work.revs[b] >= l.revision {
		return
	}
	work.cloneBucket(b)
	c, ok := work.applyEntry(b, &entry{bucket: l.bucket, key: l.key, value: l.record, revision: l.revision, op: jetstream.KeyValuePut}, v.log)
	next := *work
	v.snap.Store(&next)
	if ok {
		v.publish([]Change{c})
	}
}

// leader returns the leader's recent answer for a credential, asking it when there
// is none fresh. A bounded ask (of a credential the view does not hold) is not made
// while leaderLookups others are under way: then it returns false.
func (v *View) leader(ctx context.Context, kind, hash string, bounded bool) (confirmation, bool) {
	id := revokedID{kind, hash}
	v.confirmed.mu.Lock()
	c, ok := v.confirmed.answers[id]
	v.confirmed.mu.Unlock()
	if ok && time.Since(c.at) <= confirmFresh {
		return c, true
	}
	if bounded {
		select {
		case v.confirmed.asking <- struct{}{}:
			defer func() { <-v.confirmed.asking }()
		default:
			return confirmation{}, false
		}
	}
	c = v.askLeader(ctx, kind, hash)
	v.confirmed.mu.Lock()
	maps.DeleteFunc(v.confirmed.answers, func(_ revokedID, c confirmation) bool { return time.Since(c.at) > confirmFresh })
	v.confirmed.answers[id] = c
	v.confirmed.mu.Unlock()
	return c, true
}

// askLeader reads the credential's record from its bucket's leader, and decides once
// whether it refuses the credential.
func (v *View) askLeader(ctx context.Context, kind, hash string) confirmation {
	bucket := BucketKeys
	if kind == RevokedLink {
		bucket = BucketLinks
	}
	ctx, cancel := context.WithTimeout(ctx, v.store.opts.ConfirmWait)
	defer cancel()
	b, rev, err := ReadLatest(ctx, v.store.js, bucket, hash)
	switch {
	case errors.Is(err, ErrNotFound):
		return confirmation{at: time.Now(), refused: true}
	case err != nil:
		v.log.Debug("registry: the leader did not answer for a credential; the view decides", "bucket", bucket, "err", err)
		return confirmation{at: time.Now()}
	}
	var k Key
	revoked := kind == RevokedKey && json.Unmarshal(b, &k) == nil && k.RevokedAt != nil
	return confirmation{at: time.Now(), refused: revoked, record: b, revision: rev}
}

// logRevocation notes a revocation heard, without its id.
func logRevocation(log *slog.Logger, r Revocation) {
	log.Debug("registry: revocation heard", "kind", r.Kind, "bucket", r.Bucket, "revision", r.Revision)
}

// setCurrent is what bucket b's follower tells whether it is current. A follower
// current again after being behind (its consumer lost, as when the connection was
// down) may have missed announcements: the view hears every one only from then.
func (v *View) setCurrent(b int) func(bool) {
	return func(ok bool) {
		if was := v.current[b].Swap(ok); ok && !was {
			v.since.Store(time.Now().UnixNano())
		}
	}
}

// Hearing reports since when the view has heard every revocation announced, and
// whether it does now (no follower it checks credentials by is behind). What is kept
// outside the view's buckets (an OAuth grant) and was revoked before since, or while
// the view is behind, is known only to its own store's leader.
func (v *View) Hearing() (since time.Time, current bool) {
	return time.Unix(0, v.since.Load()), !v.current.behind()
}
