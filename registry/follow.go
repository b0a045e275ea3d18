package registry

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// An Update is what a follower of a bucket (Store.Follow) forwards: an entry of the
// bucket, or, without one, a Mark of where a load of its contents begins or ends.
type Update struct {
	Bucket string
	Entry  jetstream.KeyValueEntry // nil with a Mark
	Mark   Mark
}

// Mark is where a load of a followed bucket's contents begins or ends.
type Mark int

const (
	// MarkLoaded ends the bucket's contents as they were when following began; what
	// comes after it are changes.
	MarkLoaded Mark = iota + 1
	// MarkReload begins a load of the bucket again from scratch: it no longer holds
	// what was forwarded before (NATS restarted, or every key changed while the
	// follower could not follow). A key the load does not bring is gone.
	MarkReload
	// MarkReloaded ends that load.
	MarkReloaded
)

// followHeartbeat is how often the server must show a follower's consumer is alive.
// A consumer that lived on a node that died is noticed after about two missed
// heartbeats and recreated from the last revision seen, so a follower lags by a few
// seconds at most while a node fails, instead of the many seconds of a KV watch.
const followHeartbeat = time.Second

// followAttempt bounds one attempt to (re)start a bucket's consumer.
const followAttempt = time.Second

// Follow feeds the changes of bucket, one of the store's (Open's or OpenBucket's),
// into updates until ctx ends: the latest value of every key, then MarkLoaded, then
// every change. It is how everything that keeps a copy of a bucket follows it.
//
// Two things restart the bucket's consumer, each time from the revision after the
// last one forwarded: missed heartbeats (the node holding the consumer died, or the
// stream lost its leader), and the connection coming back after a loss (a pull that
// was pending on the old server is not always resumed). Follow makes the consumer
// again itself, an attempt of followAttempt every quarter second, rather than leave
// it to the client, whose attempts wait 10 seconds each for a leader that is gone and
// back off for seconds between them: the copy would lag for as long. After a loss, the bucket may not hold what was
// forwarded any more (see lost): it is then loaded again from scratch, between
// MarkReload and MarkReloaded, and a key that load does not bring is gone.
func (s *Store) Follow(ctx context.Context, bucket string, updates chan<- Update, log *slog.Logger) {
	s.follow(ctx, bucket, updates, log, func(bool) {})
}

// follow is Follow telling current whether what it forwarded is the bucket as it is:
// false from the moment its consumer is lost (missed heartbeats, the connection lost
// or back) or cannot be made, true again once a new consumer has delivered all there
// was when it was made.
func (s *Store) follow(ctx context.Context, bucket string, updates chan<- Update, log *slog.Logger, current func(bool)) {
	if log == nil {
		log = slog.Default()
	}
	nc := s.js.Conn()
	reconnected := nc.StatusChanged(nats.CONNECTED)
	defer nc.RemoveStatusListener(reconnected)
	disconnected := nc.StatusChanged(nats.RECONNECTING, nats.DISCONNECTED)
	defer nc.RemoveStatusListener(disconnected)
	f := &follower{store: s, log: log, name: bucket, updates: updates, ctx: ctx, stalled: make(chan struct{}, 1), current: current}
	for ctx.Err() == nil {
		// Each attempt is short: a cluster that just restarted answers nothing for a
		// while, and the first attempt after it does should not be seconds away.
		actx, cancel := context.WithTimeout(ctx, followAttempt)
		cc, err := f.start(actx)
		cancel()
		if err != nil {
			current(false)
			log.Warn("registry: following a bucket failed; retrying", "bucket", f.name, "err", err)
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
		current(false) // under the lock: a stopped consumer's last message cannot undo it
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

// follower is one bucket's consumer across its restarts.
type follower struct {
	store   *Store
	log     *slog.Logger
	name    string
	updates chan<- Update
	ctx     context.Context
	stalled chan struct{} // the consumer missed its heartbeats
	current func(bool)    // told whether what was forwarded is the bucket as it is

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
			f.log.Warn("registry: the bucket no longer holds what was seen of it (NATS restarted?); loading it again", "bucket", f.name)
			f.mu.Lock()
			f.last, f.lastTime, f.reloading = 0, time.Time{}, true
			f.mu.Unlock()
			f.sendMark(MarkReload)
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
	cons, err := f.store.js.OrderedConsumer(ctx, "KV_"+f.name, cfg)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Gone with a NATS restart: a single node keeps no bucket in memory.
		if rerr := f.store.remake(ctx, f.name); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		return nil, err
	}
	if err != nil {
		return nil, err
	}
	if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
		f.caughtUp(gen)
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
		f.send(Update{Bucket: f.name, Entry: &entry{bucket: f.name, key: strings.TrimPrefix(m.Subject(), prefix), value: m.Data(),
			revision: md.Sequence.Stream, created: md.Timestamp, op: entryOp(m.Headers())}})
		if md.NumPending == 0 {
			f.caughtUp(gen)
		}
	}, jetstream.PullHeartbeat(followHeartbeat), jetstream.PullExpiry(10*followHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if f.ctx.Err() != nil {
				return // told to stop: what a consumer being stopped says is of no use, and its log may be gone
			}
			f.log.Debug("registry: following a bucket", "bucket", f.name, "err", err)
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				select {
				case f.stalled <- struct{}{}:
				default:
				}
			}
		}))
}

// lost reports whether the bucket's stream may no longer hold what was forwarded,
// so that going on from the last revision seen would miss what changed: the stream
// was made again (a NATS restart empties a bucket kept in memory), its revisions went
// backwards, or it holds nothing as old as the last revision seen (it was emptied
// and filled again, or every key changed meanwhile: loading it again is exact either
// way).
func (f *follower) lost(ctx context.Context) (bool, error) {
	st, err := f.store.js.Stream(ctx, "KV_"+f.name)
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

// caughtUp tells the follower's caller that consumer gen delivered what there was,
// and forwards the end of a load, once per load: MarkLoaded for the first,
// MarkReloaded for one after lost.
func (f *follower) caughtUp(gen int) {
	f.mu.Lock()
	if gen != f.generation {
		f.mu.Unlock()
		return
	}
	f.current(true)
	var m Mark
	switch {
	case !f.loaded:
		f.loaded, m = true, MarkLoaded
	case f.reloading:
		f.reloading, m = false, MarkReloaded
	}
	f.mu.Unlock()
	if m != 0 {
		f.sendMark(m)
	}
}

func (f *follower) sendMark(m Mark) { f.send(Update{Bucket: f.name, Mark: m}) }

func (f *follower) send(u Update) {
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
