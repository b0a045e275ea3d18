package core

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/registry"
)

// StreamEnd says why a stream stopped.
type StreamEnd int

const (
	EndClient    StreamEnd = iota // the client went away
	EndOfSession                  // the session ended
	EndTakenOver                  // a newer stream of the session took over
	EndServer                     // this edge is stopping
	EndRefused                    // the stream never opened: the bus or the log failed
)

// HoldStandalone serves a session's standalone stream: every message for the session
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
// handler returned (see ServeStream).
func (s *Server) HoldStandalone(w http.ResponseWriter, r *http.Request, sess *registry.Session, resume *EventID, newSession bool, opened func(ew *EventWriter, at string) error, done func(StreamEnd)) {
	ctx := r.Context()
	subject := s.events.StandaloneSubject(sess.Tool, sess.ID)
	f, err := s.events.Follow(subject)
	if err != nil {
		s.log.Error("following stream", "session", sess.ID, "err", err)
		s.Refuse(w, http.StatusServiceUnavailable, "the bus is unavailable; retry")
		done(EndRefused)
		return
	}
	f.LeaveLarge = true
	instance := registry.NewID("")
	openSeq, err := s.events.Append(ctx, subject, nil, nats.Header{headerEvent: {eventOpen}, headerInstance: {instance}}, "")
	if err != nil {
		f.Stop()
		s.log.Error("opening stream", "session", sess.ID, "err", err)
		s.Refuse(w, http.StatusServiceUnavailable, "the event log is unavailable; retry")
		done(EndRefused)
		return
	}
	at := EventID{Session: sess.ID, Seq: openSeq}
	f.Next = openSeq + 1
	switch {
	case resume != nil:
		at, f.Next = *resume, resume.Seq+1
	case !newSession:
		from, err := s.unheard(ctx, subject, openSeq)
		if err != nil {
			s.log.Warn("reading the event log", "session", sess.ID, "err", err)
		} else {
			f.Next = from
		}
	}
	ended, release := s.streams.add(sess.ID)
	s.ServeStream(w, r, func(ctx context.Context, ew *EventWriter) StreamEnd {
		defer f.Stop()
		defer release()
		if err := opened(ew, at.String()); err != nil {
			return EndClient
		}
		return s.pump(ctx, ew, sess, f, f.Next <= openSeq, true, ended, func(rec registry.Record) (bool, StreamEnd) {
			switch rec.Header.Get(headerEvent) {
			case "":
				if s.recordEvent(ctx, ew, EventID{Session: sess.ID, Seq: rec.Seq}.String(), rec) != nil {
					return true, EndClient
				}
			case eventOpen:
				if rec.Seq > openSeq && rec.Header.Get(headerInstance) != instance {
					return true, EndTakenOver
				}
			}
			return false, 0
		})
	}, done)
}

// ServeStream runs a stream that may stay open for hours, mostly idle. Where it can,
// it takes the connection from the HTTP server and runs the stream on a goroutine of
// its own, so that an idle stream holds its connection, a goroutine that has little
// on its stack and what it follows, not a handler deep in the edge's middleware with
// the server's buffers. The client never writes to the stream's connection, so a
// read that ends says the client left. Where the connection cannot be taken (HTTP/2),
// the stream runs in the handler. done learns why the stream ended.
func (s *Server) ServeStream(w http.ResponseWriter, r *http.Request, run func(context.Context, *EventWriter) StreamEnd, done func(StreamEnd)) {
	ew, conn, end, err := detachEvents(w)
	if err != nil {
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		done(run(ctx, StartEvents(w, http.StatusOK)))
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

// CloseStandalone records that a session's standalone stream closed and no newer one
// took over, so that the session's next stream delivers what comes meanwhile.
func (s *Server) CloseStandalone(sess *registry.Session) {
	ctx, cancel := s.detached()
	defer cancel()
	if _, err := s.events.Append(ctx, s.events.StandaloneSubject(sess.Tool, sess.ID), nil, nats.Header{headerEvent: {eventClose}}, ""); err != nil {
		s.log.Warn("closing stream", "session", sess.ID, "err", err)
	}
}

// pump writes a stream's records until write says stop, the client leaves, the
// session ends or the edge stops; it keeps the stream and the session alive
// meanwhile. With replay it first writes what the log holds from f.Next on. A
// standalone stream also keeps its session marked as holding one: the mark may have
// been taken off by an older stream of the session ending after this one opened.
func (s *Server) pump(ctx context.Context, ew *EventWriter, sess *registry.Session, f *registry.Follower, replay, standalone bool, ended <-chan struct{}, write func(registry.Record) (bool, StreamEnd)) StreamEnd {
	var why StreamEnd
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
			if ew.KeepAlive(s.cfg.KeepAlive) != nil {
				return EndClient
			}
			if f.MayHaveLost() && catchUp() {
				return why
			}
		case <-refresh.C:
			// An open stream keeps its session from expiring.
			cur, err := s.lookup(ctx, sess.ID)
			if errors.Is(err, registry.ErrNotFound) {
				return EndOfSession
			}
			switch {
			case err != nil:
			case standalone && !cur.Stream:
				s.StreamHeld(cur, true)
				refreshed = time.Now()
			case time.Since(refreshed) >= refreshEvery:
				s.Touch(ctx, cur)
				refreshed = time.Now()
			}
			// A record whose republish was lost shows in no later one's predecessor
			// while the stream is quiet.
			if catchUp() {
				return why
			}
		case <-ended:
			return EndOfSession
		case <-s.draining:
			// Close drains too, so a stopping edge always tells its clients when to
			// reconnect (elsewhere).
			_ = ew.retry(s.cfg.RetryAfter)
			return EndServer
		case <-ctx.Done():
			return EndClient
		}
	}
}
