package calls

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// records reads and writes the bucket. Reads go to the leader of the bucket's stream
// (registry.ReadLatest): a call started a moment ago through another edge and another
// NATS node is there, where a follower's copy may not have it yet.
type records struct {
	kv  jetstream.KeyValue
	js  jetstream.JetStream
	obj jetstream.ObjectStore // the answers past one message (answers.go)
}

// openRecords opens the bucket as the registry opens its own: made when missing, with
// the registry's replicas and ttl (0: the bucket's own, DefaultTTL when making it); a
// bucket with another TTL is refused unless update.
func openRecords(ctx context.Context, store *registry.Store, ttl time.Duration, update bool) (*records, error) {
	js := store.JetStream()
	if ttl == 0 {
		ttl = DefaultTTL
		if kv, err := js.KeyValue(ctx, Bucket); err == nil {
			if st, err := kv.Status(ctx); err == nil {
				ttl = st.TTL()
			}
		}
	}
	kv, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "toolgate calls that outlive their request, by id",
		TTL:         ttl,
	}, update)
	if err != nil {
		return nil, fmt.Errorf("calls: bucket: %w", err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("calls: bucket: %w", err)
	}
	obj, err := openAnswers(ctx, js, st.TTL(), store.Options().Replicas)
	if err != nil {
		return nil, err
	}
	return &records{kv: kv, js: js, obj: obj}, nil
}

func answerKey(id string) string { return id + ".answer" }

func (rs *records) create(ctx context.Context, r *Record) (uint64, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return 0, fmt.Errorf("calls: encode %s: %w", r.ID, err)
	}
	rev, err := rs.kv.Create(ctx, r.ID, b)
	if err != nil {
		return 0, fmt.Errorf("calls: create %s: %w", r.ID, err)
	}
	if _, err := rs.kv.Put(ctx, ownerKey(r), nil); err != nil {
		return 0, fmt.Errorf("calls: create %s: its owner's key: %w", r.ID, err)
	}
	return rev, nil
}

// get reads the record id, and its revision.
func (rs *records) get(ctx context.Context, id string) (*Record, uint64, error) {
	if !registry.IsID(idPrefix, id) {
		return nil, 0, ErrNotFound
	}
	r, rev, err := registry.ReadLatestJSON[Record](ctx, rs.js, Bucket, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, 0, ErrNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("calls: read %s: %w", id, err)
	}
	return r, rev, nil
}

// update writes r as the revision after rev; errConflict when another write came
// first (a cancel, or the end).
func (rs *records) update(ctx context.Context, r *Record, rev uint64) (uint64, error) {
	next, err := registry.UpdateRevision(ctx, rs.kv, r.ID, r, rev)
	if errors.Is(err, registry.ErrChanged) {
		return 0, errConflict
	}
	if err != nil {
		return 0, fmt.Errorf("calls: %w", err)
	}
	return next, nil
}

// errConflict: the record changed since it was read.
var errConflict = registry.ErrChanged

func (rs *records) answerBytes(ctx context.Context, id string) ([]byte, error) {
	b, _, err := registry.ReadLatest(ctx, rs.js, Bucket, answerKey(id))
	if errors.Is(err, registry.ErrNotFound) {
		return nil, ErrNotFound // expired a moment before its record, written after it
	}
	if err != nil {
		return nil, fmt.Errorf("calls: read the answer of %s: %w", id, err)
	}
	return b, nil
}

const idPrefix = "call_"
