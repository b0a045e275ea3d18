package sse

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/registry"
)

// streamEnd says why a stream stopped.
type streamEnd int

const (
	endClient    streamEnd = iota // the client went away
	endSession                    // the session ended
	endTakenOver                  // a newer stream of the session took over
	endServer                     // this edge is stopping
	endRefused                    // the stream never opened: the bus or the log failed
)

// holdStandalone serves a session's standalone stream: every message for the session
// that is not the answer of a POST (responses on the legacy transport, server
// requests, list changes). Its events come from the event log, so whatever was
// published while no stream was open, or while the client reconnected to another
// edge, reaches the client: with resume, what came after that event; without, what
// came since the session's last stream closed, or since the session began if it
// never had one (a worker may ask the client something before the client's GET
// arrives). A new session has nothing to catch up on.
//
// A session has one standalone stream: the newest. Opening one appends an "open"
// record to the session's log, and a stream that sees a newer stream's record ends;
// the caller appends a "close" record when the stream ends with no newer one.
// opened writes what the stream starts with, given the id of the stream's position;
// done learns why the stream ended, once it has, which may be after the request's
// handler returned (see serveStream).
func (s *Server) holdStandalone(w http.ResponseWriter, r *http.Request, sess *registry.Session, resume *eventID, newSession bool, opened func(ew *eventWriter, at string) error, done func(streamEnd)) {
	ctx := r.Context()
	subject := s.events.StandaloneSubject(sess.Tool, sess.ID)
	f, err := s.events.Follow(subject)
	if err != nil {
		s.log.Error("following stream", "session", sess.ID, "err", err)
		s.refuse(w, http.StatusServiceUnavailable, "the bus is unavailable; retry")
		done(endRefused)
		return
	}
	instance := registry.NewID("")
	openSeq, err := s.events.Append(ctx, subject, nil, nats.Header{headerEvent: {eventOpen}, headerInstance: {instance}}, "")
	if err != nil {
		f.Stop()
		s.log.Error("opening stream", "session", sess.ID, "err", err)
		s.refuse(w, http.StatusServiceUnavailable, "the event log is unavailable; retry")
		done(endRefused)
		return
	}
	at := eventID{session: sess.ID, seq: openSeq}
	f.Next = openSeq + 1
	switch {
	case resume != nil:
		at, f.Next = *resume, resume.seq+1
	case !newSession:
		from, err := s.unheard(ctx, subject, openSeq)
		if err != nil {
			s.log.Warn("reading the event log", "session", sess.ID, "err", err)
		} else {
			f.Next = from
		}
	}
	ended, release := s.streams.add(sess.ID)
	s.serveStream(w, r, func(ctx context.Context, ew *eventWriter) streamEnd {
		defer f.Stop()
		defer release()
		if err := opened(ew, at.String()); err != nil {
			return endClient
		}
		return s.pump(ctx, ew, sess, f, f.Next <= openSeq, true, ended, func(rec registry.Record) (bool, streamEnd) {
			switch rec.Header.Get(headerEvent) {
			case "":
				if ew.event(eventID{session: sess.ID, seq: rec.Seq}.String(), "message", rec.Data) != nil {
					return true, endClient
				}
			case eventOpen:
				if rec.Seq > openSeq && rec.Header.Get(headerInstance) != instance {
					return true, endTakenOver
				}
			}
			return false, 0
		})
	}, done)
}

// serveStream runs a stream that may stay open for hours, mostly idle. Where it can,
// it takes the connection from the HTTP server and runs the stream on a goroutine of
// its own, so that an idle stream holds its connection, a goroutine that has little
// on its stack and what it follows, not a handler deep in the edge's middleware with
// the server's buffers. The client never writes to the stream's connection, so a
// read that ends says the client left. Where the connection cannot be taken (HTTP/2),
// the stream runs in the handler. done learns why the stream ended.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, run func(context.Context, *eventWriter) streamEnd, done func(streamEnd)) {
	ew, conn, end, err := detachEvents(w)
	if err != nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		done(run(ctx, startEvents(w, http.StatusOK)))
		return
	}
	s.pending.add()
	go func() {
		defer s.pending.done()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			defer cancel()
			var b [64]byte
			for {
				if _, err := conn.Read(b[:]); err != nil {
					return
				}
			}
		}()
		why := run(ctx, ew)
		end()
		done(why)
	}()
}

// closeStandalone records that a session's standalone stream closed and no newer one
// took over, so that the session's next stream delivers what comes meanwhile.
func (s *Server) closeStandalone(sess *registry.Session) {
	ctx, cancel := s.detached()
	defer cancel()
	if _, err := s.events.Append(ctx, s.events.StandaloneSubject(sess.Tool, sess.ID), nil, nats.Header{headerEvent: {eventClose}}, ""); err != nil {
		s.log.Warn("closing stream", "session", sess.ID, "err", err)
	}
}

// replayPost resumes the stream of one POST after the event id the client last
// got, on any edge: the call may still run on the edge that took the POST, which
// keeps appending to the log; the stream ends after the response. Should that edge be
// gone, this one puts the response on the stream (finishStream).
func (s *Server) replayPost(w http.ResponseWriter, r *http.Request, sess *registry.Session, after eventID) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	subject := s.events.PostSubject(sess.Tool, sess.ID, after.post)
	f, err := s.events.Follow(subject)
	if err != nil {
		s.log.Error("following stream", "session", sess.ID, "err", err)
		s.refuse(w, http.StatusServiceUnavailable, "the bus is unavailable; retry")
		return
	}
	defer f.Stop()
	f.Next = after.seq + 1
	// The edge running the call waits a while for the client to come back before
	// taking its absence for cancellation: tell it the client is back.
	if _, err := s.events.Append(ctx, subject, nil, nats.Header{headerEvent: {eventResume}}, ""); err != nil {
		s.log.Warn("announcing a resumed stream", "session", sess.ID, "err", err)
	}
	ended, release := s.streams.add(sess.ID)
	defer release()
	ew := startEvents(w, http.StatusOK)
	if ew.prime(after.String(), s.cfg.RetryAfter) != nil {
		return
	}
	// The edge running the call may be gone: then this one finishes the stream.
	var finishing sync.WaitGroup
	finishing.Go(func() { s.finishStream(ctx, sess, after.post) })
	defer func() { cancel(); finishing.Wait() }()
	s.pump(ctx, ew, sess, f, true, false, ended, func(rec registry.Record) (bool, streamEnd) {
		if rec.Header.Get(headerEvent) != "" {
			return false, 0
		}
		id := eventID{session: sess.ID, post: after.post, seq: rec.Seq}
		if ew.event(id.String(), "message", rec.Data) != nil {
			return true, endClient
		}
		return rec.Header.Get(headerFinal) != "", endClient
	})
}

// pump writes a stream's records until write says stop, the client leaves, the
// session ends or the edge stops; it keeps the stream and the session alive
// meanwhile. With replay it first writes what the log holds from f.Next on. A
// standalone stream also keeps its session marked as holding one: the mark may have
// been taken off by an older stream of the session ending after this one opened.
func (s *Server) pump(ctx context.Context, ew *eventWriter, sess *registry.Session, f *registry.Follower, replay, standalone bool, ended <-chan struct{}, write func(registry.Record) (bool, streamEnd)) streamEnd {
	var why streamEnd
	deliver := func(rec registry.Record) bool {
		done, w := write(rec)
		why = w
		return done
	}
	// catchUp reads the store for what the live feed has not delivered.
	catchUp := func() bool {
		done, err := f.Stored(ctx, deliver)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("reading the event log", "session", sess.ID, "err", err)
		}
		return done
	}
	if replay && catchUp() {
		return why
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	// The session is looked at every third of its shorter life, and written to
	// when it must be: a session holding a stream every third of the longer one.
	refresh := time.NewTicker(max(min(s.cfg.SessionTTL, s.cfg.SessionIdle)/3, time.Second))
	defer refresh.Stop()
	refreshEvery := s.cfg.SessionIdle / 3
	if standalone {
		refreshEvery = s.cfg.SessionTTL / 3
	}
	refreshed := time.Now()
	for {
		select {
		case m := <-f.Live():
			done, err := f.Take(ctx, m, deliver)
			if err != nil && ctx.Err() == nil {
				s.log.Warn("reading the event log", "session", sess.ID, "err", err)
			}
			if done {
				return why
			}
		case <-keepAlive.C:
			if ew.keepAlive(s.cfg.KeepAlive) != nil {
				return endClient
			}
			if f.MayHaveLost() && catchUp() {
				return why
			}
		case <-refresh.C:
			// An open stream keeps its session from expiring.
			cur, err := s.lookup(ctx, sess.ID)
			if errors.Is(err, registry.ErrNotFound) {
				return endSession
			}
			switch {
			case err != nil:
			case standalone && !cur.Stream:
				s.streamHeld(cur, true)
				refreshed = time.Now()
			case time.Since(refreshed) >= refreshEvery:
				s.touch(ctx, cur)
				refreshed = time.Now()
			}
			// A record whose republish was lost shows in no later one's predecessor
			// while the stream is quiet.
			if catchUp() {
				return why
			}
		case <-ended:
			return endSession
		case <-s.draining:
			// Close drains too, so a stopping edge always tells its clients when to
			// reconnect (elsewhere).
			_ = ew.retry(s.cfg.RetryAfter)
			return endServer
		case <-ctx.Done():
			return endClient
		}
	}
}
