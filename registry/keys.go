package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// NewKeyRequest describes a key to create.
type NewKeyRequest struct {
	Account   string
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
}

// CreateKey makes a key for an account and returns its record and the key itself,
// which is not stored and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, req NewKeyRequest) (*Key, string, error) {
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) error {
		_, err := s.Account(ctx, req.Account)
		return err
	}); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, "", invalidf("account %q does not exist", req.Account)
		}
		return nil, "", err
	}
	for _, sc := range req.Scopes {
		if err := wire.CheckToolID(sc); err != nil {
			return nil, "", invalidf("scope: %v", err)
		}
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		return nil, "", invalidf("expires_at: must be in the future")
	}
	secret := NewKey()
	k := Key{
		ID:        NewID("key_"),
		Account:   req.Account,
		Name:      req.Name,
		Prefix:    secret[:KeyPrefixLen],
		Scopes:    req.Scopes,
		CreatedAt: now(),
		ExpiresAt: req.ExpiresAt,
	}
	if err := s.lastingCreate(ctx, s.keys, Hash(secret), k); err != nil {
		return nil, "", err
	}
	return &k, secret, nil
}

// ImportKey files a record under an existing key's hash: how `toolgate dev` keeps the
// same key across restarts when its data directory is reused.
func (s *Store) ImportKey(ctx context.Context, secret string, k Key) error {
	if k.Prefix == "" {
		k.Prefix = secret[:min(len(secret), KeyPrefixLen)]
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	err := s.lastingCreate(ctx, s.keys, Hash(secret), k)
	if errors.Is(err, ErrExists) {
		return nil
	}
	return err
}

// Keys returns an account's keys by hash (every account's when account is "").
func (s *Store) Keys(ctx context.Context, account string) (map[string]Key, error) {
	out := map[string]Key{}
	err := eachJSON(ctx, s, s.keys, func(hash string, k Key) {
		if account == "" || k.Account == account {
			out[hash] = k
		}
	})
	return out, err
}

// RevokeKey marks the key filed under hash revoked, and announces it (see Revocation).
// Revoking twice is not an error. The caller found the key (in a view, or a listing) a
// moment ago: a key the bucket says is not there is read again for up to
// staleReadWait, since a node of the cluster that is catching up (one back from a
// restart or a partition) may answer a read with what it held before the key was made.
func (s *Store) RevokeKey(ctx context.Context, hash string) (*Key, error) {
	var k *Key
	var rev uint64
	began := time.Now()
	err := s.lastingEvery(ctx, s.opts.RevokeAttempt, func(ctx context.Context, _ bool) (err error) {
		k, err = updateJSONWith(ctx, s, s.keys, hash, func(k *Key) error {
			if k.RevokedAt == nil {
				t := now()
				k.RevokedAt = &t
			}
			return nil
		}, func(b []byte, last uint64, _ *Key) (err error) {
			rev, err = s.keys.Update(ctx, hash, b, last)
			return err
		})
		if errors.Is(err, ErrNotFound) && time.Since(began) < staleReadWait {
			return fmt.Errorf("%w: %w", errUnsettled, err)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	s.revoked(ctx, RevokedKey, hash, s.keys, rev)
	return k, nil
}

// staleReadWait is how long a record that must exist is read again when a read says
// it does not (see RevokeKey).
const staleReadWait = 2 * time.Second
