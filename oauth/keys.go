package oauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/registry"
)

// KeyBucket holds the deployment's token signing keys. They live in the registry, not
// on an edge's disk, so that a token one edge issued any other edge checks.
const KeyBucket = "tg-oauth-keys"

// Algorithm signs every token.
const Algorithm = jose.ES256

// keyPrefix starts the name of every key's record: "g" and its generation, the
// number of whole rotation periods since the Unix epoch when it was made.
const keyPrefix = "g"

// reloadEvery bounds how long an edge goes without reading the bucket again; a token
// signed by a key it has not seen yet makes it read at once (at most once a second).
const (
	reloadEvery    = 30 * time.Second
	reloadAtMostBy = time.Second
)

// keyRecord is a signing key as the bucket holds it, with the rotation period it
// was made under: edges that rotate on different periods would name different keys
// current, so an edge set to another period than the bucket's refuses to start.
// A key is sealed (keyseal.go) when the edge holds the credentials keyring, and kept
// as a plain JWK otherwise.
type keyRecord struct {
	Period int64                 `json:"period_s"`
	JWK    *jose.JSONWebKey      `json:"jwk,omitempty"`
	Sealed *credentials.Envelope `json:"sealed,omitempty"`
}

// Keys are the signing keys: the newest signs, and it and the one before it verify,
// so that a token signed just before a rotation stays good until it expires.
type Keys struct {
	kv      jetstream.KeyValue
	js      jetstream.JetStream
	rotate  time.Duration
	keyring *credentials.Keyring // seals the private keys; nil: they are stored plain

	mu     sync.Mutex
	held   []jose.JSONWebKey // newest first
	loaded time.Time
}

// OpenKeys opens the key bucket (made when missing) and makes sure a key of the
// current rotation period exists. A key older than rotate is replaced by a new one
// the first time it is asked for after that. With keyring, the private keys are
// stored sealed under it; without (nil), as plain JWKs.
func OpenKeys(ctx context.Context, store *registry.Store, rotate time.Duration, keyring *credentials.Keyring) (*Keys, error) {
	if rotate <= 0 {
		return nil, errors.New("oauth: the key rotation period must be positive")
	}
	kv, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket:      KeyBucket,
		Description: "toolgate OAuth token signing keys, by generation",
		History:     1,
	}, false)
	if err != nil {
		return nil, fmt.Errorf("oauth: key bucket: %w", err)
	}
	k := &Keys{kv: kv, js: store.JetStream(), rotate: rotate, keyring: keyring}
	if _, err := k.Signing(ctx, time.Now()); err != nil {
		return nil, err
	}
	return k, nil
}

// generation is the rotation period at names.
func (k *Keys) generation(at time.Time) int64 { return at.Unix() / int64(k.rotate/time.Second) }

// Signing is the key that signs at now: the current period's, made when it is
// missing. Edges that rotate at once all try to create the same record; one wins
// and the others read it. A newer key held signs as well: one another edge made
// for the next period, its clock a little ahead of this one's, or the current key
// when now is in an earlier period (a token dated back).
func (k *Keys) Signing(ctx context.Context, now time.Time) (jose.JSONWebKey, error) {
	gen := k.generation(now)
	if key, ok := k.newest(gen); ok {
		return key, nil
	}
	name := keyPrefix + strconv.FormatInt(gen, 10)
	if err := k.create(ctx, name); err != nil && !errors.Is(err, jetstream.ErrKeyExists) {
		return jose.JSONWebKey{}, err
	}
	for attempt := 1; ; attempt++ {
		if err := k.load(ctx, now); err != nil {
			return jose.JSONWebKey{}, err
		}
		if key, ok := k.newest(gen); ok {
			return key, nil
		}
		// Written (by this edge or another), yet not read back: the bucket's leader
		// changed between the two, as it does while a new cluster settles, and the
		// new one has not applied the write yet.
		if attempt == settleAttempts {
			return jose.JSONWebKey{}, fmt.Errorf("oauth: signing key %s is not in the bucket after %d reads", name, attempt)
		}
		select {
		case <-ctx.Done():
			return jose.JSONWebKey{}, fmt.Errorf("oauth: signing key %s is not in the bucket: %w", name, ctx.Err())
		case <-time.After(settleWait):
		}
	}
}

// newest is the newest key held, when it is of generation gen or a later one.
func (k *Keys) newest(gen int64) (jose.JSONWebKey, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.held) == 0 {
		return jose.JSONWebKey{}, false
	}
	g, ok := generationOf(k.held[0].KeyID)
	return k.held[0], ok && g >= gen
}

// generationOf is the generation a key's record name holds, and whether it holds one.
func generationOf(name string) (int64, bool) {
	g, err := strconv.ParseInt(strings.TrimPrefix(name, keyPrefix), 10, 64)
	return g, err == nil && strings.HasPrefix(name, keyPrefix)
}

// A signing key written but not read back is read again settleWait later, up to
// settleAttempts reads in all.
const (
	settleWait     = 250 * time.Millisecond
	settleAttempts = 20
)

// create makes a new key under name, and removes the keys older than the one before it.
func (k *Keys) create(ctx context.Context, name string) error {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("oauth: generate signing key: %w", err)
	}
	b, err := k.record(int64(k.rotate/time.Second), jose.JSONWebKey{Key: priv, KeyID: name, Algorithm: string(Algorithm), Use: "sig"})
	if err != nil {
		return err
	}
	if _, err := k.kv.Create(ctx, name, b); err != nil {
		return fmt.Errorf("oauth: store signing key: %w", err)
	}
	names, err := k.names(ctx)
	if err != nil {
		return err
	}
	for _, old := range names[min(2, len(names)):] {
		_ = k.kv.Purge(ctx, old) // another edge may have removed it already
	}
	return nil
}

// names lists the keys' records, newest first.
func (k *Keys) names(ctx context.Context) ([]string, error) {
	lister, err := k.kv.ListKeys(ctx)
	if err != nil {
		return nil, fmt.Errorf("oauth: list signing keys: %w", err)
	}
	defer func() { _ = lister.Stop() }()
	var gens []int64
	for name := range lister.Keys() {
		if g, ok := generationOf(name); ok {
			gens = append(gens, g)
		}
	}
	slices.Sort(gens)
	slices.Reverse(gens)
	names := make([]string, len(gens))
	for i, g := range gens {
		names[i] = keyPrefix + strconv.FormatInt(g, 10)
	}
	return names, nil
}

// load reads the two newest keys from the bucket's leader.
func (k *Keys) load(ctx context.Context, now time.Time) error {
	names, err := k.names(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return err
	}
	held := make([]jose.JSONWebKey, 0, 2)
	for _, name := range names[:min(2, len(names))] {
		b, _, err := registry.ReadLatest(ctx, k.js, KeyBucket, name)
		if errors.Is(err, registry.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("oauth: read signing key %s: %w", name, err)
		}
		rec, jwk, err := k.decode(name, b)
		if err != nil {
			return err
		}
		if want := int64(k.rotate / time.Second); rec.Period != want {
			return fmt.Errorf("oauth: the signing keys in %s rotate every %s, this edge every %s: --oauth-key-rotation must be the same on every edge",
				KeyBucket, time.Duration(rec.Period)*time.Second, k.rotate)
		}
		held = append(held, jwk)
	}
	k.mu.Lock()
	k.held, k.loaded = held, now
	k.mu.Unlock()
	return nil
}

// verifying finds the public key kid names, reading the bucket again when it is not
// held (a key another edge made) or what is held is old.
func (k *Keys) verifying(ctx context.Context, kid string, now time.Time) (jose.JSONWebKey, bool) {
	j, ok, loaded := k.find(kid)
	if age := now.Sub(loaded); (!ok && age > reloadAtMostBy) || age > reloadEvery {
		if k.load(ctx, now) == nil {
			j, ok, _ = k.find(kid)
		}
	}
	return j, ok
}

// find is the public half of the held key kid names, and when the keys were read.
func (k *Keys) find(kid string) (jose.JSONWebKey, bool, time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, j := range k.held {
		if j.KeyID == kid {
			return j.Public(), true, k.loaded
		}
	}
	return jose.JSONWebKey{}, false, k.loaded
}

// JWKS is the public half of the keys that verify: what an issuer's jwks_uri serves.
func (k *Keys) JWKS(ctx context.Context, now time.Time) jose.JSONWebKeySet {
	_, _ = k.Signing(ctx, now) // rotate when due, so the set names the key that signs
	k.mu.Lock()
	defer k.mu.Unlock()
	set := jose.JSONWebKeySet{Keys: make([]jose.JSONWebKey, 0, len(k.held))}
	for _, j := range k.held {
		set.Keys = append(set.Keys, j.Public())
	}
	return set
}
