package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Revocation: a credential or a right taken away reaches every edge at once, faults
// or not. The store writes it, then announces it on core NATS (Subjects.Revoked)
// before the change is answered; every view applies what it hears at once, and holds
// it until its own follower of the bucket has the write (or, for what no bucket of the
// view holds, until the revocation's end). A view whose follower is behind (its
// consumer lost or being made again, as when its connection was down and it may have
// missed an announcement) asks the stream's leader before it accepts a key or link
// it holds (View.Confirm).

// The kinds of things a revocation names, and the id each is named by.
const (
	RevokedKey         = "key"         // an API key, by its sha256 (its key in tg-keys)
	RevokedLink        = "link"        // a link token, by its sha256 (its key in tg-links)
	RevokedAccount     = "account"     // an account deleted, by id
	RevokedConnection  = "connection"  // a connection removed, by "account.tool"
	RevokedCredentials = "credentials" // a connection's credentials cleared, by "account.tool" (the credentials' copy applies it)
	RevokedGrant       = "grant"       // an OAuth grant, by its record's key in tg-oauth-grants (package oauth announces and checks it)
)

// A Revocation is what is announced: a kind and an id, never a secret. A revocation
// a bucket of the view records names the bucket and the revision of its write, and a
// view holds it until it has applied that revision. One no view bucket records (a
// token kept elsewhere, as an OAuth grant would be) is held until Until, at most
// RevocationHold.
type Revocation struct {
	Kind     string    `json:"kind"`
	ID       string    `json:"id"`
	Bucket   string    `json:"bucket,omitempty"`
	Revision uint64    `json:"revision,omitempty"`
	Until    time.Time `json:"until,omitzero"`
}

// RevocationHold is the longest a view holds a revocation it heard: far longer than a
// follower takes to come back after a node's loss (seconds), so that a revocation
// whose bucket's write the follower never brings (the bucket was loaded again) still
// ends.
const RevocationHold = 10 * time.Minute

// AnnounceWait bounds how long announcing a revocation waits for the server to have
// it, so that a change is not answered before every edge can hear of it.
const AnnounceWait = time.Second

// DefaultRevokeAttempt bounds one attempt of a revoking write (a key revoked, a link, a
// connection or an account removed) while the registry cannot take it: the bucket's
// stream has no leader for some seconds after its leader's node died (JetStream
// elects another after 4 to 9 s), and the write is answered within this of the new
// leader's election rather than within an ordinary attempt (writeAttempt).
// Options.RevokeAttempt (toolgate edge --revoke-attempt) sets another.
const DefaultRevokeAttempt = 250 * time.Millisecond

// Announce publishes r on the revocation subject and waits, AnnounceWait at most,
// until the server has it: every edge connected then applies it at once. The store
// announces what it revokes itself; Announce is for revocations kept elsewhere (an
// OAuth grant or token), which name no bucket and set Until.
func (s *Store) Announce(ctx context.Context, r Revocation) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("registry: announce a revocation: %w", err)
	}
	nc := s.js.Conn()
	if err := nc.Publish(s.RevokedSubject(), b); err != nil {
		return fmt.Errorf("registry: announce a revocation: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, AnnounceWait)
	defer cancel()
	if err := nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("registry: announce a revocation: %w", err)
	}
	return nil
}

// revoked announces a revocation the store just wrote. The write is what lasts: an
// announcement that fails leaves the followers to bring it, as they do without one.
func (s *Store) revoked(ctx context.Context, kind, id string, kv jetstream.KeyValue, revision uint64) {
	_ = s.Announce(ctx, Revocation{Kind: kind, ID: id, Bucket: kv.Bucket(), Revision: revision})
}

// RevokedSubject is where the store announces revocations: what a copy of a bucket
// kept beside the view (the credentials') follows to apply them at once.
func (s *Store) RevokedSubject() string { return s.opts.Subjects.Revoked() }

// Revoked announces a revocation written in a bucket kept beside the registry's (the
// credentials'), at revision: what follows that bucket applies it at once.
func (s *Store) Revoked(ctx context.Context, kind, id string, kv jetstream.KeyValue, revision uint64) {
	s.revoked(ctx, kind, id, kv, revision)
}

// deleteKeyRev deletes key as kv.Delete does (a delete marker the followers see) and
// returns the marker's revision, which the announcement of the revocation names.
func deleteKeyRev(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, key string) (uint64, error) {
	m := nats.NewMsg("$KV." + kv.Bucket() + "." + key)
	m.Header.Set("KV-Operation", "DEL")
	return removeKey(ctx, js, kv, key, m)
}

// PurgeKeyRev purges key as kv.Purge does (no earlier revision kept) and returns the
// purge's revision, which the announcement of the revocation names.
func PurgeKeyRev(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, key string) (uint64, error) {
	m := nats.NewMsg("$KV." + kv.Bucket() + "." + key)
	m.Header.Set("KV-Operation", "PURGE")
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	return removeKey(ctx, js, kv, key, m)
}

func removeKey(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, key string, m *nats.Msg) (uint64, error) {
	ack, err := js.PublishMsg(ctx, m)
	if err != nil {
		return 0, fmt.Errorf("registry: delete %s/%s: %w", kv.Bucket(), key, err)
	}
	return ack.Sequence, nil
}

// revokingDelete deletes key, an attempt of Options.RevokeAttempt at a time for up to
// WriteWait, and announces it as kind, id.
func (s *Store) revokingDelete(ctx context.Context, kv jetstream.KeyValue, key, kind, id string) error {
	var rev uint64
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) (err error) {
		rev, err = deleteKeyRev(ctx, s.js, kv, key)
		return err
	})
	if err != nil {
		return err
	}
	s.revoked(ctx, kind, id, kv, rev)
	return nil
}

// Lasting runs op, a read or change of records kept beside the registry (an OAuth
// grant's), as the store's revocations are tried: an attempt of Options.RevokeAttempt
// at a time, for up to WriteWait, while a stream has no leader. op must bear being run
// again after an attempt that did part of it.
func (s *Store) Lasting(ctx context.Context, op func(ctx context.Context) error) error {
	return s.LastingEvery(ctx, s.opts.RevokeAttempt, op)
}

// LastingEvery is Lasting with attempts of attempt each: for an op that may take
// longer than a revoking write (a listing of a bucket's keys).
func (s *Store) LastingEvery(ctx context.Context, attempt time.Duration, op func(ctx context.Context) error) error {
	return s.lastingEvery(ctx, attempt, func(ctx context.Context, _ bool) error { return op(ctx) })
}
