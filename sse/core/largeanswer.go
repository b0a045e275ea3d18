package core

import (
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// How each transport writes a large result (see large.go):
//   - as JSON, and as the one event of a 2026-07-28 call's stream: the response
//     written to the client as it is read from the payload (AnswerRequest,
//     ResultEvent);
//   - on a stream kept in the event log (a session's call stream, and every answer of
//     the legacy transport, which goes on the session's stream): the log keeps each
//     event for a client that resumes, so the response is first written, as it is
//     read, into a payload of the log's own, the record names it, and the event is
//     written to the client from there, as is every later replay of it.

// writeResponse writes rr's response with its large result to w.
func (s *Server) writeResponse(ctx context.Context, w io.Writer, rr *Request) error {
	head, tail := resultFrame(rr.RPC.ID)
	if _, err := w.Write(head); err != nil {
		return err
	}
	if err := rr.large.writeTo(ctx, w); err != nil {
		return err
	}
	_, err := w.Write(tail)
	return err
}

// AnswerRequest is Answer for rr, whose result may be large (Request.LargeAnswers):
// then it is written as it is read. A result that cannot be read whole once its
// answer began cuts the connection: the client sees a broken answer, never a wrong
// one.
func (s *Server) AnswerRequest(w http.ResponseWriter, accept Accepts, rr *Request, result json.RawMessage, err error) {
	if rr.large == nil || err != nil {
		s.Answer(w, accept, rr.RPC.ID, result, err)
		return
	}
	ctx := s.ctx
	if accept.JSON {
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(http.StatusOK)
		if err := s.writeResponse(ctx, w, rr); err != nil {
			s.log.Warn("a large result not sent whole", "tool", rr.Tool, "err", err)
			panic(http.ErrAbortHandler)
		}
		return
	}
	_ = s.ResultEvent(StartEvents(w, http.StatusOK), rr, result)
}

// ResultEvent writes rr's response with result as an event of ew: written as it is
// read when the result is large.
func (s *Server) ResultEvent(ew *EventWriter, rr *Request, result json.RawMessage) error {
	if rr.large == nil {
		return ew.Event("", "message", EncodeResult(rr.RPC.ID, result))
	}
	err := ew.EventFrom("", "message", func(w io.Writer) error { return s.writeResponse(s.ctx, w, rr) })
	if err != nil {
		s.log.Warn("a large result not sent whole", "tool", rr.Tool, "err", err)
	}
	return err
}

// ResponseRecord is the record of rr's response with result, to append to the event
// log: the response as its data, or, for a large result, no data and the reference
// to the payload the response was written into (hdr).
func (s *Server) ResponseRecord(rr *Request, result json.RawMessage) (data []byte, hdr nats.Header, err error) {
	if rr.large == nil {
		return EncodeResult(rr.RPC.ID, result), nil, nil
	}
	r, w := io.Pipe()
	go func() { _ = w.CloseWithError(s.writeResponse(s.ctx, w, rr)) }()
	p, err := s.events.StoreLarge(s.ctx, r)
	_ = r.CloseWithError(io.ErrClosedPipe) // the writer stops, should the store have
	if err != nil {
		return nil, nil, err
	}
	return nil, nats.Header{wire.HeaderPayload: {p.String()}}, nil
}

// largeEvent writes a large record of the log as an event of ew, as it is read.
func (s *Server) largeEvent(ctx context.Context, ew *EventWriter, id string, p wire.Payload) error {
	return ew.EventFrom(id, "message", func(w io.Writer) error { return s.events.WriteLarge(ctx, w, p) })
}

// statelessExtra is what a 2026-07-28 tools/call result carries besides its own
// members, as MarshalResult adds it: the server's info and the result's type.
func (s *Server) statelessExtra(r *Request) []byte {
	meta, _ := json.Marshal(map[string]any{mcp.MetaKeyServerInfo: s.serverInfo(s.toolTitle(r))})
	return append(append([]byte(`"_meta":`), meta...), `,"resultType":"complete"`...)
}

// recordEvent writes a record of the log as an event of ew: a large one as it is read.
func (s *Server) recordEvent(ctx context.Context, ew *EventWriter, id string, rec registry.Record) error {
	if rec.Large != nil {
		return s.largeEvent(ctx, ew, id, *rec.Large)
	}
	return ew.Event(id, "message", rec.Data)
}
