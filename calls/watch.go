package calls

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// Watch follows the records of ids in the bucket, whoever writes them and through
// whichever edge: the id of a record is sent once for its state when the watch starts
// and once for each write after, until ctx ends (the channel then closes). It reads
// nothing for anyone: the caller reads each record as its owner (Get), so a watch of
// another caller's id tells it nothing. An id that is not a call's is refused, so no
// id names more than one key.
func (cs *Calls) Watch(ctx context.Context, ids []string) (<-chan string, error) {
	for _, id := range ids {
		if !registry.IsID(idPrefix, id) {
			return nil, fmt.Errorf("calls: watch %q: %w", id, ErrNotFound)
		}
	}
	// WatchFiltered writes its subjects over the keys it is given: a copy keeps ids.
	w, err := cs.recs.kv.WatchFiltered(ctx, append([]string(nil), ids...))
	if err != nil {
		return nil, fmt.Errorf("calls: watch: %w", err)
	}
	out := make(chan string, len(ids))
	go func() {
		defer close(out)
		defer func() { _ = w.Stop() }()
		for {
			select {
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil || e.Operation() != jetstream.KeyValuePut {
					continue // the end of the first values, or a record removed
				}
				select {
				case out <- e.Key():
				case <-ctx.Done():
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}
