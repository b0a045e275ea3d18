package registry

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// Record is one event of a stream, as the log keeps it.
type Record struct {
	Seq    uint64
	Header nats.Header
	Data   []byte
	// Large names the payload of a record past one message, for a follower that
	// leaves such records to be streamed (Follower.LeaveLarge); Data is then nil.
	Large *wire.Payload
}

// liveBuffer is how many republished records a follower holds before its stream
// writes them; past it the subscription drops records, which the follower then
// reads from the store.
const liveBuffer = 64

// A Follower delivers the records of one subject of the log in order, each once,
// from a sequence on: live, as the log republishes them, and from the store for what
// came before it followed and for what the live feed lost (a stream that fell
// behind, a reconnect to NATS, a republish lost to a change of stream leader).
type Follower struct {
	log     *EventLog
	subject string
	live    chan *nats.Msg
	Next    uint64 // the sequence of the first record not yet delivered
	// LeaveLarge delivers a record past one message as the payload it names
	// (Record.Large), for a reader that writes it to its client as it is read
	// (EventLog.WriteLarge), rather than its bytes whole.
	LeaveLarge bool
	unfollow   func()     // ends the following
	lost       func() int // how many records the live feed dropped so far

	reconnects uint64 // the connection's, when last checked
	lostSeen   int    // lost(), when last checked
}

// Follow subscribes to what the log stores on subject from now on; set Next, then
// take what arrives on Live. The subscription comes first so that a record stored
// while the stream reads the store is delivered live if not read.
func (l *EventLog) Follow(subject string) (*Follower, error) {
	f := &Follower{log: l, subject: subject, live: make(chan *nats.Msg, liveBuffer), Next: 1, reconnects: l.nc.Stats().Reconnects}
	sub, err := l.nc.ChanSubscribe(l.subj.Logged(subject), f.live)
	if err != nil {
		return nil, fmt.Errorf("registry: event log: follow %s: %w", subject, err)
	}
	f.unfollow = func() { _ = sub.Unsubscribe() }
	f.lost = func() int {
		d, _ := sub.Dropped()
		return d
	}
	return f, nil
}

// Stop ends the following.
func (f *Follower) Stop() { f.unfollow() }

// Stored delivers what the log holds from Next on, until deliver says it is done.
func (f *Follower) Stored(ctx context.Context, deliver func(Record) bool) (bool, error) {
	for {
		m, err := f.log.stream.GetMsg(ctx, f.Next, jetstream.WithGetMsgSubject(f.subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("registry: event log: read %s from %d: %w", f.subject, f.Next, err)
		}
		f.Next = m.Sequence + 1
		rec, err := f.record(ctx, m.Sequence, m.Header, m.Data)
		if err != nil {
			return false, err
		}
		if deliver(rec) {
			return true, nil
		}
	}
}

// Take delivers a record of the live feed: nothing if it was delivered already; the
// records before it from the store if the one it follows was not delivered.
func (f *Follower) Take(ctx context.Context, m *nats.Msg, deliver func(Record) bool) (bool, error) {
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil || seq < f.Next {
		return false, nil
	}
	// The sequence of the subject's record before this one; 0 for none.
	prev, _ := strconv.ParseUint(m.Header.Get(jetstream.LastSequenceHeader), 10, 64)
	if prev >= f.Next {
		return f.Stored(ctx, deliver)
	}
	rec, err := f.record(ctx, seq, m.Header, m.Data)
	if err != nil {
		return false, err
	}
	f.Next = seq + 1
	return deliver(rec), nil
}

// MayHaveLost reports whether the live feed may have lost records since the last
// check: the connection to NATS was re-established or the subscription dropped some.
func (f *Follower) MayHaveLost() bool {
	r, d := f.log.nc.Stats().Reconnects, f.lost()
	lost := r != f.reconnects || d != f.lostSeen
	f.reconnects, f.lostSeen = r, d
	return lost
}

// postFeeds follows the POST streams of the calls this edge runs for clients that
// may be asked something (sampling, elicitation, roots): what a call's tool sends
// its client goes on the stream's subject, which the edge must hear from before the
// call is sent. A subscription per call cost a subscribe and an unsubscribe on the
// bus for every call, so the calls of one session share one subscription to all its
// POST streams, kept while any of them is followed and for feedLinger after, and
// each record goes to the follower of its stream.
type postFeeds struct {
	log *EventLog

	mu    sync.Mutex
	feeds map[string]*postFeed // by the session's POST subjects' wildcard
}

// feedLinger is how long a session's subscription outlives its last followed call,
// so that a client calling one tool after another does not subscribe for each.
const feedLinger = 10 * time.Second

type postFeed struct {
	sub   *nats.Subscription
	posts map[string]func(*nats.Msg) // what takes a stream's records, by post id
	idle  *time.Timer                // ends the subscription once nothing is followed for feedLinger
}

// follow follows the POST stream post of session of tool, as EventLog.Follow does;
// arrived, if not nil, is called after each record is handed to the follower.
func (p *postFeeds) follow(tool, session, post string, arrived func()) (*Follower, error) {
	l := p.log
	f := &Follower{log: l, subject: l.PostSubject(tool, session, post), live: make(chan *nats.Msg, liveBuffer), Next: 1,
		reconnects: l.nc.Stats().Reconnects}
	key := l.subj.Logged(l.PostSubject(tool, session, "*"))
	p.mu.Lock()
	defer p.mu.Unlock()
	feed := p.feeds[key]
	if feed == nil {
		feed = &postFeed{posts: map[string]func(*nats.Msg){}}
		sub, err := l.nc.Subscribe(key, func(m *nats.Msg) { p.deliver(feed, m) })
		if err != nil {
			return nil, err
		}
		feed.sub = sub
		feed.idle = time.AfterFunc(feedLinger, func() { p.expire(key, feed) })
		p.feeds[key] = feed
	}
	feed.idle.Stop()
	var lost atomic.Int64 // records the follower had no room for
	deliver := func(m *nats.Msg) {
		select {
		case f.live <- m:
		default:
			lost.Add(1)
		}
		if arrived != nil {
			arrived()
		}
	}
	feed.posts[post] = deliver
	f.lost = func() int {
		d, _ := feed.sub.Dropped()
		return d + int(lost.Load())
	}
	f.lostSeen = f.lost()
	f.unfollow = func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		delete(feed.posts, post)
		if len(feed.posts) == 0 {
			feed.idle.Reset(feedLinger)
		}
	}
	return f, nil
}

// deliver hands a record of a session's POST streams to the follower of its stream,
// if the stream is still followed here.
func (p *postFeeds) deliver(feed *postFeed, m *nats.Msg) {
	post := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	p.mu.Lock()
	deliver := feed.posts[post]
	p.mu.Unlock()
	if deliver != nil {
		deliver(m)
	}
}

// expire ends a session's subscription that nothing has followed for feedLinger.
func (p *postFeeds) expire(key string, feed *postFeed) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(feed.posts) > 0 || p.feeds[key] != feed {
		return
	}
	delete(p.feeds, key)
	_ = feed.sub.Unsubscribe()
}

// FollowPost follows the POST stream post of session of tool, as Follow does, on the
// subscription the session's followed POST streams share; arrived, if not nil, is
// called after each record is handed to the follower.
func (l *EventLog) FollowPost(tool, session, post string, arrived func()) (*Follower, error) {
	return l.posts.follow(tool, session, post, arrived)
}

// Live is where the records the log republishes arrive, in order; hand each to Take.
func (f *Follower) Live() <-chan *nats.Msg { return f.live }
