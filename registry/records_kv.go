package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// The records kept beside the registry by other packages (a call's, an approval's)
// are read and written here, the same way: read from the leader of the bucket's
// stream, written with a compare-and-set on the revision read.

// ErrChanged is a write refused because the record changed since it was read.
var ErrChanged = errors.New("registry: the record changed meanwhile")

// ReadLatestJSON is ReadLatest decoded as a T: ErrNotFound for no record.
func ReadLatestJSON[T any](ctx context.Context, js jetstream.JetStream, bucket, key string) (*T, uint64, error) {
	b, rev, err := ReadLatest(ctx, js, bucket, key)
	if err != nil {
		return nil, 0, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, 0, fmt.Errorf("decode %s: %w", key, err)
	}
	return &v, rev, nil
}

// UpdateRevision writes v under key as the revision after rev, and returns the new
// revision; ErrChanged when another write came first.
func UpdateRevision(ctx context.Context, kv jetstream.KeyValue, key string, v any, rev uint64) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encode %s: %w", key, err)
	}
	next, err := kv.Update(ctx, key, b, rev)
	if revisionConflict(err) {
		return 0, ErrChanged
	}
	if err != nil {
		return 0, fmt.Errorf("update %s: %w", key, err)
	}
	return next, nil
}

// IsID reports whether id could be one NewID(prefix) made: the prefix, then letters
// and digits, 64 bytes at most; so that an id a caller sent is one token of a key or
// subject, and nothing more.
func IsID(prefix, id string) bool {
	if len(id) <= len(prefix) || len(id) > 64 || id[:len(prefix)] != prefix {
		return false
	}
	for i := len(prefix); i < len(id); i++ {
		switch b := id[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9':
		default:
			return false
		}
	}
	return true
}
