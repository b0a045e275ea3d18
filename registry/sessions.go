package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A SessionWrite adjusts one write of a session.
type SessionWrite func(*sessionWrite)

type sessionWrite struct{ ttl time.Duration }

// IdleExpiry gives a session written without an open stream (Stream false) a life
// of its own, shorter than the bucket's TTL: it expires d after this write unless
// written again. A session written with Stream set, or without IdleExpiry, expires
// the bucket's TTL (Options.SessionTTL) after its last write.
func IdleExpiry(d time.Duration) SessionWrite { return func(w *sessionWrite) { w.ttl = d } }

func sessionWriteOf(opts []SessionWrite) sessionWrite {
	var w sessionWrite
	for _, o := range opts {
		o(&w)
	}
	return w
}

// CreateSession writes a new MCP session and returns the bucket's revision of the
// write; ErrExists if its id is taken.
func (s *Store) CreateSession(ctx context.Context, sess Session, opts ...SessionWrite) (uint64, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return 0, fmt.Errorf("registry: encode %s/%s: %w", BucketSessions, sess.ID, err)
	}
	var create []jetstream.KVCreateOpt
	if w := sessionWriteOf(opts); w.ttl > 0 && !sess.Stream {
		create = append(create, jetstream.KeyTTL(w.ttl))
	}
	// A session is opened while its client waits: like an administrator's change, it
	// waits out a stream's election of a new leader (Options.WriteWait) instead of
	// failing, and an attempt that may have been written is recognised as its own.
	var rev uint64
	err = s.lasting(ctx, func(ctx context.Context, again bool) (err error) {
		rev, err = s.sessions.Create(ctx, sess.ID, b, create...)
		if !errors.Is(err, jetstream.ErrKeyExists) || !again {
			return err
		}
		have, haveRev, gerr := s.latest(ctx, s.sessions, sess.ID)
		switch {
		case gerr == nil && string(have) == string(b):
			rev = haveRev
			return nil
		case gerr == nil:
			return err
		case errors.Is(gerr, ErrNotFound):
			return fmt.Errorf("registry: create %s/%s: %w", BucketSessions, sess.ID, errUnsettled)
		default:
			return gerr
		}
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("registry: create %s/%s: %w", BucketSessions, sess.ID, err)
	}
	return rev, nil
}

// UpdateSession changes an MCP session with change, compare-and-set, which also
// refreshes its TTL, and returns it as written. A session deleted or expired
// meanwhile stays so: ErrNotFound.
func (s *Store) UpdateSession(ctx context.Context, id string, change func(*Session) error, opts ...SessionWrite) (*Session, error) {
	w := sessionWriteOf(opts)
	if w.ttl == 0 {
		return updateJSON(ctx, s, s.sessions, id, change)
	}
	// The bucket's Update cannot give a revision a TTL of its own; a publish to the
	// key's subject, compare-and-set on its last revision, can.
	return updateJSONWith(ctx, s, s.sessions, id, change, func(b []byte, rev uint64, sess *Session) error {
		ttl := w.ttl
		if sess.Stream {
			ttl = 0
		}
		return s.updateWithTTL(ctx, BucketSessions, id, b, rev, ttl)
	})
}

// updateWithTTL writes b at key of bucket compare-and-set on revision rev, with a TTL
// of its own (none when ttl is 0): the bucket's Update cannot give a revision a TTL
// of its own; a publish to the key's subject, expecting its last revision, can. A
// revision that is not the last is jetstream.ErrKeyExists, as the bucket's Update
// says it.
func (s *Store) updateWithTTL(ctx context.Context, bucket, key string, b []byte, rev uint64, ttl time.Duration) error {
	msg := nats.NewMsg("$KV." + bucket + "." + key)
	msg.Data = b
	publish := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev)}
	if ttl > 0 {
		publish = append(publish, jetstream.WithMsgTTL(ttl))
	}
	_, err := s.js.PublishMsg(ctx, msg, publish...)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return fmt.Errorf("%w: %w", jetstream.ErrKeyExists, err)
	}
	return err
}

// Session reads an MCP session; ErrNotFound once it has expired or been deleted.
func (s *Store) Session(ctx context.Context, id string) (*Session, error) {
	sess, _, err := getJSON[Session](ctx, s, s.sessions, id)
	return sess, err
}

// DeleteSession ends an MCP session.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return deleteKey(ctx, s.sessions, id)
}
