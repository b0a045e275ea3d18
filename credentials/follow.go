package credentials

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/registry"
)

// copyOf is an edge's copy of the credentials bucket (Vault.Follow): the records as
// the bucket last showed them, and the seal of each one's values to its tool's key,
// made once per revision. A call then costs no round trip to the bucket; a record the
// copy lacks, or one that lacks a field (the follower may lag a write by
// milliseconds), is read from the bucket's stream leader instead.
type copyOf struct {
	mu       sync.RWMutex
	records  map[string]*copied
	reloaded map[string]bool   // the keys a load from scratch has brought so far
	purged   map[string]uint64 // the keys cleared, and the purge's revision: older writes the follower brings late are not the record
}

type copied struct {
	r   *Record
	rev uint64

	sealMu  sync.Mutex
	sealKey string // the tool's key sealed is sealed to
	sealed  string
}

// Follow keeps a copy of the bucket in this process until ctx ends, from which Seal
// and Lookup answer without a round trip (see copyOf).
func (v *Vault) Follow(ctx context.Context, log *slog.Logger) {
	updates := make(chan registry.Update, 256)
	c := &copyOf{records: map[string]*copied{}, purged: map[string]uint64{}}
	v.copy.Store(c)
	c.hear(ctx, v.js.Conn(), v.store.RevokedSubject(), log)
	go v.store.Follow(ctx, Bucket, updates, log)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case u := <-updates:
				c.apply(u, log)
			}
		}
	}()
}

func (c *copyOf) apply(u registry.Update, log *slog.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch u.Mark {
	case registry.MarkReload:
		c.reloaded = map[string]bool{}
		c.purged = map[string]uint64{} // the load brings the bucket as it is now
		return
	case registry.MarkReloaded:
		for k := range c.records {
			if !c.reloaded[k] {
				delete(c.records, k)
			}
		}
		c.reloaded = nil
		return
	case registry.MarkLoaded:
		return
	}
	e := u.Entry
	if e.Operation() != jetstream.KeyValuePut {
		delete(c.records, e.Key())
		return
	}
	var r Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		log.Warn("credentials: a record that does not decode is left out", "key", e.Key(), "err", err)
		delete(c.records, e.Key())
		return
	}
	if c.reloaded != nil {
		c.reloaded[e.Key()] = true
	}
	if have := c.records[e.Key()]; (have == nil || have.rev < e.Revision()) && c.purged[e.Key()] < e.Revision() {
		c.records[e.Key()] = &copied{r: &r, rev: e.Revision()}
	}
}

// hear applies the clearing of a record announced by any edge (registry.Revocation
// of kind RevokedCredentials) at once, whatever the follower's lag, until ctx ends.
// A copy that misses one (its connection was down) has the purge from its follower.
func (c *copyOf) hear(ctx context.Context, nc *nats.Conn, subject string, log *slog.Logger) {
	sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
		var r registry.Revocation
		if json.Unmarshal(m.Data, &r) != nil || r.Kind != registry.RevokedCredentials || r.Bucket != Bucket {
			return
		}
		c.cleared(r.ID, r.Revision)
	})
	if err != nil {
		log.Warn("credentials: cannot follow revocations; the follower brings them", "err", err)
		return
	}
	context.AfterFunc(ctx, func() { _ = sub.Unsubscribe() })
}

// lookup is the copy's record of account's connection to tool, if it has one.
func (c *copyOf) lookup(account, tool string) *copied {
	if c == nil {
		return nil
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.records[recordKey(account, tool)]
}

// wrote puts a record this process wrote at revision rev into the copy at once, so
// that this edge's next answer shows its own write, whatever the follower's lag.
func (c *copyOf) wrote(key string, r *Record, rev uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have := c.records[key]; have == nil || have.rev < rev {
		kept := *r
		c.records[key] = &copied{r: &kept, rev: rev}
	}
}

// cleared takes a record cleared at revision rev out of the copy at once.
func (c *copyOf) cleared(key string, rev uint64) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have := c.records[key]; have != nil && have.rev < rev {
		delete(c.records, key)
	}
	c.purged[key] = max(c.purged[key], rev)
}
