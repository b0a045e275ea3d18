package registry

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// Bucket names.
const (
	BucketTools       = wire.BucketTools
	BucketAccounts    = "tg-accounts"
	BucketKeys        = "tg-keys"
	BucketConnections = "tg-connections"
	BucketLinks       = "tg-links"
	BucketPresence    = wire.BucketPresence
	BucketSessions    = wire.BucketSessions
	BucketRates       = "tg-rates"
	BucketQuotas      = "tg-quotas"
)

// Options configure the buckets. A setting left at zero is taken from the buckets as
// they are, or from DefaultOptions when Open creates them; a setting given must be what
// the buckets have, unless Update is set. So a process started without --replicas joins
// a cluster's buckets as they are instead of quietly changing them.
type Options struct {
	// Replicas per bucket: 1 on a single node, 3 in a cluster.
	Replicas int
	// PresenceTTL is the presence bucket's TTL: the longest a worker's presence
	// outlives its last heartbeat. A worker sets its own (wire.DefaultPresenceTTL
	// unless told otherwise), which this bounds.
	PresenceTTL time.Duration
	// SessionTTL is how long an idle MCP session is kept.
	SessionTTL time.Duration
	// Update changes buckets that exist with other settings to these, instead of
	// refusing to open them: for changing a registry's replicas or TTLs on purpose.
	Update bool
	// WriteWait is how long a change of the records an administrator keeps (accounts,
	// keys, connections, links, tools) keeps trying while the registry cannot take it,
	// as while a bucket's stream elects a new leader after a NATS node died or dropped
	// off, before it fails. It is this process's, not the buckets': 0 is
	// DefaultWriteWait.
	WriteWait time.Duration
	// Subjects name the subject revocations are announced on (Subjects.Revoked);
	// the zero value is wire.DefaultSubjects.
	Subjects wire.Subjects
	// RevokeAttempt bounds one attempt of a revoking write (see
	// DefaultRevokeAttempt); 0 is the default. This process's, not the buckets'.
	RevokeAttempt time.Duration
	// ConfirmWait bounds how long a view whose follower is behind waits for a
	// stream's leader to confirm a key or link (see View.Confirm); 0 is
	// DefaultConfirmWait. This process's, not the buckets'.
	ConfirmWait time.Duration
}

// DefaultWriteWait is Options.WriteWait when unset: longer than a JetStream cluster
// takes to elect a stream's leader again once one is lost (a few seconds; at most 9
// seconds of election timeout after the leader's silence).
const DefaultWriteWait = 15 * time.Second

// DefaultOptions suit a single node.
func DefaultOptions() Options {
	return Options{Replicas: 1, PresenceTTL: wire.DefaultPresenceTTL, SessionTTL: 30 * time.Minute, WriteWait: DefaultWriteWait,
		RevokeAttempt: DefaultRevokeAttempt, ConfirmWait: DefaultConfirmWait}
}

// ErrSettingsDiffer is what a *MismatchError is.
var ErrSettingsDiffer = errors.New("registry: a bucket's settings differ from this process's")

// MismatchError is Open refusing a bucket that exists with another setting than the
// one the process asks for.
type MismatchError struct {
	Bucket, Setting string
	Have, Want      any
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("registry: bucket %s has %s %v, this process asks for %v: give every process the same settings, "+
		"leave them unset to take the buckets' own, or change the buckets on purpose (toolgate edge --update-registry)",
		e.Bucket, e.Setting, e.Have, e.Want)
}

func (e *MismatchError) Unwrap() error { return ErrSettingsDiffer }

// Store reads and writes the registry's records.
type Store struct {
	opts     Options
	js       jetstream.JetStream
	tools    jetstream.KeyValue
	accounts jetstream.KeyValue
	keys     jetstream.KeyValue
	conns    jetstream.KeyValue
	links    jetstream.KeyValue
	presence jetstream.KeyValue
	sessions jetstream.KeyValue
	rates    jetstream.KeyValue
	quotas   jetstream.KeyValue

	cfgMu   sync.Mutex
	configs map[string]jetstream.KeyValueConfig // each bucket's, by name, as Open or OpenBucket made or found it
}

// Open creates the buckets that are missing (it is safe for many processes to do so at
// once), checks those that exist against opts (see Options), and returns a Store on
// them. The Store's Options are the settings the buckets have.
func Open(ctx context.Context, nc *nats.Conn, opts Options) (*Store, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("registry: jetstream: %w", err)
	}
	// Every bucket as it is, read once: unset settings are taken from them, and each
	// is then checked against its configuration below.
	found := map[string]*existingBucket{}
	for _, name := range []string{BucketTools, BucketAccounts, BucketKeys, BucketConnections, BucketLinks, BucketPresence, BucketSessions, BucketRates, BucketQuotas} {
		if found[name], err = findBucket(ctx, js, name); err != nil {
			return nil, err
		}
	}
	def := DefaultOptions()
	if b := found[BucketTools]; opts.Replicas == 0 && b != nil {
		opts.Replicas = b.cfg.Replicas
	}
	if b := found[BucketPresence]; opts.PresenceTTL == 0 && b != nil {
		opts.PresenceTTL = b.cfg.TTL
	}
	if b := found[BucketSessions]; opts.SessionTTL == 0 && b != nil {
		opts.SessionTTL = b.cfg.TTL
	}
	opts.Replicas = cmp.Or(opts.Replicas, def.Replicas)
	opts.PresenceTTL = cmp.Or(opts.PresenceTTL, def.PresenceTTL)
	opts.SessionTTL = cmp.Or(opts.SessionTTL, def.SessionTTL)
	opts.WriteWait = cmp.Or(opts.WriteWait, def.WriteWait)
	opts.RevokeAttempt = cmp.Or(opts.RevokeAttempt, def.RevokeAttempt)
	opts.ConfirmWait = cmp.Or(opts.ConfirmWait, def.ConfirmWait)

	s := &Store{opts: opts, js: js}
	buckets := []struct {
		kv  *jetstream.KeyValue
		cfg jetstream.KeyValueConfig
	}{
		{&s.tools, jetstream.KeyValueConfig{Bucket: BucketTools, Description: "toolgate tools", History: 5}},
		{&s.accounts, jetstream.KeyValueConfig{Bucket: BucketAccounts, Description: "toolgate accounts"}},
		{&s.keys, jetstream.KeyValueConfig{Bucket: BucketKeys, Description: "toolgate API keys, by sha256"}},
		{&s.conns, jetstream.KeyValueConfig{Bucket: BucketConnections, Description: "toolgate account-tool connections"}},
		{&s.links, jetstream.KeyValueConfig{Bucket: BucketLinks, Description: "toolgate SSE links, by sha256"}},
		// A presence key that stops being refreshed expires after the TTL; the limit
		// marker makes that expiry visible to watchers as a delete.
		{&s.presence, jetstream.KeyValueConfig{Bucket: BucketPresence, Description: "toolgate live workers",
			TTL: opts.PresenceTTL, LimitMarkerTTL: opts.PresenceTTL, Storage: jetstream.MemoryStorage}},
		{&s.sessions, jetstream.KeyValueConfig{Bucket: BucketSessions, Description: "toolgate MCP sessions",
			TTL: opts.SessionTTL, LimitMarkerTTL: time.Minute}},
		// The shared token buckets of rate limits. A record left alone for an hour
		// expires and its bucket starts full again, as it would be by then anyway at
		// any rate of at least burst an hour.
		{&s.rates, jetstream.KeyValueConfig{Bucket: BucketRates, Description: "toolgate rate limits, by key or link",
			TTL: time.Hour, Storage: jetstream.MemoryStorage}},
		// The counts of quotas, each with a TTL of its own: a window's count lives to
		// the window's end and a little more, the calls running at once as long as
		// an edge holds them. On disk: a month's count outlives a NATS restart. The
		// bucket's own TTL only bounds what a record's could be (a month and a day).
		{&s.quotas, jetstream.KeyValueConfig{Bucket: BucketQuotas, Description: "toolgate quota counts, by account, rule and window",
			TTL: 32 * 24 * time.Hour, LimitMarkerTTL: time.Minute}},
	}
	s.configs = map[string]jetstream.KeyValueConfig{}
	for _, b := range buckets {
		b.cfg.Replicas = opts.Replicas
		kv, err := openBucket(ctx, js, b.cfg, found[b.cfg.Bucket], opts.Update)
		if err != nil {
			return nil, err
		}
		*b.kv = kv
		s.configs[b.cfg.Bucket] = b.cfg
	}
	return s, nil
}

// remake makes bucket again, empty, as Open made it, if it is gone: a NATS server
// that restarts alone keeps no bucket in memory storage, and nothing else would
// make it again while this process runs. On a cluster it does nothing: a cluster
// keeps its buckets' definitions, and one recovering from a restart may say a bucket
// is missing before it has read them.
func (s *Store) remake(ctx context.Context, bucket string) error {
	if s.js.Conn().ConnectedClusterName() != "" {
		return nil
	}
	s.cfgMu.Lock()
	cfg, ok := s.configs[bucket]
	s.cfgMu.Unlock()
	if !ok {
		return fmt.Errorf("registry: bucket %s: not one of the registry's", bucket)
	}
	_, err := s.js.CreateKeyValue(ctx, cfg)
	if err != nil && !errors.Is(err, jetstream.ErrBucketExists) {
		return fmt.Errorf("registry: bucket %s: make it again: %w", bucket, err)
	}
	return nil
}

// OpenBucket opens a bucket of the deployment's beside the registry's own (the
// dashboard's sign-ins), the way Open opens those: made when missing (safe for many
// processes at once), with the registry's replicas when cfg names none; checked
// against cfg when it exists, and changed to cfg when update is set, else refused
// with a *MismatchError. Follow follows it as it does the registry's.
func (s *Store) OpenBucket(ctx context.Context, cfg jetstream.KeyValueConfig, update bool) (jetstream.KeyValue, error) {
	if cfg.Replicas == 0 {
		cfg.Replicas = s.opts.Replicas
	}
	found, err := findBucket(ctx, s.js, cfg.Bucket)
	if err != nil {
		return nil, err
	}
	kv, err := openBucket(ctx, s.js, cfg, found, update)
	if err != nil {
		return nil, err
	}
	s.cfgMu.Lock()
	s.configs[cfg.Bucket] = cfg
	s.cfgMu.Unlock()
	return kv, nil
}

// existingBucket is a bucket as it is: its handle and its configuration.
type existingBucket struct {
	kv  jetstream.KeyValue
	cfg jetstream.KeyValueConfig
}

// findBucket returns the bucket named bucket as it is, or nil when there is none.
func findBucket(ctx context.Context, js jetstream.JetStream, bucket string) (*existingBucket, error) {
	var found *existingBucket
	err := retry(ctx, bucket, func(ctx context.Context) error {
		kv, err := js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		st, err := kv.Status(ctx)
		if err != nil {
			return err
		}
		found = &existingBucket{kv: kv, cfg: st.Config()}
		return nil
	})
	return found, err
}

// openBucket creates the bucket cfg describes if it was not found, and otherwise
// checks the settings the registry depends on against those it has, updating them
// when update is set.
func openBucket(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig, found *existingBucket, update bool) (jetstream.KeyValue, error) {
	for {
		var kv jetstream.KeyValue
		if found == nil {
			err := retry(ctx, cfg.Bucket, func(ctx context.Context) (err error) {
				_, err = js.CreateKeyValue(ctx, cfg)
				return err
			})
			if err == nil {
				return madeBucket(ctx, js, cfg.Bucket)
			}
			if !errors.Is(err, jetstream.ErrBucketExists) {
				return nil, err
			}
			// Another process made it first: check what it made.
			if found, err = findBucket(ctx, js, cfg.Bucket); err != nil {
				return nil, err
			}
			continue
		}
		mismatch := settingsDiffer(found.cfg, cfg)
		if mismatch == nil {
			return found.kv, nil
		}
		if !update {
			return nil, mismatch
		}
		err := retry(ctx, cfg.Bucket, func(ctx context.Context) (err error) {
			kv, err = js.UpdateKeyValue(ctx, cfg)
			return err
		})
		return kv, err
	}
}

// madeBucket waits until a bucket just made can be opened, and opens it. When several
// processes make the same bucket at once (edges starting together, the demo workers),
// a cluster may answer one of them as soon as the bucket is assigned to its nodes,
// before its stream exists there: opened then, it is "not found", which a worker
// asking an edge for its state bucket takes as the bucket missing for good.
func madeBucket(ctx context.Context, js jetstream.JetStream, bucket string) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := retry(ctx, bucket, func(ctx context.Context) (err error) {
		kv, err = js.KeyValue(ctx, bucket)
		if errors.Is(err, jetstream.ErrBucketNotFound) {
			return fmt.Errorf("%w: %w", errUnsettled, err)
		}
		return err
	})
	return kv, err
}

// settingsDiffer compares the settings of a bucket the registry relies on.
func settingsDiffer(have, want jetstream.KeyValueConfig) *MismatchError {
	for _, d := range []struct {
		setting    string
		have, want any
	}{
		{"replicas", have.Replicas, want.Replicas},
		{"history", have.History, max(want.History, 1)},
		{"TTL", have.TTL, want.TTL},
		{"limit marker TTL", have.LimitMarkerTTL, want.LimitMarkerTTL},
		{"storage", have.Storage, want.Storage},
	} {
		if d.have != d.want {
			return &MismatchError{Bucket: want.Bucket, Setting: d.setting, Have: d.have, Want: d.want}
		}
	}
	return nil
}

// Options returns the options the store was opened with.
func (s *Store) Options() Options { return s.opts }

// JetStream exposes the JetStream context, for packages that keep their own streams
// (the MCP event log).
func (s *Store) JetStream() jetstream.JetStream { return s.js }
