package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// rateState is a shared token bucket: the tokens it held at At (unix nanoseconds).
type rateState struct {
	Tokens float64 `json:"tokens"`
	At     int64   `json:"at"`
}

// KeyRateID is the shared rate bucket of an API key.
func KeyRateID(keyID string) string { return "key." + keyID }

// LinkRateID is the shared rate bucket of a link: its account's connection to tool.
func LinkRateID(account, tool string) string { return "link." + account + "." + tool }

// TakeTokens takes up to want tokens (at least one) from the shared token bucket id,
// which fills at rate per second up to burst, as of now, first giving back unspent
// tokens an earlier take did not use. It returns how many it took; none when not even
// one is there, and then how long until one will be. Buckets are changed
// compare-and-set, so edges taking at once never take the same token.
//
// Refill is reckoned from the clock of whichever edge wrote last: a clock ahead of the
// others lets a bucket refill sooner by the difference, at most to burst.
func (s *Store) TakeTokens(ctx context.Context, id string, rate float64, burst, want, unspent int, now time.Time) (int, time.Duration, error) {
	if rate <= 0 || burst < 1 || want < 1 || unspent < 0 {
		return 0, 0, fmt.Errorf("registry: take tokens %s: rate %v, burst %d, want %d, unspent %d", id, rate, burst, want, unspent)
	}
	for {
		st := rateState{Tokens: float64(burst), At: now.UnixNano()}
		var rev uint64
		e, err := s.rates.Get(ctx, id)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case errors.Is(err, nats.ErrNoResponders):
			// No stream keeps the bucket: gone with a NATS restart (it is in memory).
			// Made again, the next take finds it.
			return 0, 0, errors.Join(fmt.Errorf("registry: rate %s: %w", id, err), s.remake(ctx, BucketRates))
		case err != nil:
			return 0, 0, fmt.Errorf("registry: rate %s: %w", id, err)
		default:
			if err := json.Unmarshal(e.Value(), &st); err != nil {
				return 0, 0, fmt.Errorf("registry: rate %s: %w", id, err)
			}
			rev = e.Revision()
		}
		elapsed := max(time.Duration(now.UnixNano()-st.At), 0)
		avail := min(float64(burst), st.Tokens+rate*elapsed.Seconds()+float64(unspent))
		took := min(want, int(math.Floor(avail)))
		if took < 1 && unspent == 0 {
			return 0, time.Duration((1 - avail) / rate * float64(time.Second)), nil
		}
		// (With tokens to give back, the bucket is written even when none is taken.)
		b, err := json.Marshal(rateState{Tokens: avail - float64(took), At: max(now.UnixNano(), st.At)})
		if err != nil {
			return 0, 0, err
		}
		if rev == 0 {
			_, err = s.rates.Create(ctx, id, b)
		} else {
			_, err = s.rates.Update(ctx, id, b, rev)
		}
		if err == nil {
			if took < 1 {
				return 0, time.Duration((1 - avail) / rate * float64(time.Second)), nil
			}
			return took, 0, nil
		}
		if !revisionConflict(err) { // wrong last sequence: another edge took
			return 0, 0, fmt.Errorf("registry: rate %s: %w", id, err)
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
	}
}
