package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// quotaCount is a rule's count in one window: the calls edges have taken from it,
// the leases they have not spent yet included, and the last takes, so that an edge
// that lost the answer to one can find out what it took.
type quotaCount struct {
	Used  int64       `json:"used"`
	Takes []quotaTake `json:"takes,omitempty"`
}

type quotaTake struct {
	ID   string `json:"id"`
	Took int64  `json:"took"`
}

// slotHolders are the calls a rule's subject has running at once, by the edge
// holding them: each edge's count and until when it stands (unix milliseconds) unless
// the edge writes it again.
type slotHolders struct {
	Edges map[string]slotHold `json:"edges"`
}

type slotHold struct {
	Calls int   `json:"calls"`
	Until int64 `json:"until"`
}

// quotaTakesKept is how many of the last takes a count keeps: enough that an edge
// asking again at its next call finds its own among those of every other edge.
const quotaTakesKept = 16

// QuotaTake is one take of a window's count by an edge.
type QuotaTake struct {
	// ID names this take, unique to it.
	ID string
	// Want is how many calls to take (at least one); Unspent how many an earlier take
	// of this edge left unspent, given back first.
	Want, Unspent int64
	// Lost is the ID of an earlier take of this edge whose answer never came (it
	// timed out): what it took, if it was written, is Recovered.
	Lost string
}

// QuotaCounterLinger is how long a window's count outlives the window: long enough
// for a clock a little behind to still find it.
const QuotaCounterLinger = time.Minute

// TakeQuota makes take of the count at key (see QuotaWindow) of a window that ends at
// end and admits limit. It returns how many calls it took (fewer than take.Want, or
// none, when the window has fewer left) and how many the lost take took, if any. The
// count is changed compare-and-set, so edges taking at once never take the same
// call, and lives until the window's end and QuotaCounterLinger more.
func (s *Store) TakeQuota(ctx context.Context, key string, limit int64, take QuotaTake, end, now time.Time) (took, recovered int64, err error) {
	if limit < 1 || take.Want < 1 || take.Unspent < 0 || take.ID == "" {
		return 0, 0, fmt.Errorf("registry: take quota %s: limit %d, want %d, unspent %d, id %q", key, limit, take.Want, take.Unspent, take.ID)
	}
	ttl := max(end.Sub(now), 0) + QuotaCounterLinger
	for {
		var c quotaCount
		rev, err := s.quotaGet(ctx, key, &c)
		if err != nil {
			return 0, 0, err
		}
		recovered = 0
		for _, t := range c.Takes {
			if take.Lost != "" && t.ID == take.Lost {
				recovered = t.Took
			}
		}
		c.Used = max(c.Used-take.Unspent, 0)
		took = max(min(take.Want, limit-c.Used), 0)
		if took == 0 && take.Unspent == 0 {
			return 0, recovered, nil
		}
		c.Used += took
		c.Takes = append(c.Takes, quotaTake{ID: take.ID, Took: took})
		c.Takes = c.Takes[max(len(c.Takes)-quotaTakesKept, 0):]
		b, err := json.Marshal(c)
		if err != nil {
			return 0, 0, err
		}
		if err = s.quotaPut(ctx, key, b, rev, ttl); err == nil {
			return took, recovered, nil
		}
		if !revisionConflict(err) { // wrong last sequence: another edge took
			return 0, 0, fmt.Errorf("registry: quota %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
	}
}

// QuotaUsed is the count at key (see QuotaWindow): 0 when nothing was taken.
func (s *Store) QuotaUsed(ctx context.Context, key string) (int64, error) {
	var c quotaCount
	_, err := s.quotaGet(ctx, key, &c)
	return c.Used, err
}

// HoldSlots sets to calls how many calls edge runs at once of the rule's subject at
// key (see QuotaSlots), standing until until. More than edge held before are taken
// only while every edge's together, those past their until left out, stay within
// limit; ok is false when they would not. Fewer (0 lets go of them all) are always
// written. The record lives until the last holder's until and a minute more, so the
// calls an edge that died held count for no longer than until.
func (s *Store) HoldSlots(ctx context.Context, key, edge string, calls, limit int, until, now time.Time) (ok bool, err error) {
	for {
		var h slotHolders
		rev, err := s.quotaGet(ctx, key, &h)
		if err != nil {
			return false, err
		}
		held, others := h.running(edge, now)
		if calls > held && others+calls > limit {
			return false, nil
		}
		if h.Edges == nil {
			h.Edges = map[string]slotHold{}
		}
		if calls > 0 {
			h.Edges[edge] = slotHold{Calls: calls, Until: until.UnixMilli()}
		} else {
			delete(h.Edges, edge)
		}
		last := now.UnixMilli()
		for _, e := range h.Edges {
			last = max(last, e.Until)
		}
		b, err := json.Marshal(h)
		if err != nil {
			return false, err
		}
		if err = s.quotaPut(ctx, key, b, rev, time.UnixMilli(last).Sub(now)+time.Minute); err == nil {
			return true, nil
		}
		if !revisionConflict(err) {
			return false, fmt.Errorf("registry: quota %s: %w", key, err)
		}
		if ctx.Err() != nil {
			return false, ctx.Err()
		}
	}
}

// SlotsRunning is how many calls every edge together runs at once of the rule's
// subject at key (see QuotaSlots), those of holders past their until left out.
func (s *Store) SlotsRunning(ctx context.Context, key string, now time.Time) (int, error) {
	var h slotHolders
	if _, err := s.quotaGet(ctx, key, &h); err != nil {
		return 0, err
	}
	_, others := h.running("", now)
	return others, nil
}

// running is what edge holds, and what the other edges whose holds still stand hold
// together, as of now. Holders past their until are dropped.
func (h *slotHolders) running(edge string, now time.Time) (held, others int) {
	for name, e := range h.Edges {
		switch {
		case name == edge:
			held = e.Calls
		case time.UnixMilli(e.Until).Before(now):
			delete(h.Edges, name) // an edge that stopped writing: it died, or lost the bus
		default:
			others += e.Calls
		}
	}
	return held, others
}

// quotaGet decodes the record at key of the quotas' bucket into v and returns its
// revision; 0 and v as it is when there is none.
func (s *Store) quotaGet(ctx context.Context, key string, v any) (uint64, error) {
	e, err := s.quotas.Get(ctx, key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return 0, nil
	case errors.Is(err, nats.ErrNoResponders):
		return 0, errors.Join(fmt.Errorf("registry: quota %s: %w", key, err), s.remake(ctx, BucketQuotas))
	case err != nil:
		return 0, fmt.Errorf("registry: quota %s: %w", key, err)
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, fmt.Errorf("registry: quota %s: %w", key, err)
	}
	return e.Revision(), nil
}

// quotaPut writes b at key of the quotas' bucket with its own TTL, compare-and-set on
// rev (0: the key holds nothing, or a deleted or expired record).
func (s *Store) quotaPut(ctx context.Context, key string, b []byte, rev uint64, ttl time.Duration) error {
	ttl = max(ttl, time.Second) // the least TTL a message may have
	if rev == 0 {
		_, err := s.quotas.Create(ctx, key, b, jetstream.KeyTTL(ttl))
		return err
	}
	return s.updateWithTTL(ctx, BucketQuotas, key, b, rev, ttl)
}
