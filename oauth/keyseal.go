package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-jose/go-jose/v4"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// Signing keys at rest: whoever holds a copy of the key bucket could sign tokens with
// a plain private key, so an edge with the credentials keyring (--credentials-key-file)
// stores each sealed under it, as a connection's values are (a data key of its own,
// wrapped under the current KEK, whose id the envelope names), bound to the key's id.

// sealPurpose binds a sealed signing key (credentials.Keyring.SealSecret).
const sealPurpose = "oauth-signing-key"

// record encodes a new key's record: sealed when the edge holds the keyring.
func (k *Keys) record(period int64, jwk jose.JSONWebKey) ([]byte, error) {
	plain, err := json.Marshal(jwk)
	if err != nil {
		return nil, fmt.Errorf("oauth: encode signing key: %w", err)
	}
	defer clear(plain)
	rec := keyRecord{Period: period}
	if k.keyring == nil {
		rec.JWK = &jwk
	} else {
		env, err := k.keyring.SealSecret(plain, sealPurpose, jwk.KeyID)
		if err != nil {
			return nil, fmt.Errorf("oauth: seal signing key %s: %w", jwk.KeyID, err)
		}
		rec.Sealed = &env
	}
	return json.Marshal(rec)
}

// decode reads a key's record, opening it when sealed.
func (k *Keys) decode(name string, b []byte) (keyRecord, jose.JSONWebKey, error) {
	var rec keyRecord
	if err := json.Unmarshal(b, &rec); err != nil {
		return keyRecord{}, jose.JSONWebKey{}, fmt.Errorf("oauth: decode signing key %s: %w", name, err)
	}
	switch {
	case rec.JWK != nil:
		return rec, *rec.JWK, nil
	case rec.Sealed == nil:
		return keyRecord{}, jose.JSONWebKey{}, fmt.Errorf("oauth: signing key %s: no key in its record", name)
	case k.keyring == nil:
		return keyRecord{}, jose.JSONWebKey{}, fmt.Errorf("oauth: signing key %s is sealed under credentials key %s: start this edge with --credentials-key-file", name, rec.Sealed.KeyID)
	}
	plain, err := k.keyring.OpenSecret(*rec.Sealed, sealPurpose, name)
	if err != nil {
		return keyRecord{}, jose.JSONWebKey{}, fmt.Errorf("oauth: open signing key: %w", err)
	}
	defer clear(plain)
	var jwk jose.JSONWebKey
	if err := json.Unmarshal(plain, &jwk); err != nil || jwk.KeyID != name {
		return keyRecord{}, jose.JSONWebKey{}, fmt.Errorf("oauth: signing key %s: its sealed key does not decode as itself", name)
	}
	return rec, jwk, nil
}

// Sealed reports whether the edge stores its signing keys sealed (it holds the
// credentials keyring).
func (k *Keys) Sealed() bool { return k.keyring != nil }

// Rewrap seals every signing key in the bucket under the keyring's current KEK: one
// sealed under an older KEK is wrapped again, one stored plain (before the edges had
// a keyring) is sealed. Each write is compare-and-set; a key changed meanwhile is
// read again. It returns how many keys it wrote and how many there are.
func (k *Keys) Rewrap(ctx context.Context) (rewrapped, total int, err error) {
	if k.keyring == nil {
		return 0, 0, errors.New("oauth: signing keys are sealed only by an edge with --credentials-key-file")
	}
	names, err := k.names(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, name := range names {
		changed, err := k.rewrapOne(ctx, name)
		if errors.Is(err, registry.ErrNotFound) {
			continue // removed by a rotation meanwhile
		}
		if err != nil {
			return rewrapped, total, err
		}
		total++
		if changed {
			rewrapped++
		}
	}
	return rewrapped, total, nil
}

// rewrapOne seals name's key under the current KEK, unless it is already.
func (k *Keys) rewrapOne(ctx context.Context, name string) (bool, error) {
	for {
		b, rev, err := registry.ReadLatest(ctx, k.js, KeyBucket, name)
		if err != nil {
			return false, err
		}
		rec, jwk, err := k.decode(name, b)
		if err != nil {
			return false, err
		}
		var out []byte
		switch {
		case rec.Sealed == nil:
			out, err = k.record(rec.Period, jwk)
		default:
			var changed bool
			if changed, err = k.keyring.RewrapSecret(rec.Sealed, sealPurpose, name); err == nil && changed {
				out, err = json.Marshal(rec)
			}
		}
		if err != nil || out == nil {
			return false, err
		}
		if _, err := k.kv.Update(ctx, name, out, rev); err == nil {
			return true, nil
		} else if !errors.Is(err, jetstream.ErrKeyExists) && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return false, fmt.Errorf("oauth: write signing key %s: %w", name, err)
		}
	}
}
