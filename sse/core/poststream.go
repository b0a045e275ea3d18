package core

import (
	"sync"
	"sync/atomic"

	"github.com/toolgate/toolgate/registry"
)

// A postStream is the stream of the POST of a session's tools/call: its subject in
// the event log, and, for a call that runs before its stream opens (CallJSONOrStream),
// what opens it early.
type postStream struct {
	post, subject string
	// f follows subject, from before the tool could put anything there: what the tool
	// sends the client about the call (its requests) it puts there. nil when nothing
	// follows it (the tool was not told of the stream).
	f *registry.Follower
	// wake, when not nil, is told of the call's first notification or of the tool's
	// first record on the stream: something to send, so the stream must open.
	wake  func(*postStream)
	woken atomic.Bool

	opened   chan struct{} // closed once open is set, or once the call will not stream
	settling sync.Once
	open     *callStream
}

// newPostStream names a new POST stream of sess; with follow it follows the stream's
// subject in the log from now on. wake, if not nil, is called once, when the call
// has something to send before the stream opens.
func (s *Server) newPostStream(sess *registry.Session, follow bool, wake func(*postStream)) *postStream {
	post := registry.NewID("")
	ps := &postStream{post: post, subject: s.events.PostSubject(sess.Tool, sess.ID, post), wake: wake, opened: make(chan struct{})}
	if follow {
		f, err := s.events.FollowPost(sess.Tool, sess.ID, post, ps.awake)
		if err != nil {
			s.log.Warn("following a call stream", "session", sess.ID, "err", err)
		} else {
			ps.f = f
		}
	}
	return ps
}

// settle sets how the call's notifications are sent: on the open stream cs, or (nil)
// not at all, the call answering without one.
func (ps *postStream) settle(cs *callStream) {
	ps.settling.Do(func() {
		ps.open = cs
		close(ps.opened)
	})
}

// awake tells wake, once, that the call has something to send.
func (ps *postStream) awake() {
	if ps.wake != nil && ps.woken.CompareAndSwap(false, true) {
		ps.wake(ps)
	}
}

// note sends a notification of the call (progress, a log message) on the stream,
// once it is open; the first one opens it.
func (ps *postStream) note(msg []byte) {
	ps.awake()
	<-ps.opened
	if ps.open != nil {
		ps.open.send(msg, false)
	}
}

// sentBefore reports whether the call sent anything for the stream (a notification,
// a record of the tool's) before it opened.
func (ps *postStream) sentBefore() bool { return ps.woken.Load() }

// stop ends the following of the stream's subject.
func (ps *postStream) stop() {
	if ps.f != nil {
		ps.f.Stop()
	}
}
