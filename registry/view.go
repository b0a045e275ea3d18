package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"

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
}

// Change names one record that changed.
type Change struct {
	Bucket  string
	Key     string
	Deleted bool
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
}

// ToolEntry is a tool's record with its methods ready to validate calls.
type ToolEntry struct {
	Tool    *Tool
	methods map[string]*MethodEntry
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
	s, err := m.schema.compiled(m.Tool.ID, m.Method.Name)
	if err != nil {
		// The worker SDK refuses schemas that do not compile; one written around it is
		// the tool's fault, and its calls are refused.
		return &ValidationError{Violations: []Violation{{Message: "the method's input schema does not compile: " + err.Error()}}}
	}
	if m.schema.anyObject && IsObject(params) {
		return nil
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return &ValidationError{Violations: []Violation{{Message: "not JSON: " + err.Error()}}}
	}
	if err := s.Validate(inst); err != nil {
		return &ValidationError{Violations: violations(err)}
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
	if log == nil {
		log = slog.Default()
	}
	v := &View{store: store, log: log, changed: make(chan struct{}), listeners: map[int]func(Change){}}
	v.snap.Store(&Snapshot{
		tools: map[string]*ToolEntry{}, accounts: map[string]*Account{}, keys: map[string]*Key{},
		keyIDs: map[string]string{}, conns: map[string]map[string]*Connection{},
		links: map[string]*Link{}, presence: map[string]map[string]*Presence{},
	})
	buckets := []jetstream.KeyValue{store.tools, store.accounts, store.keys, store.conns, store.links, store.presence}
	updates := make(chan update, 256)
	for i, kv := range buckets {
		go v.follow(ctx, i, kv, updates)
	}
	synced := make(chan struct{})
	go v.apply(ctx, len(buckets), updates, synced)
	select {
	case <-synced:
		return v, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("registry: view: %w", ctx.Err())
	}
}

// followHeartbeat is how often the server must show a watch's consumer is alive.
// A consumer that lived on a node that died is noticed after about two missed
// heartbeats and recreated from the last revision seen, so the view lags by a few
// seconds at most while a node fails, instead of the many seconds of a KV watch.
const followHeartbeat = time.Second

// followAttempt bounds one attempt to (re)start a bucket's consumer.
const followAttempt = time.Second

// follow feeds one bucket's changes into updates until ctx ends: the latest value
// of every key, then a markLoaded update, then every change.
//
// Two things restart the bucket's consumer, each time from the revision after the
// last one forwarded: missed heartbeats (the node holding the consumer died, or the
// stream lost its leader), and the connection coming back after a loss (a pull that
// was pending on the old server is not always resumed). The view makes the consumer
// again itself, an attempt of followAttempt every quarter second, rather than leave it
// to the client, whose attempts wait 10 seconds each for a leader that is gone and
// back off for seconds between them: the view would lag for as long. After a loss, the bucket may not hold what the view
// saw any more (see lost): it is then loaded again from scratch.
func (v *View) follow(ctx context.Context, bucket int, kv jetstream.KeyValue, updates chan<- update) {
	nc := v.store.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	disconnected := nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED)
	defer nc.RemoveStatusListener(disconnected)
	f := &follower{view: v, bucket: bucket, name: kv.Bucket(), updates: updates, ctx: ctx, stalled: make(chan struct{}, 1)}
	for ctx.Err() == nil {
		// Each attempt is short: a cluster that just restarted answers nothing for a
		// while, and the first attempt after it does should not be seconds away.
		actx, cancel := context.WithTimeout(ctx, followAttempt)
		cc, err := f.start(actx)
		cancel()
		if err != nil {
			v.log.Warn("registry: watch failed; retrying", "bucket", f.name, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(250 * time.Millisecond):
			}
			continue
		}
		select {
		case <-ctx.Done():
		case <-reconnected:
		case <-disconnected:
		case <-f.stalled:
		}
		// What the consumer delivers from now on may come from a server that
		// restarted with the bucket emptied: it is dropped, and the consumer made once
		// the connection is back decides where to go on from. A restart disconnects
		// and reconnects more than once: go by the connection as it is, not by the
		// changes queued.
		f.mu.Lock()
		f.generation++
		f.mu.Unlock()
		for ctx.Err() == nil {
			drain(reconnected)
			drain(disconnected)
			select {
			case <-f.stalled:
			default:
			}
			if nc.Status() == nats.CONNECTED {
				break
			}
			select {
			case <-ctx.Done():
			case <-reconnected:
			}
		}
		cc.Stop()
	}
}

// drain empties a channel of status changes.
func drain(ch <-chan nats.Status) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// follower is one bucket's watch across consumer restarts.
type follower struct {
	view    *View
	bucket  int
	name    string
	updates chan<- update
	ctx     context.Context
	stalled chan struct{} // the consumer missed its heartbeats

	mu         sync.Mutex
	generation int       // bumped per consumer, so a stopped one's late messages are dropped
	last       uint64    // last revision forwarded
	lastTime   time.Time // when the server stored it
	loaded     bool      // the initial values have been forwarded
	reloading  bool      // the bucket is being loaded again (see lost)
}

func (f *follower) start(ctx context.Context) (jetstream.ConsumeContext, error) {
	f.mu.Lock()
	resuming := f.last > 0
	f.mu.Unlock()
	if resuming {
		lost, err := f.lost(ctx)
		if err != nil {
			return nil, err
		}
		if lost {
			f.view.log.Warn("registry: the bucket no longer holds what this view saw (NATS restarted?); loading it again", "bucket", f.name)
			f.mu.Lock()
			f.last, f.lastTime, f.reloading = 0, time.Time{}, true
			f.mu.Unlock()
			f.sendMark(markReload)
		}
	}
	prefix := "$KV." + f.name + "."
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{prefix + ">"}, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy}
	f.mu.Lock()
	f.generation++
	gen := f.generation
	if f.last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, f.last+1
	}
	f.mu.Unlock()
	cons, err := f.view.store.js.OrderedConsumer(ctx, "KV_"+f.name, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Gone with a NATS restart: a single node keeps no bucket in memory.
		if rerr := f.view.store.remake(ctx, f.name); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		f.caughtUp()
	}
	return cons.Consume(func(m jetstream.Msg) {
		md, err := m.Metadata()
		if err != nil {
			return
		}
		f.mu.Lock()
		if gen != f.generation || md.Sequence.Stream <= f.last {
			f.mu.Unlock()
			return
		}
		f.last, f.lastTime = md.Sequence.Stream, md.Timestamp
		f.mu.Unlock()
		f.send(update{bucket: f.bucket, entry: &entry{bucket: f.name, key: strings.TrimPrefix(m.Subject(), prefix), value: m.Data(),
			revision: md.Sequence.Stream, created: md.Timestamp, op: entryOp(m.Headers())}})
		if md.NumPending == 0 {
			f.caughtUp()
		}
	}, jetstream.PullHeartbeat(followHeartbeat), jetstream.PullExpiry(10*followHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			f.view.log.Debug("registry: watch", "bucket", f.name, "err", err)
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				select {
				case f.stalled <- struct{}{}:
				default:
				}
			}
		}))
}

// lost reports whether the bucket's stream may no longer hold what the view has seen,
// so that going on from the last revision seen would miss what changed: the stream
// was made again (a NATS restart empties a bucket kept in memory), its revisions went
// backwards, or it holds nothing as old as the last revision seen (it was emptied
// and filled again, or every key changed meanwhile: loading it again is exact either
// way).
func (f *follower) lost(ctx context.Context) (bool, error) {
	st, err := f.view.store.js.Stream(ctx, "KV_"+f.name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return true, nil // start makes it again
	}
	if err != nil {
		return false, err
	}
	state := st.CachedInfo().State
	f.mu.Lock()
	defer f.mu.Unlock()
	return state.LastSeq < f.last || state.Msgs == 0 || state.FirstTime.After(f.lastTime), nil
}

// caughtUp forwards the end of a load, once per load: markLoaded for the first,
// markReloaded for one after lost.
func (f *follower) caughtUp() {
	f.mu.Lock()
	var m mark
	switch {
	case !f.loaded:
		f.loaded, m = true, markLoaded
	case f.reloading:
		f.reloading, m = false, markReloaded
	}
	f.mu.Unlock()
	if m != 0 {
		f.sendMark(m)
	}
}

func (f *follower) sendMark(m mark) { f.send(update{bucket: f.bucket, name: f.name, mark: m}) }

func (f *follower) send(u update) {
	select {
	case f.updates <- u:
	case <-f.ctx.Done():
	}
}

// entryOp reads a KV message's operation from its headers, as the KV API does: a
// delete or purge, or a marker the server left when the bucket's TTL removed a key.
func entryOp(h nats.Header) jetstream.KeyValueOp {
	switch h.Get("KV-Operation") {
	case "DEL":
		return jetstream.KeyValueDelete
	case "PURGE":
		return jetstream.KeyValuePurge
	}
	switch h.Get(jetstream.MarkerReasonHeader) {
	case "MaxAge", "Purge":
		return jetstream.KeyValuePurge
	case "Remove":
		return jetstream.KeyValueDelete
	}
	return jetstream.KeyValuePut
}

// entry is a KV entry read from the bucket's stream.
type entry struct {
	bucket, key string
	value       []byte
	revision    uint64
	created     time.Time
	op          jetstream.KeyValueOp
}

func (e *entry) Bucket() string                  { return e.bucket }
func (e *entry) Key() string                     { return e.key }
func (e *entry) Value() []byte                   { return e.value }
func (e *entry) Revision() uint64                { return e.revision }
func (e *entry) Created() time.Time              { return e.created }
func (e *entry) Delta() uint64                   { return 0 }
func (e *entry) Operation() jetstream.KeyValueOp { return e.op }

// An update is an entry of a bucket, or, without one, a mark of where a load of the
// bucket's contents begins or ends.
type update struct {
	bucket int
	entry  jetstream.KeyValueEntry
	name   string // the bucket's, with a mark
	mark   mark
}

type mark int

const (
	markLoaded   mark = iota + 1 // the end of the bucket's initial values
	markReload                   // the bucket is loaded again from scratch: what it no longer holds goes
	markReloaded                 // the end of that load
)

// apply is the one goroutine that changes the view: it applies each batch of updates
// to a working copy and publishes it as the next snapshot.
func (v *View) apply(ctx context.Context, buckets int, updates <-chan update, synced chan struct{}) {
	pending := buckets
	reloading := map[int]map[string]bool{} // bucket -> the keys its reload has brought so far
	work := *v.snap.Load()
	for {
		var batch []update
		select {
		case <-ctx.Done():
			return
		case u := <-updates:
			batch = append(batch, u)
		}
	drain:
		for len(batch) < 4096 {
			select {
			case u := <-updates:
				batch = append(batch, u)
			default:
				break drain
			}
		}
		dirty := map[int]bool{}
		var changes []Change
		own := func(b int) { // the working copy's own maps for bucket b
			if !dirty[b] {
				dirty[b] = true
				work.cloneBucket(b)
			}
		}
		for _, u := range batch {
			switch u.mark {
			case markLoaded:
				pending--
				continue
			case markReload:
				reloading[u.bucket] = map[string]bool{}
				continue
			case markReloaded:
				own(u.bucket)
				for _, key := range work.keysOf(u.bucket) {
					if !reloading[u.bucket][key] {
						if c, ok := work.applyEntry(u.bucket, &entry{bucket: u.name, key: key, op: jetstream.KeyValueDelete}, v.log); ok {
							changes = append(changes, c)
						}
					}
				}
				delete(reloading, u.bucket)
				continue
			}
			if seen := reloading[u.bucket]; seen != nil {
				seen[u.entry.Key()] = true
			}
			own(u.bucket)
			if c, ok := work.applyEntry(u.bucket, u.entry, v.log); ok {
				changes = append(changes, c)
			}
		}
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

// Bucket order in NewView.
const (
	bTools = iota
	bAccounts
	bKeys
	bConns
	bLinks
	bPresence
)

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

// Principal is who a call is made for: an account, reached through an API key or
// through the SSE link of one tool.
type Principal struct {
	Account string
	Key     *Key   // set when authenticated by API key
	Tool    string // set when authenticated by link: the only tool it reaches
}

// AuthenticateKey finds the usable key secret names. Every failure is
// ErrUnauthenticated, so the answer does not tell unknown from revoked or expired.
func (s *Snapshot) AuthenticateKey(secret string, now time.Time) (Principal, error) {
	if secret == "" {
		return Principal{}, ErrUnauthenticated
	}
	k := s.keys[Hash(secret)]
	if k == nil || !k.Usable(now) || s.accounts[k.Account] == nil {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{Account: k.Account, Key: k}, nil
}

// AuthenticateLink finds the live link token names.
func (s *Snapshot) AuthenticateLink(token string) (Principal, error) {
	if token == "" {
		return Principal{}, ErrUnauthenticated
	}
	l := s.links[Hash(token)]
	if l == nil || s.accounts[l.Account] == nil || s.conns[l.Account][l.Tool] == nil {
		return Principal{}, ErrUnauthenticated
	}
	return Principal{Account: l.Account, Tool: l.Tool}, nil
}

// Tool returns the tool id as p may see it: ErrToolNotFound when it does not exist or
// is not connected to p's account, ErrForbidden when p's key is scoped away from it.
func (s *Snapshot) Tool(p Principal, id string) (*ToolEntry, error) {
	t := s.tools[id]
	if t == nil || s.conns[p.Account][id] == nil || (p.Tool != "" && p.Tool != id) {
		return nil, ErrToolNotFound
	}
	if p.Key != nil && !p.Key.Allows(id) {
		return nil, ErrForbidden
	}
	return t, nil
}

// Method returns a method of a tool as p may see it.
func (s *Snapshot) Method(p Principal, tool, method string) (*MethodEntry, error) {
	t, err := s.Tool(p, tool)
	if err != nil {
		return nil, err
	}
	m := t.Method(method)
	if m == nil {
		return nil, ErrMethodNotFound
	}
	return m, nil
}

// Tools lists, by id, the tools p may call: connected to its account, deployed, and
// within its key's scopes.
func (s *Snapshot) Tools(p Principal) []*ToolEntry {
	conns := s.conns[p.Account]
	out := make([]*ToolEntry, 0, len(conns))
	for id := range conns {
		if t, err := s.Tool(p, id); err == nil {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b *ToolEntry) int { return cmpString(a.Tool.ID, b.Tool.ID) })
	return out
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
