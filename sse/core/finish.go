package core

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// A tools/call answered with a stream outlives the edge running it: the tool answers
// on the event log (EventLog.ReplySubject), and the edge running the call, which follows that
// subject, puts the response on the call's stream. Should that edge be gone (killed,
// or cut off from NATS), an edge replaying the stream to a client that resumed it
// makes the response from the tool's answer in the log, or the timeout once the call's
// deadline has passed, and puts it on the stream itself.

// answerGrace is how long the edge running a call has to put the response on the
// call's stream once the tool's answer is in the log (or the call's deadline passed)
// before an edge replaying the stream does it instead.
const answerGrace = time.Second

// maxEarlyRecords is how many records of the tool's a call stream's request may
// follow: what the tool sent before the stream opened, which was its first request
// to the client (it waits for the answer) and perhaps that request's cancellation.
const maxEarlyRecords = 16

// finishStream runs beside the replay of the stream of post in sess until ctx ends
// (the replay ended: it delivered the response, or the client left): it waits for the
// tool's answer, or the call's deadline, and then for answerGrace, and puts the
// response on the stream unless something came after what it has seen there.
func (s *Server) finishStream(ctx context.Context, sess *registry.Session, post string) {
	subject := s.events.PostSubject(sess.Tool, sess.ID, post)
	rr, m, deadline, err := s.loggedCall(ctx, sess, subject)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("reading a call stream's request", "session", sess.ID, "err", err)
		}
		return
	}
	reply, err := s.awaitReply(ctx, s.events.ReplySubject(subject), deadline)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		s.log.Warn("reading a call's answer", "session", sess.ID, "err", err)
		return
	}
	var res any
	if reply == nil {
		res, err = toolAnswer(sess.Tool, m, nil, bus.ErrTimeout)
	} else {
		r, rerr := wire.ReadReply(reply)
		if rerr == nil { // a large answer is kept as a payload, whose reference the log holds
			r, rerr = s.gw.TakeReply(ctx, &gateway.Call{Tool: sess.Tool, Principal: registry.Principal{Account: sess.Account}}, r)
		}
		res, err = toolAnswer(sess.Tool, m, r, rerr)
	}
	var final []byte
	if err == nil {
		var raw []byte
		if raw, err = s.MarshalResult(res, rr); err == nil {
			final = EncodeResult(rr.RPC.ID, raw)
		}
	}
	if err != nil {
		final = EncodeError(rr.RPC.ID, RPCError(err))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(answerGrace):
		}
		last, err := s.events.Last(ctx, subject)
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("reading a call stream", "session", sess.ID, "err", err)
			}
			continue
		}
		if last.Header.Get(headerFinal) != "" {
			return // the edge running the call answered
		}
		// Only if nothing came after last: an edge running the call that is alive
		// after all puts its own response on the stream.
		done, err := s.events.AppendAfter(ctx, subject, final, nats.Header{headerFinal: {"1"}}, last.Sequence)
		if done {
			s.log.Info("finished a call stream whose edge is gone", "session", sess.ID, "post", post)
			return
		}
		if err != nil && ctx.Err() == nil {
			s.log.Warn("finishing a call stream", "session", sess.ID, "err", err)
		}
	}
}

// loggedCall reads the request that began a call stream from the log: the request, as
// a Request of sess, the method it calls, and its deadline, counted from when the
// request was stored. The request is the stream's first record, or comes after the
// few the tool put on the stream before it opened (CallJSONOrStream).
func (s *Server) loggedCall(ctx context.Context, sess *registry.Session, subject string) (*Request, *registry.Method, time.Time, error) {
	var m *jetstream.RawStreamMsg
	for seq, n := uint64(1), 0; ; n++ {
		var err error
		m, err = s.events.Get(ctx, subject, seq)
		if err != nil {
			return nil, nil, time.Time{}, fmt.Errorf("sse: event log: read %s: %w", subject, err)
		}
		if m.Header.Get(headerEvent) == eventRequest {
			break
		}
		if m.Header.Get(headerOrigin) != "" || n == maxEarlyRecords {
			return nil, nil, time.Time{}, fmt.Errorf("sse: event log: %s does not begin with its request", subject)
		}
		seq = m.Sequence + 1
	}
	msg, err := decodeMessage(m.Data)
	req, ok := msg.(*jsonrpc.Request)
	if err != nil || !ok {
		return nil, nil, time.Time{}, fmt.Errorf("sse: event log: %s begins with no request: %v", subject, err)
	}
	rr := &Request{Principal: registry.Principal{Account: sess.Account}, Tool: sess.Tool, Session: sess, RPC: req}
	params, err := rr.callParams()
	if err != nil {
		return nil, nil, time.Time{}, err
	}
	method := &registry.Method{Name: params.Name}
	if t := s.view.Snapshot().RawTool(sess.Tool); t != nil {
		for i := range t.Tool.Methods {
			if MCPName(&t.Tool.Methods[i]) == params.Name {
				method = &t.Tool.Methods[i]
			}
		}
	}
	return rr, method, m.Time.Add(s.gw.Timeout(method, 0)), nil
}

// awaitReply returns the tool's answer stored on subject, waiting for it until
// deadline; nil when the deadline passed first.
func (s *Server) awaitReply(ctx context.Context, subject string, deadline time.Time) (*nats.Msg, error) {
	f, err := s.events.Follow(subject)
	if err != nil {
		return nil, err
	}
	defer f.Stop()
	var reply *nats.Msg
	take := func(rec registry.Record) bool {
		reply = &nats.Msg{Subject: subject, Header: rec.Header, Data: rec.Data}
		return true
	}
	if found, err := f.Stored(ctx, take); found || err != nil {
		return reply, err
	}
	timeout := time.NewTimer(time.Until(deadline))
	defer timeout.Stop()
	for {
		select {
		case m := <-f.Live():
			if found, err := f.Take(ctx, m, take); found || err != nil {
				return reply, err
			}
		case <-timeout.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
