package core

import (
	"context"
	"net/http"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/registry"
)

// ReplayPost resumes the stream of one POST after the event id the client last
// got, on any edge: the call may still run on the edge that took the POST, which
// keeps appending to the log; the stream ends after the response. Should that edge be
// gone, this one puts the response on the stream (finishStream).
func (s *Server) ReplayPost(w http.ResponseWriter, r *http.Request, sess *registry.Session, after EventID) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	subject := s.events.PostSubject(sess.Tool, sess.ID, after.Post)
	f, err := s.events.Follow(subject)
	if err != nil {
		s.log.Error("following stream", "session", sess.ID, "err", err)
		s.Refuse(w, http.StatusServiceUnavailable, "the bus is unavailable; retry")
		return
	}
	defer f.Stop()
	f.Next, f.LeaveLarge = after.Seq+1, true
	// The edge running the call waits a while for the client to come back before
	// taking its absence for cancellation: tell it the client is back.
	if _, err := s.events.Append(ctx, subject, nil, nats.Header{headerEvent: {eventResume}}, ""); err != nil {
		s.log.Warn("announcing a resumed stream", "session", sess.ID, "err", err)
	}
	ended, release := s.streams.add(sess.ID)
	defer release()
	ew := StartEvents(w, http.StatusOK)
	if ew.Prime(after.String(), s.cfg.RetryAfter) != nil {
		return
	}
	// The edge running the call may be gone: then this one finishes the stream.
	var finishing sync.WaitGroup
	finishing.Go(func() { s.finishStream(ctx, sess, after.Post) })
	defer func() { cancel(); finishing.Wait() }()
	s.pump(ctx, ew, sess, f, true, false, ended, func(rec registry.Record) (bool, StreamEnd) {
		if rec.Header.Get(headerEvent) != "" {
			return false, 0
		}
		id := EventID{Session: sess.ID, Post: after.Post, Seq: rec.Seq}
		if s.recordEvent(ctx, ew, id.String(), rec) != nil {
			return true, EndClient
		}
		return rec.Header.Get(headerFinal) != "", EndClient
	})
}
