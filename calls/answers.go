package calls

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// AnswerBucket is the JetStream object store of the answers too large for a message of
// the calls' bucket (past wire.PayloadThreshold), each an object named by its call's
// id. An object store has no TTL per object (nats.go's ObjectStore sets no
// per-message Nats-TTL), and the payloads bucket's 30 minutes are far shorter than a
// record lives, so it is a bucket of its own, whose TTL is answerTTL of the records'.
const AnswerBucket = wire.AnswerBucket

// answerTTL is how long an answer's object is kept, given the records' TTL: longer by
// a margin (a minute, or the TTL when shorter), as the object is written before the
// record's last change and must not expire first; a reader would then find the record
// without its answer, or the object's description without its chunks.
func answerTTL(ttl time.Duration) time.Duration { return ttl + min(ttl, time.Minute) }

// openAnswers opens the answers' bucket, made when missing, with answerTTL of the
// calls bucket's ttl and replicas; one with another TTL is brought to it, as the
// calls bucket (checked before) decides.
func openAnswers(ctx context.Context, js jetstream.JetStream, ttl time.Duration, replicas int) (jetstream.ObjectStore, error) {
	ttl = answerTTL(ttl)
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      AnswerBucket,
		Description: "toolgate: the answers of calls that outlive their request, past one message",
		TTL:         ttl,
		Replicas:    max(replicas, 1),
	}
	obj, err := js.ObjectStore(ctx, AnswerBucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		obj, err = js.CreateObjectStore(ctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) { // another edge made it first
			obj, err = js.ObjectStore(ctx, AnswerBucket)
		}
	case err == nil:
		if st, serr := obj.Status(ctx); serr == nil && st.TTL() != ttl {
			cfg.Replicas = st.Replicas()
			obj, err = js.UpdateObjectStore(ctx, cfg)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("calls: bucket %s: %w", AnswerBucket, err)
	}
	return obj, nil
}

// putAnswer keeps the answer of the call id: in the calls bucket when it fits a
// message, in the answers' bucket otherwise, which it reports.
func (rs *records) putAnswer(ctx context.Context, id string, body []byte) (inStore bool, err error) {
	if int64(len(body)) > wire.PayloadThreshold(rs.js.Conn().MaxPayload()) {
		if _, err := rs.obj.PutBytes(ctx, id, body); err != nil {
			return false, fmt.Errorf("calls: store the answer of %s: %w", id, err)
		}
		return true, nil
	}
	if _, err := rs.kv.Put(ctx, answerKey(id), body); err != nil {
		return false, fmt.Errorf("calls: store the answer of %s: %w", id, err)
	}
	return false, nil
}

// answer opens the body of the answer a of the call id, where putAnswer kept it: read
// from the answers' bucket as it arrives, in the object store's chunks.
func (rs *records) answer(ctx context.Context, id string, a *Answer) (io.ReadCloser, error) {
	if a != nil && a.InStore {
		r, err := rs.obj.Get(ctx, id)
		if errors.Is(err, jetstream.ErrObjectNotFound) {
			return nil, ErrNotFound
		}
		if err != nil {
			return nil, fmt.Errorf("calls: read the answer of %s: %w", id, err)
		}
		return r, nil
	}
	b, err := rs.answerBytes(ctx, id)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

// dropAnswer removes the answer of the call id, wherever it was kept.
func (rs *records) dropAnswer(ctx context.Context, id string) {
	_ = rs.kv.Purge(ctx, answerKey(id))
	_ = rs.obj.Delete(ctx, id)
}
