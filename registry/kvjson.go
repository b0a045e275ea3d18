package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// getJSON reads the record at key as the bucket's leader has it (see Store.latest).
func getJSON[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, key string) (*T, uint64, error) {
	b, rev, err := s.latest(ctx, kv, key)
	if err != nil {
		return nil, 0, unavailable(err)
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, 0, fmt.Errorf("registry: decode %s/%s: %w", kv.Bucket(), key, err)
	}
	return &v, rev, nil
}

func putJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("registry: encode %s/%s: %w", kv.Bucket(), key, err)
	}
	if _, err := kv.Put(ctx, key, b); err != nil {
		return fmt.Errorf("registry: put %s/%s: %w", kv.Bucket(), key, err)
	}
	return nil
}

func createJSON(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	_, err := createJSONRev(ctx, kv, key, v)
	return err
}

// createOwnJSON is createJSON as an attempt of lasting: after an attempt that may have
// written v (again), a record at key that is v is this write's own.
func createOwnJSON(ctx context.Context, s *Store, kv jetstream.KeyValue, key string, v any, again bool) error {
	err := createJSON(ctx, kv, key, v)
	if !errors.Is(err, ErrExists) || !again {
		return err
	}
	b, merr := json.Marshal(v)
	have, _, gerr := s.latest(ctx, kv, key)
	switch {
	case merr == nil && gerr == nil && string(have) == string(b):
		return nil // the earlier attempt's
	case gerr == nil:
		return err // another writer's
	case errors.Is(gerr, ErrNotFound):
		// The earlier attempt still waits for the stream's quorum, which refuses
		// a second write of the key meanwhile.
		return fmt.Errorf("registry: create %s/%s: %w", kv.Bucket(), key, errUnsettled)
	default:
		return gerr
	}
}

// createJSONRev is createJSON that also returns the revision of the write.
func createJSONRev(ctx context.Context, kv jetstream.KeyValue, key string, v any) (uint64, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("registry: encode %s/%s: %w", kv.Bucket(), key, err)
	}
	rev, err := kv.Create(ctx, key, b)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("registry: create %s/%s: %w", kv.Bucket(), key, err)
	}
	return rev, nil
}

// updateJSON applies change to the record at key with compare-and-set, retrying when
// another writer got there first.
func updateJSON[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, key string, change func(*T) error) (*T, error) {
	return updateJSONWith(ctx, s, kv, key, change, func(b []byte, rev uint64, _ *T) error {
		_, err := kv.Update(ctx, key, b, rev)
		return err
	})
}

// updateJSONWith is updateJSON with its own write of the changed record v, encoded as
// b, as the revision after rev: an error that is jetstream.ErrKeyExists says another
// writer wrote first, and the change is made again on what it wrote.
func updateJSONWith[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, key string, change func(*T) error, write func(b []byte, rev uint64, v *T) error) (*T, error) {
	for {
		v, rev, err := getJSON[T](ctx, s, kv, key)
		if err != nil {
			return nil, err
		}
		if err := change(v); err != nil {
			return nil, err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("registry: encode %s/%s: %w", kv.Bucket(), key, err)
		}
		err = write(b, rev, v)
		if err == nil {
			return v, nil
		}
		if !revisionConflict(err) { // wrong last sequence: someone else wrote
			return nil, fmt.Errorf("registry: update %s/%s: %w", kv.Bucket(), key, err)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

// revisionConflict reports whether a write that named the revision it follows was
// refused because the record is at another one: another writer wrote first, or the
// revision was read from a node behind the others (one back from a partition). Either
// way the change is made again on what is there now.
// (A replicated bucket says so with another code than a single node's: the client
// marks both ErrKeyRevisionMismatch.)
func revisionConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}

func deleteKey(ctx context.Context, kv jetstream.KeyValue, key string) error {
	if err := kv.Delete(ctx, key); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("registry: delete %s/%s: %w", kv.Bucket(), key, err)
	}
	return nil
}

func now() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }

func eachJSON[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, fn func(key string, v T)) error {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return unavailable(fmt.Errorf("registry: list %s: %w", kv.Bucket(), err))
	}
	defer lister.Stop()
	for key := range lister.Keys() {
		v, _, err := getJSON[T](ctx, s, kv, key)
		if errors.Is(err, ErrNotFound) {
			continue // deleted since listed
		}
		if err != nil {
			return err
		}
		fn(key, *v)
	}
	return nil
}
