package registry

import (
	"cmp"
	"context"
	"encoding/json"
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
	BucketSessions    = "tg-sessions"
	BucketRates       = "tg-rates"
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
}

// DefaultWriteWait is Options.WriteWait when unset: longer than a JetStream cluster
// takes to elect a stream's leader again once one is lost (a few seconds; at most 9
// seconds of election timeout after the leader's silence).
const DefaultWriteWait = 15 * time.Second

// DefaultOptions suit a single node.
func DefaultOptions() Options {
	return Options{Replicas: 1, PresenceTTL: wire.DefaultPresenceTTL, SessionTTL: 30 * time.Minute, WriteWait: DefaultWriteWait}
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
	for _, name := range []string{BucketTools, BucketAccounts, BucketKeys, BucketConnections, BucketLinks, BucketPresence, BucketSessions, BucketRates} {
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
	ctx, cancel := context.WithTimeout(ctx, s.opts.WriteWait)
	defer cancel()
	for again := false; ; again = true {
		attempt, cancelAttempt := context.WithTimeout(ctx, writeAttempt)
		err := op(attempt, again)
		cancelAttempt()
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

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

// Options returns the options the store was opened with.
func (s *Store) Options() Options { return s.opts }

// getJSON reads the record at key as the bucket's leader has it (see Store.latest).
func getJSON[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, key string) (*T, uint64, error) {
	b, rev, err := s.latest(ctx, kv, key)
	if err != nil {
		return nil, 0, err
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

// PutTool writes a tool's record, as its workers would: it refuses one the edges
// would ignore.
func (s *Store) PutTool(ctx context.Context, t Tool) error {
	if err := wire.CheckTool(&t); err != nil {
		return invalidf("%v", err)
	}
	if err := wire.CheckSchemas(&t); err != nil {
		return invalidf("%v", err)
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = now()
	}
	return s.lastingPut(ctx, s.tools, t.ID, t)
}

// Tool reads a tool's record.
func (s *Store) Tool(ctx context.Context, id string) (*Tool, error) {
	t, _, err := getJSON[Tool](ctx, s, s.tools, id)
	return t, err
}

// DeleteTool removes a tool's record.
func (s *Store) DeleteTool(ctx context.Context, id string) error {
	return s.lastingDelete(ctx, s.tools, id)
}

// CreateAccount writes a new account; ErrExists if the id is taken.
func (s *Store) CreateAccount(ctx context.Context, a Account) (*Account, error) {
	if err := wire.CheckToolID(a.ID); err != nil { // account ids are key tokens too
		return nil, invalidf("account %v", err)
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = now()
	}
	if err := s.lastingCreate(ctx, s.accounts, a.ID, a); err != nil {
		return nil, err
	}
	return &a, nil
}

// Account reads an account.
func (s *Store) Account(ctx context.Context, id string) (*Account, error) {
	a, _, err := getJSON[Account](ctx, s, s.accounts, id)
	return a, err
}

// UpdateAccount changes an account with compare-and-set.
func (s *Store) UpdateAccount(ctx context.Context, id string, change func(*Account) error) (*Account, error) {
	return lastingUpdate(ctx, s, s.accounts, id, change)
}

// DeleteAccount removes an account with its keys, connections and links.
func (s *Store) DeleteAccount(ctx context.Context, id string) error {
	if _, err := s.Account(ctx, id); err != nil {
		return err
	}
	conns, err := s.Connections(ctx, id)
	if err != nil {
		return err
	}
	for _, c := range conns {
		if err := s.Disconnect(ctx, c.Account, c.Tool, nil); err != nil {
			return err
		}
	}
	keys, err := s.Keys(ctx, id)
	if err != nil {
		return err
	}
	for hash := range keys {
		if err := s.lastingDelete(ctx, s.keys, hash); err != nil {
			return err
		}
	}
	return s.lastingDelete(ctx, s.accounts, id)
}

// Accounts lists every account.
func (s *Store) Accounts(ctx context.Context) ([]Account, error) {
	var out []Account
	err := eachJSON(ctx, s, s.accounts, func(_ string, a Account) { out = append(out, a) })
	return out, err
}

func eachJSON[T any](ctx context.Context, s *Store, kv jetstream.KeyValue, fn func(key string, v T)) error {
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return fmt.Errorf("registry: list %s: %w", kv.Bucket(), err)
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

// NewKeyRequest describes a key to create.
type NewKeyRequest struct {
	Account   string
	Name      string
	Scopes    []string
	ExpiresAt *time.Time
}

// CreateKey makes a key for an account and returns its record and the key itself,
// which is not stored and cannot be shown again.
func (s *Store) CreateKey(ctx context.Context, req NewKeyRequest) (*Key, string, error) {
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) error {
		_, err := s.Account(ctx, req.Account)
		return err
	}); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, "", invalidf("account %q does not exist", req.Account)
		}
		return nil, "", err
	}
	for _, sc := range req.Scopes {
		if err := wire.CheckToolID(sc); err != nil {
			return nil, "", invalidf("scope: %v", err)
		}
	}
	if req.ExpiresAt != nil && !req.ExpiresAt.After(time.Now()) {
		return nil, "", invalidf("expires_at: must be in the future")
	}
	secret := NewKey()
	k := Key{
		ID:        NewID("key_"),
		Account:   req.Account,
		Name:      req.Name,
		Prefix:    secret[:KeyPrefixLen],
		Scopes:    req.Scopes,
		CreatedAt: now(),
		ExpiresAt: req.ExpiresAt,
	}
	if err := s.lastingCreate(ctx, s.keys, Hash(secret), k); err != nil {
		return nil, "", err
	}
	return &k, secret, nil
}

// ImportKey files a record under an existing key's hash: how `toolgate dev` keeps the
// same key across restarts when its data directory is reused.
func (s *Store) ImportKey(ctx context.Context, secret string, k Key) error {
	if k.Prefix == "" {
		k.Prefix = secret[:min(len(secret), KeyPrefixLen)]
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = now()
	}
	err := s.lastingCreate(ctx, s.keys, Hash(secret), k)
	if errors.Is(err, ErrExists) {
		return nil
	}
	return err
}

// Keys returns an account's keys by hash (every account's when account is "").
func (s *Store) Keys(ctx context.Context, account string) (map[string]Key, error) {
	out := map[string]Key{}
	err := eachJSON(ctx, s, s.keys, func(hash string, k Key) {
		if account == "" || k.Account == account {
			out[hash] = k
		}
	})
	return out, err
}

// RevokeKey marks the key filed under hash revoked. Revoking twice is not an error.
// The caller found the key (in a view, or a listing) a moment ago: a key the bucket
// says is not there is read again for up to staleReadWait, since a node of the
// cluster that is catching up (one back from a restart or a partition) may answer a
// read with what it held before the key was made.
func (s *Store) RevokeKey(ctx context.Context, hash string) (*Key, error) {
	var k *Key
	began := time.Now()
	err := s.lasting(ctx, func(ctx context.Context, _ bool) (err error) {
		k, err = updateJSON(ctx, s, s.keys, hash, func(k *Key) error {
			if k.RevokedAt == nil {
				t := now()
				k.RevokedAt = &t
			}
			return nil
		})
		if errors.Is(err, ErrNotFound) && time.Since(began) < staleReadWait {
			return fmt.Errorf("%w: %w", errUnsettled, err)
		}
		return err
	})
	return k, err
}

// staleReadWait is how long a record that must exist is read again when a read says
// it does not (see RevokeKey).
const staleReadWait = 2 * time.Second

// errUnsettled marks an answer the bucket may not stand by a moment later: a read that
// may have come from a node behind the others, or a write refused while an earlier
// attempt of it waits for the stream's quorum. lasting tries again.
var errUnsettled = errors.New("the bucket has not settled on the record yet")

func connKey(account, tool string) string { return account + "." + tool }

// Connect makes tool available to account and gives the connection its SSE link. It
// returns ErrExists if they are connected already.
func (s *Store) Connect(ctx context.Context, account, tool string, signer *LinkSigner) (*Connection, error) {
	if err := s.lasting(ctx, func(ctx context.Context, _ bool) error {
		_, err := s.Account(ctx, account)
		return err
	}); err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, invalidf("account %q does not exist", account)
		}
		return nil, err
	}
	if err := wire.CheckToolID(tool); err != nil {
		return nil, invalidf("%v", err)
	}
	t := now()
	c := Connection{Account: account, Tool: tool, ConnectedAt: t, LinkNonce: NewID(""), LinkCreatedAt: t}
	if err := s.lastingCreate(ctx, s.conns, connKey(account, tool), c); err != nil {
		return nil, err
	}
	link := Link{Account: account, Tool: tool, CreatedAt: t}
	if err := s.lastingPut(ctx, s.links, Hash(signer.Token(account, tool, c.LinkNonce)), link); err != nil {
		return nil, err
	}
	return &c, nil
}

// Connection reads one connection.
func (s *Store) Connection(ctx context.Context, account, tool string) (*Connection, error) {
	c, _, err := getJSON[Connection](ctx, s, s.conns, connKey(account, tool))
	return c, err
}

// Connections lists an account's connections.
func (s *Store) Connections(ctx context.Context, account string) ([]Connection, error) {
	var out []Connection
	err := eachJSON(ctx, s, s.conns, func(_ string, c Connection) {
		if c.Account == account {
			out = append(out, c)
		}
	})
	return out, err
}

// Disconnect removes a connection and its link. With a nil signer the link record is
// found by scanning, as when an account is deleted.
func (s *Store) Disconnect(ctx context.Context, account, tool string, signer *LinkSigner) error {
	c, err := s.Connection(ctx, account, tool)
	if err != nil {
		return err
	}
	if err := s.deleteLinks(ctx, c, signer); err != nil {
		return err
	}
	return s.lastingDelete(ctx, s.conns, connKey(account, tool))
}

func (s *Store) deleteLinks(ctx context.Context, c *Connection, signer *LinkSigner) error {
	if signer != nil {
		return s.lastingDelete(ctx, s.links, Hash(signer.Token(c.Account, c.Tool, c.LinkNonce)))
	}
	var hashes []string
	if err := eachJSON(ctx, s, s.links, func(hash string, l Link) {
		if l.Account == c.Account && l.Tool == c.Tool {
			hashes = append(hashes, hash)
		}
	}); err != nil {
		return err
	}
	for _, h := range hashes {
		if err := s.lastingDelete(ctx, s.links, h); err != nil {
			return err
		}
	}
	return nil
}

// RotateLink gives a connection a new SSE link; the old one stops working.
func (s *Store) RotateLink(ctx context.Context, account, tool string, signer *LinkSigner) (*Connection, error) {
	var old string
	c, err := updateJSON(ctx, s, s.conns, connKey(account, tool), func(c *Connection) error {
		old = c.LinkNonce
		c.LinkNonce = NewID("")
		c.LinkCreatedAt = now()
		return nil
	})
	if err != nil {
		return nil, err
	}
	link := Link{Account: account, Tool: tool, CreatedAt: c.LinkCreatedAt}
	if err := s.lastingPut(ctx, s.links, Hash(signer.Token(account, tool, c.LinkNonce)), link); err != nil {
		return nil, err
	}
	if err := s.lastingDelete(ctx, s.links, Hash(signer.Token(account, tool, old))); err != nil {
		return nil, err
	}
	return c, nil
}

func presenceKey(tool, instance string) string { return tool + "." + instance }

// PutPresence records (or refreshes) a live worker instance.
func (s *Store) PutPresence(ctx context.Context, p Presence) error {
	return putJSON(ctx, s.presence, presenceKey(p.Tool, p.Instance), p)
}

// DeletePresence removes a worker instance at once, as a clean shutdown does.
func (s *Store) DeletePresence(ctx context.Context, tool, instance string) error {
	return deleteKey(ctx, s.presence, presenceKey(tool, instance))
}

// A SessionWrite adjusts one write of a session.
type SessionWrite func(*sessionWrite)

type sessionWrite struct{ ttl time.Duration }

// IdleExpiry gives a session written without an open stream (Stream false) a life
// of its own, shorter than the bucket's TTL: it expires d after this write unless
// written again. A session written with Stream set, or without IdleExpiry, expires
// the bucket's TTL (Options.SessionTTL) after its last write.
func IdleExpiry(d time.Duration) SessionWrite { return func(w *sessionWrite) { w.ttl = d } }

func sessionWriteOf(opts []SessionWrite) sessionWrite {
	var w sessionWrite
	for _, o := range opts {
		o(&w)
	}
	return w
}

// CreateSession writes a new MCP session and returns the bucket's revision of the
// write; ErrExists if its id is taken.
func (s *Store) CreateSession(ctx context.Context, sess Session, opts ...SessionWrite) (uint64, error) {
	b, err := json.Marshal(sess)
	if err != nil {
		return 0, fmt.Errorf("registry: encode %s/%s: %w", BucketSessions, sess.ID, err)
	}
	var create []jetstream.KVCreateOpt
	if w := sessionWriteOf(opts); w.ttl > 0 && !sess.Stream {
		create = append(create, jetstream.KeyTTL(w.ttl))
	}
	// A session is opened while its client waits: like an administrator's change, it
	// waits out a stream's election of a new leader (Options.WriteWait) instead of
	// failing, and an attempt that may have been written is recognised as its own.
	var rev uint64
	err = s.lasting(ctx, func(ctx context.Context, again bool) (err error) {
		rev, err = s.sessions.Create(ctx, sess.ID, b, create...)
		if !errors.Is(err, jetstream.ErrKeyExists) || !again {
			return err
		}
		have, haveRev, gerr := s.latest(ctx, s.sessions, sess.ID)
		switch {
		case gerr == nil && string(have) == string(b):
			rev = haveRev
			return nil
		case gerr == nil:
			return err
		case errors.Is(gerr, ErrNotFound):
			return fmt.Errorf("registry: create %s/%s: %w", BucketSessions, sess.ID, errUnsettled)
		default:
			return gerr
		}
	})
	if errors.Is(err, jetstream.ErrKeyExists) {
		return 0, ErrExists
	}
	if err != nil {
		return 0, fmt.Errorf("registry: create %s/%s: %w", BucketSessions, sess.ID, err)
	}
	return rev, nil
}

// UpdateSession changes an MCP session with change, compare-and-set, which also
// refreshes its TTL, and returns it as written. A session deleted or expired
// meanwhile stays so: ErrNotFound.
func (s *Store) UpdateSession(ctx context.Context, id string, change func(*Session) error, opts ...SessionWrite) (*Session, error) {
	w := sessionWriteOf(opts)
	if w.ttl == 0 {
		return updateJSON(ctx, s, s.sessions, id, change)
	}
	// The bucket's Update cannot give a revision a TTL of its own; a publish to the
	// key's subject, compare-and-set on its last revision, can.
	return updateJSONWith(ctx, s, s.sessions, id, change, func(b []byte, rev uint64, sess *Session) error {
		msg := nats.NewMsg("$KV." + BucketSessions + "." + id)
		msg.Data = b
		publish := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev)}
		if !sess.Stream {
			publish = append(publish, jetstream.WithMsgTTL(w.ttl))
		}
		_, err := s.js.PublishMsg(ctx, msg, publish...)
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return fmt.Errorf("%w: %w", jetstream.ErrKeyExists, err)
		}
		return err
	})
}

// Session reads an MCP session; ErrNotFound once it has expired or been deleted.
func (s *Store) Session(ctx context.Context, id string) (*Session, error) {
	sess, _, err := getJSON[Session](ctx, s, s.sessions, id)
	return sess, err
}

// DeleteSession ends an MCP session.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return deleteKey(ctx, s.sessions, id)
}

// JetStream exposes the JetStream context, for packages that keep their own streams
// (the MCP event log).
func (s *Store) JetStream() jetstream.JetStream { return s.js }
