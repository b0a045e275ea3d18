package approvals

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// The expiries: how long a call waits for a decision unless its rule says, and the
// most any rule may say.
const (
	DefaultExpiry    = 15 * time.Minute
	DefaultMaxExpiry = 24 * time.Hour
	// BucketTTL is how long a record is kept after its last change: past the longest
	// wait, so a decided record can still be read for a day.
	BucketTTL = 2 * DefaultMaxExpiry
)

// Config configures the approvals of one edge.
type Config struct {
	// Expiry is how long a call waits for a decision when its rule names no time.
	Expiry time.Duration
	// MaxExpiry bounds every rule's time, and the admin API refuses a longer one.
	MaxExpiry time.Duration
	// Webhook, when set, is POSTed each new pending approval (see Announcer).
	Webhook WebhookConfig
	// Subjects names the bus subjects (a call's progress).
	Subjects wire.Subjects
}

// DefaultConfig: 15 minutes to decide, 24 hours at most, no webhook.
func DefaultConfig() Config {
	return Config{Expiry: DefaultExpiry, MaxExpiry: DefaultMaxExpiry, Webhook: DefaultWebhookConfig(), Subjects: wire.DefaultSubjects}
}

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case c.Expiry <= 0:
		return errors.New("approvals: approval-expiry: must be positive")
	case c.MaxExpiry < c.Expiry:
		return errors.New("approvals: approval-max-expiry: must be at least approval-expiry")
	case c.MaxExpiry > DefaultMaxExpiry:
		return fmt.Errorf("approvals: approval-max-expiry: must be at most %v, what the bucket keeps a record for past its wait", DefaultMaxExpiry)
	}
	return c.Webhook.Validate()
}

// Approvals asks for, waits for and takes decisions on the calls held for approval.
type Approvals struct {
	kv    jetstream.KeyValue
	js    jetstream.JetStream
	nc    *nats.Conn
	cfg   Config
	trail *audit.Trail // nil: decisions are not recorded
	log   *slog.Logger
	hook  *announcer // nil: no webhook
	wg    sync.WaitGroup
}

// Open opens the bucket (made when missing, with the registry's replicas). trail,
// when not nil, records each decision.
func Open(ctx context.Context, nc *nats.Conn, store *registry.Store, cfg Config, trail *audit.Trail, log *slog.Logger) (*Approvals, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	kv, err := store.OpenBucket(ctx, jetstream.KeyValueConfig{
		Bucket:      Bucket,
		Description: "toolgate calls held for a person's approval, by id",
		TTL:         BucketTTL,
	}, false)
	if err != nil {
		return nil, fmt.Errorf("approvals: bucket: %w", err)
	}
	a := &Approvals{kv: kv, js: store.JetStream(), nc: nc, cfg: cfg, trail: trail, log: log}
	if cfg.Webhook.URL != "" {
		a.hook = newAnnouncer(cfg.Webhook, log)
	}
	return a, nil
}

// Config is the configuration a was opened with.
func (a *Approvals) Config() Config { return a.cfg }

// Close waits for the webhook's announcements under way, until ctx ends.
func (a *Approvals) Close(ctx context.Context) {
	done := make(chan struct{})
	go func() { a.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// get reads the record id from the leader of the bucket's stream (a record made a
// moment ago through another node is there), with its revision.
func (a *Approvals) get(ctx context.Context, id string) (*Record, uint64, error) {
	if !registry.IsID(idPrefix, id) {
		return nil, 0, errNotFound
	}
	r, rev, err := registry.ReadLatestJSON[Record](ctx, a.js, Bucket, id)
	if errors.Is(err, registry.ErrNotFound) {
		return nil, 0, errNotFound
	}
	if err != nil {
		return nil, 0, fmt.Errorf("approvals: read %s: %w", id, err)
	}
	return r, rev, nil
}

// update writes r as the revision after rev; registry.ErrChanged when another write
// came first.
func (a *Approvals) update(ctx context.Context, r *Record, rev uint64) (uint64, error) {
	next, err := registry.UpdateRevision(ctx, a.kv, r.ID, r, rev)
	if err != nil && !errors.Is(err, registry.ErrChanged) {
		return 0, fmt.Errorf("approvals: %w", err)
	}
	return next, err
}

const idPrefix = "apr_"
