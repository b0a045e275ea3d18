package sse

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
)

// postFeeds follows the POST streams of the calls this edge runs for clients that
// may be asked something (sampling, elicitation, roots): what a call's tool sends
// its client goes on the stream's subject, which the edge must hear from before the
// call is sent. A subscription per call cost a subscribe and an unsubscribe on the
// bus for every call, so the calls of one session share one subscription to all its
// POST streams, kept while any of them is followed and for feedLinger after, and
// each record goes to the follower of its stream.
type postFeeds struct {
	log *eventLog

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

// follow follows the POST stream post of session of tool, as eventLog.follow does;
// arrived, if not nil, is called after each record is handed to the follower.
func (p *postFeeds) follow(tool, session, post string, arrived func()) (*follower, error) {
	l := p.log
	f := &follower{log: l, subject: l.postSubject(tool, session, post), live: make(chan *nats.Msg, liveBuffer), next: 1,
		reconnects: l.nc.Stats().Reconnects}
	key := l.subj.Logged(l.postSubject(tool, session, "*"))
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
