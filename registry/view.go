package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// View is an in-memory copy of the registry that follows every bucket's changes.
// Readers take a Snapshot, which never changes under them; each batch of changes
// publishes a new one.
type View struct {
	store *Store
	log   *slog.Logger
	snap  atomic.Pointer[Snapshot]

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every publish
	listeners map[int]func(Change)
	nextID    int

	heard     chan Revocation // announced on the bus (listen)
	learned   chan learned    // read from a leader while a follower is behind (learn)
	current   currency        // whether each bucket's follower is current
	confirmed confirmations   // the leaders' recent answers (Confirm)
	since     atomic.Int64    // when the view last began hearing every announcement (Hearing), in Unix ns
}

// Change names one record that changed, or a revocation heard of something the view
// keeps no record of (an OAuth grant's): then Revoked is its kind, Key its id, and
// Bucket empty.
type Change struct {
	Bucket  string
	Key     string
	Deleted bool
	Revoked string
}

// Snapshot is the registry at one moment. It is immutable: share it freely.
type Snapshot struct {
	tools    map[string]*ToolEntry
	accounts map[string]*Account
	keys     map[string]*Key   // by hash
	keyIDs   map[string]string // key id -> hash
	conns    map[string]map[string]*Connection
	links    map[string]*Link                // by hash
	presence map[string]map[string]*Presence // tool -> instance

	revs    [nViewBuckets]uint64 // the last revision applied of each bucket
	revoked map[revokedID]heard  // revocations heard that the buckets may not show yet
}

// ToolEntry is a tool's record with its methods ready to validate calls.
type ToolEntry struct {
	Tool    *Tool
	methods map[string]*MethodEntry
	derived sync.Map // what Derived computed, by key
}

// Derived returns what derive computes from the tool's record, computed once per
// entry (an entry lives as long as the record it holds is the tool's) and kept under
// key: for what a request would otherwise work out of the record on every call.
func (t *ToolEntry) Derived(key any, derive func(*Tool) any) any {
	if v, ok := t.derived.Load(key); ok {
		return v
	}
	v, _ := t.derived.LoadOrStore(key, derive(t.Tool))
	return v
}

// MethodEntry is one method, with its input schema compiled on first use.
type MethodEntry struct {
	Tool   *Tool
	Method *Method
	schema *inputSchema
}

// Method returns the entry for name, or nil.
func (t *ToolEntry) Method(name string) *MethodEntry { return t.methods[name] }

// Validate checks params against the method's input schema and returns a
// *ValidationError listing every violation. A method without a schema takes any object.
func (m *MethodEntry) Validate(params []byte) error {
	if m.schema == nil {
		return nil
	}
	input, err := m.schema.compiled(m.Tool.ID, m.Method.Name)
	if err != nil {
		// The worker SDK refuses schemas that do not compile; one written around it is
		// the tool's fault, and its calls are refused.
		return &ValidationError{Violations: []Violation{{Message: "the method's input schema does not compile: " + err.Error()}}}
	}
	if input.AnyObject && IsObject(params) {
		return nil
	}
	if vs := input.Violations(params); vs != nil {
		return &ValidationError{Violations: vs}
	}
	return nil
}

func newToolEntry(t *Tool, prev *ToolEntry, log *slog.Logger) *ToolEntry {
	e := &ToolEntry{Tool: t, methods: make(map[string]*MethodEntry, len(t.Methods))}
	for i := range t.Methods {
		m := &t.Methods[i]
		me := &MethodEntry{Tool: t, Method: m}
		if len(m.InputSchema) > 0 {
			var old *MethodEntry
			if prev != nil {
				old = prev.Method(m.Name)
			}
			if old != nil && old.schema != nil && bytes.Equal(old.schema.raw, m.InputSchema) {
				me.schema = old.schema // same schema: keep what was compiled
			} else {
				me.schema = &inputSchema{raw: m.InputSchema, log: log}
			}
		}
		e.methods[m.Name] = me
	}
	return e
}

// NewView starts following the registry and returns once every bucket's current
// contents are loaded. The view follows changes until ctx ends.
func NewView(ctx context.Context, store *Store, log *slog.Logger) (*View, error) {
	return newView(ctx, store, log, nil)
}

// newView is NewView, with the followers of the buckets skip names never started: for
// the tests of a view whose follower is behind (see NewViewNotFollowing).
func newView(ctx context.Context, store *Store, log *slog.Logger, skip []string) (*View, error) {
	if log == nil {
		log = slog.Default()
	}
	v := &View{store: store, log: log, changed: make(chan struct{}), listeners: map[int]func(Change){},
		heard: make(chan Revocation, 256), learned: make(chan learned, 64), confirmed: confirmations{answers: map[revokedID]confirmation{}, asking: make(chan struct{}, leaderLookups)}}
	v.snap.Store(&Snapshot{
		tools: map[string]*ToolEntry{}, accounts: map[string]*Account{}, keys: map[string]*Key{},
		keyIDs: map[string]string{}, conns: map[string]map[string]*Connection{},
		links: map[string]*Link{}, presence: map[string]map[string]*Presence{},
	})
	v.since.Store(time.Now().UnixNano())
	if err := v.listen(ctx, store.RevokedSubject()); err != nil {
		return nil, fmt.Errorf("registry: view: follow revocations: %w", err)
	}
	updates := make(chan Update, 256)
	followed := 0
	for b, name := range viewBuckets {
		if slices.Contains(skip, name) {
			continue
		}
		followed++
		v.current[b].Store(true)
		go store.follow(ctx, name, updates, log, v.setCurrent(b))
	}
	synced := make(chan struct{})
	go v.apply(ctx, followed, updates, synced)
	select {
	case <-synced:
		return v, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("registry: view: %w", ctx.Err())
	}
}

// apply is the one goroutine that changes the view: it applies each batch of updates
// to a working copy and publishes it as the next snapshot. pending is how many
// followers load their bucket's contents before the view is synced.
func (v *View) apply(ctx context.Context, pending int, updates <-chan Update, synced chan struct{}) {
	reloading := map[int]map[string]bool{} // bucket -> the keys its reload has brought so far
	work := *v.snap.Load()
	for {
		var batch []Update
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			batch = drainUpdates(append(batch, u), updates)
		case r := <-v.heard:
			v.hearRevocation(&work, r)
			continue
		case l := <-v.learned:
			v.applyLearned(&work, l)
			continue
		}
		dirty := map[int]bool{}
		reloaded := map[int]bool{}
		var changes []Change
		own := func(b int) { // the working copy's own maps for bucket b
			if !dirty[b] {
				dirty[b] = true
				work.cloneBucket(b)
			}
		}
		for _, u := range batch {
			b := viewBucket[u.Bucket]
			switch u.Mark {
			case MarkLoaded:
				pending--
				continue
			case MarkReload:
				reloading[b] = map[string]bool{}
				continue
			case MarkReloaded:
				own(b)
				for _, key := range work.keysOf(b) {
					if !reloading[b][key] {
						if c, ok := work.applyEntry(b, &entry{bucket: u.Bucket, key: key, op: jetstream.KeyValueDelete}, v.log); ok {
							changes = append(changes, c)
						}
					}
				}
				delete(reloading, b)
				reloaded[b] = true
				continue
			}
			if seen := reloading[b]; seen != nil {
				seen[u.Entry.Key()] = true
			}
			own(b)
			if c, ok := work.applyEntry(b, u.Entry, v.log); ok {
				changes = append(changes, c)
			}
			work.revs[b] = max(work.revs[b], u.Entry.Revision())
		}
		work.settle(reloaded, time.Now())
		next := work
		v.snap.Store(&next)
		if pending == 0 && synced != nil {
			select {
			case <-synced:
			default:
				close(synced)
			}
			synced = nil
		}
		v.publish(changes)
	}
}

// drainUpdates adds to batch the updates already waiting, up to 4096, so that a burst
// is applied as one new snapshot.
func drainUpdates(batch []Update, updates <-chan Update) []Update {
	for len(batch) < 4096 {
		select {
		case u := <-updates:
			batch = append(batch, u)
		default:
			return batch
		}
	}
	return batch
}

// hearRevocation applies a revocation announced on the bus to the working copy and
// publishes the snapshot at once, before the registry's own copy has the change.
func (v *View) hearRevocation(work *Snapshot, r Revocation) {
	logRevocation(v.log, r)
	c, ok := work.hear(r, time.Now())
	next := *work
	v.snap.Store(&next)
	if ok {
		v.publish([]Change{c})
	}
}

// The buckets the view follows, by their index in a Snapshot.
const (
	bTools = iota
	bAccounts
	bKeys
	bConns
	bLinks
	bPresence
)

const nViewBuckets = bPresence + 1

var viewBuckets = []string{bTools: BucketTools, bAccounts: BucketAccounts, bKeys: BucketKeys, bConns: BucketConnections, bLinks: BucketLinks, bPresence: BucketPresence}

var viewBucket = map[string]int{BucketTools: bTools, BucketAccounts: bAccounts, BucketKeys: bKeys, BucketConnections: bConns, BucketLinks: bLinks, BucketPresence: bPresence}

// cloneBucket gives the working copy its own outer map for a bucket, so the published
// snapshot that shares the old one is not disturbed. Inner maps are replaced, never
// changed in place, for the same reason.
func (s *Snapshot) cloneBucket(b int) {
	switch b {
	case bTools:
		s.tools = maps.Clone(s.tools)
	case bAccounts:
		s.accounts = maps.Clone(s.accounts)
	case bKeys:
		s.keys = maps.Clone(s.keys)
		s.keyIDs = maps.Clone(s.keyIDs)
	case bConns:
		s.conns = maps.Clone(s.conns)
	case bLinks:
		s.links = maps.Clone(s.links)
	case bPresence:
		s.presence = maps.Clone(s.presence)
	}
}

// keysOf lists the keys bucket b holds in s, as the bucket files them.
func (s *Snapshot) keysOf(b int) []string {
	var out []string
	switch b {
	case bTools:
		out = slices.Collect(maps.Keys(s.tools))
	case bAccounts:
		out = slices.Collect(maps.Keys(s.accounts))
	case bKeys:
		out = slices.Collect(maps.Keys(s.keys))
	case bConns:
		out = nestedKeys(s.conns)
	case bLinks:
		out = slices.Collect(maps.Keys(s.links))
	case bPresence:
		out = nestedKeys(s.presence)
	}
	return out
}

// nestedKeys lists the keys of a map filed as "<outer>.<inner>" (see setNested).
func nestedKeys[T any](m map[string]map[string]*T) []string {
	var out []string
	for outer, inner := range m {
		for k := range inner {
			out = append(out, outer+"."+k)
		}
	}
	return out
}

func decode[T any](e jetstream.KeyValueEntry, log *slog.Logger) (*T, bool) {
	var v T
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		log.Error("registry: skipping undecodable record", "bucket", e.Bucket(), "key", e.Key(), "err", err)
		return nil, false
	}
	return &v, true
}

func (s *Snapshot) applyEntry(b int, e jetstream.KeyValueEntry, log *slog.Logger) (Change, bool) {
	key := e.Key()
	deleted := e.Operation() != jetstream.KeyValuePut
	c := Change{Bucket: e.Bucket(), Key: key, Deleted: deleted}
	switch b {
	case bTools:
		if deleted {
			delete(s.tools, key)
			return c, true
		}
		t, err := readTool(key, e.Value())
		if err != nil {
			// Workers write their records themselves: one that breaks the contract is
			// ignored, and the tool is absent until they write a good one.
			log.Error("registry: ignoring a tool record that breaks the contract", "key", key, "revision", e.Revision(), "err", err)
			delete(s.tools, key)
			c.Deleted = true
			return c, true
		}
		s.tools[key] = newToolEntry(t, s.tools[key], log)
		return c, true
	case bAccounts:
		return c, setFlat(s.accounts, e, deleted, log)
	case bKeys:
		if old := s.keys[key]; old != nil {
			delete(s.keyIDs, old.ID)
		}
		ok := setFlat(s.keys, e, deleted, log)
		if k := s.keys[key]; k != nil {
			s.keyIDs[k.ID] = key
		}
		return c, ok
	case bConns:
		return c, setNested(s.conns, e, deleted, log)
	case bLinks:
		return c, setFlat(s.links, e, deleted, log)
	case bPresence:
		return c, setNested(s.presence, e, deleted, log)
	}
	return c, false
}

// readTool decodes the tool record filed under key and checks it as bus/wire says a
// record must be: under its own id, with valid method names, each once. Its input
// schemas are compiled when first needed; one that does not compile refuses the calls
// of its method.
func readTool(key string, value []byte) (*Tool, error) {
	var t Tool
	if err := json.Unmarshal(value, &t); err != nil {
		return nil, fmt.Errorf("undecodable: %w", err)
	}
	if t.ID != key {
		return nil, fmt.Errorf("the record names tool %q, under the key of tool %q", t.ID, key)
	}
	if err := wire.CheckTool(&t); err != nil {
		return nil, err
	}
	return &t, nil
}

// setFlat applies an entry to a map filed by the whole key.
func setFlat[T any](m map[string]*T, e jetstream.KeyValueEntry, deleted bool, log *slog.Logger) bool {
	if deleted {
		delete(m, e.Key())
		return true
	}
	v, ok := decode[T](e, log)
	if ok {
		m[e.Key()] = v
	}
	return ok
}

// setNested applies an entry filed as "<outer>.<inner>". The inner map is replaced,
// never changed in place, because published snapshots share it.
func setNested[T any](m map[string]map[string]*T, e jetstream.KeyValueEntry, deleted bool, log *slog.Logger) bool {
	outer, inner, ok := splitKey(e.Key())
	if !ok {
		return false
	}
	next := maps.Clone(m[outer])
	if next == nil {
		next = map[string]*T{}
	}
	if deleted {
		delete(next, inner)
	} else if v, ok := decode[T](e, log); ok {
		next[inner] = v
	} else {
		return false
	}
	if len(next) == 0 {
		delete(m, outer)
	} else {
		m[outer] = next
	}
	return true
}

func splitKey(key string) (string, string, bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == '.' {
			return key[:i], key[i+1:], true
		}
	}
	return "", "", false
}

func (v *View) publish(changes []Change) {
	v.mu.Lock()
	close(v.changed)
	v.changed = make(chan struct{})
	fns := slices.Collect(maps.Values(v.listeners))
	v.mu.Unlock()
	for _, c := range changes {
		for _, fn := range fns {
			fn(c)
		}
	}
}

// Snapshot returns the registry as of the last change applied.
func (v *View) Snapshot() *Snapshot { return v.snap.Load() }

// Store returns the store the view follows.
func (v *View) Store() *Store { return v.store }

// OnChange calls fn, on the view's goroutine, after each change is visible in
// Snapshot. fn must not block. The returned func stops the calls.
func (v *View) OnChange(fn func(Change)) (stop func()) {
	v.mu.Lock()
	defer v.mu.Unlock()
	id := v.nextID
	v.nextID++
	v.listeners[id] = fn
	return func() {
		v.mu.Lock()
		defer v.mu.Unlock()
		delete(v.listeners, id)
	}
}

// WaitFor blocks until cond holds for the current snapshot or ctx ends.
func (v *View) WaitFor(ctx context.Context, cond func(*Snapshot) bool) error {
	for {
		v.mu.Lock()
		ch := v.changed
		v.mu.Unlock()
		if cond(v.Snapshot()) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Instances counts the live workers of a tool.
func (s *Snapshot) Instances(tool string) int { return len(s.presence[tool]) }

// Presence lists the live workers of a tool.
func (s *Snapshot) Presence(tool string) []*Presence {
	return slices.Collect(maps.Values(s.presence[tool]))
}

// Account returns an account, or nil.
func (s *Snapshot) Account(id string) *Account { return s.accounts[id] }

// Accounts lists the accounts by id.
func (s *Snapshot) Accounts() []*Account {
	out := slices.Collect(maps.Values(s.accounts))
	slices.SortFunc(out, func(a, b *Account) int { return cmpString(a.ID, b.ID) })
	return out
}

// Connection returns account's connection to tool, or nil.
func (s *Snapshot) Connection(account, tool string) *Connection { return s.conns[account][tool] }

// Connections lists an account's connections by tool id.
func (s *Snapshot) Connections(account string) []*Connection {
	out := slices.Collect(maps.Values(s.conns[account]))
	slices.SortFunc(out, func(a, b *Connection) int { return cmpString(a.Tool, b.Tool) })
	return out
}

// KeyByID returns a key's record and the hash it is filed under.
func (s *Snapshot) KeyByID(id string) (string, *Key) {
	h, ok := s.keyIDs[id]
	if !ok {
		return "", nil
	}
	return h, s.keys[h]
}

// Keys lists an account's keys by creation time.
func (s *Snapshot) Keys(account string) []*Key {
	var out []*Key
	for _, k := range s.keys {
		if k.Account == account {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b *Key) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out
}

// RawTool returns a tool's entry whatever account asks: for workers and
// administration, never for callers.
func (s *Snapshot) RawTool(id string) *ToolEntry { return s.tools[id] }

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
