package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// SessionBucket is the JetStream KV bucket that holds dashboard sessions. They live
// in NATS rather than in an edge's memory so that a user signed in through one edge
// stays signed in through any other, with no sticky load balancing.
const SessionBucket = "tg-dashboard-sessions"

// session is what the server keeps of a sign-in, filed under the sha256 of its id.
// The id itself lives only in the user's cookie, and the API key only in the user's
// hands: the session names the key by id and hash, to find it again in the registry
// and end the session the moment the key is revoked.
type session struct {
	Account string `json:"account"`
	KeyID   string `json:"key_id,omitempty"`
	KeyHash string `json:"key_hash,omitempty"`
	// User and UserID name the user of the account who signed in, instead of a key:
	// the session ends when that user (that one, not another made under its name
	// since) is deleted.
	User      string    `json:"user,omitempty"`
	UserID    string    `json:"user_id,omitempty"`
	CSRF      string    `json:"csrf"`
	CreatedAt time.Time `json:"created_at"`
	ExpiresAt time.Time `json:"expires_at"`
}

// errNoSession: the cookie names no live session.
var errNoSession = errors.New("dashboard: no such session")

type sessions struct {
	kv       jetstream.KeyValue
	js       jetstream.JetStream
	lifetime time.Duration
}

// openSessions opens the bucket as the registry opens its own, made if it is missing
// and set to this lifetime if it has another. Entries expire with the bucket's TTL,
// the session lifetime, so abandoned sessions need no sweeping.
func openSessions(ctx context.Context, store *registry.Store, lifetime time.Duration) (*sessions, error) {
	kv, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket:      SessionBucket,
		Description: "toolgate dashboard sessions, by sha256 of the session id",
		TTL:         lifetime,
	}, true)
	if err != nil {
		return nil, fmt.Errorf("dashboard: session bucket: %w", err)
	}
	return &sessions{kv: kv, js: store.JetStream(), lifetime: lifetime}, nil
}

// newSecret is 32 random bytes, URL-safe.
func newSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("dashboard: crypto/rand: " + err.Error()) // cannot happen on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// create stores s under a new id and returns the id, for the cookie.
func (ss *sessions) create(ctx context.Context, s session) (string, error) {
	id := newSecret()
	b, err := json.Marshal(s)
	if err != nil {
		return "", err
	}
	if _, err := ss.kv.Create(ctx, registry.Hash(id), b); err != nil {
		return "", fmt.Errorf("dashboard: create session: %w", err)
	}
	return id, nil
}

// get finds the live session id names.
func (ss *sessions) get(ctx context.Context, id string, now time.Time) (*session, error) {
	if id == "" {
		return nil, errNoSession
	}
	// From the bucket's leader: the sign-in may have been a moment ago, through
	// another edge and another NATS node.
	b, _, err := registry.ReadLatest(ctx, ss.js, ss.kv.Bucket(), registry.Hash(id))
	if errors.Is(err, registry.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		return nil, fmt.Errorf("dashboard: read session: %w", err)
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("dashboard: decode session: %w", err)
	}
	if !now.Before(s.ExpiresAt) {
		_ = ss.delete(ctx, id)
		return nil, errNoSession
	}
	return &s, nil
}

func (ss *sessions) delete(ctx context.Context, id string) error {
	if id == "" {
		return nil
	}
	if err := ss.kv.Purge(ctx, registry.Hash(id)); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("dashboard: delete session: %w", err)
	}
	return nil
}

// sameSecret compares a submitted token with the expected one in constant time.
func sameSecret(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
