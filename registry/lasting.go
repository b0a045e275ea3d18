package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// attemptTimeout bounds one request of retry's: a request sent while a cluster forms
// (its routes not all up) may never be answered, and must not hold the whole wait.
const attemptTimeout = 5 * time.Second

// retry runs op until it succeeds or fails in a way waiting will not mend; a new
// cluster answers "not ready" while it elects its JetStream leader. Each attempt has
// attemptTimeout at most.
func retry(ctx context.Context, bucket string, op func(context.Context) error) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := op(attempt)
		cancel()
		if err == nil || !retryable(err) {
			if err != nil {
				return fmt.Errorf("registry: bucket %s: %w", bucket, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("registry: bucket %s: %w (last error: %v)", bucket, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// writeAttempt bounds one attempt of a change that lasts (see Options.WriteWait): a
// request to a stream's leader that died meanwhile is never answered, and the next
// attempt finds the new one.
const writeAttempt = 2 * time.Second

// lasting runs op, a change of the records an administrator keeps, until it succeeds
// or fails in a way waiting will not mend, for up to WriteWait; each attempt has
// writeAttempt at most. again tells op that an attempt before it failed without an
// answer, which may have been written nonetheless.
func (s *Store) lasting(ctx context.Context, op func(ctx context.Context, again bool) error) error {
	return s.lastingEvery(ctx, writeAttempt, op)
}

// lastingEvery is lasting with attempts of its own length.
func (s *Store) lastingEvery(ctx context.Context, attemptWait time.Duration, op func(ctx context.Context, again bool) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.WriteWait)
	defer cancel()
	for again := false; ; again = true {
		attempt, cancelAttempt := context.WithTimeout(ctx, attemptWait)
		err := op(attempt, again)
		cancelAttempt()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return unavailable(err)
		}
		select {
		case <-ctx.Done():
			return unavailable(err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Retryable reports whether err is JetStream not answering yet, or electing a
// leader: what waiting mends. The streams kept beside the registry (the audit trail)
// retry on it as the registry's buckets do.
func Retryable(err error) bool { return retryable(err) }

func retryable(err error) bool {
	return errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, nats.ErrTimeout) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrDisconnected) || errors.Is(err, errUnsettled) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoHeartbeat) || isClusterNotReady(err)
}

func isClusterNotReady(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		// 10008: JetStream temporarily unavailable; 503 while the meta leader is elected.
		return apiErr.ErrorCode == 10008 || apiErr.Code == 503
	}
	return false
}

// errUnsettled marks an answer the bucket may not stand by a moment later: a read that
// may have come from a node behind the others, or a write refused while an earlier
// attempt of it waits for the stream's quorum. lasting tries again.
var errUnsettled = errors.New("the bucket has not settled on the record yet")

// The single changes of lasting records, each tried for up to WriteWait.

func (s *Store) lastingCreate(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	return s.lasting(ctx, func(ctx context.Context, again bool) error { return createOwnJSON(ctx, s, kv, key, v, again) })
}

func (s *Store) lastingPut(ctx context.Context, kv jetstream.KeyValue, key string, v any) error {
	return s.lasting(ctx, func(ctx context.Context, _ bool) error { return putJSON(ctx, kv, key, v) })
}

func (s *Store) lastingDelete(ctx context.Context, kv jetstream.KeyValue, key string) error {
	return s.lasting(ctx, func(ctx context.Context, _ bool) error { return deleteKey(ctx, kv, key) })
}

// lastingUpdate is updateJSON tried for up to WriteWait; change must come to the same
// whether or not an attempt that failed without an answer was written.
func lastingUpdate[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, key string, change func(*T) error) (*T, error) {
	var v *T
	err := s.lasting(ctx, func(ctx context.Context, _ bool) (err error) {
		v, err = updateJSON(ctx, s, kv, key, change)
		return err
	})
	return v, err
}
