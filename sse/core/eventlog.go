package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
)

// Headers on event log records. A record without Tg-Event is a JSON-RPC message for
// the client; the others steer the edges that follow the log and are never sent.
const (
	headerEvent    = "Tg-Event"  // "open" and "close": a standalone stream opened, closed; "request": a POST stream began; "resume": a POST stream was resumed
	headerInstance = "Tg-Stream" // with "open": which stream instance opened
	headerFinal    = "Tg-Final"  // on a POST stream's response: the stream ends after it
	// headerOrigin marks the messages of a POST stream that the edge running the
	// call wrote to the stream itself; the others (a worker's requests) it writes as
	// the log republishes them.
	headerOrigin = "Tg-Origin"
)

const originEdge = "edge"

const (
	eventOpen    = "open"
	eventClose   = "close"
	eventRequest = "request"
	eventResume  = "resume"
)

// unheard returns where a new standalone stream starts, given the sequence of its
// own "open" record: after the session's last "close" record if no stream opened
// since; at the session's first record if none ever opened; else after its own
// "open" (the stream still open, or one that broke, had the records meanwhile). It
// reads the session's records up to open, which are few: what a session's client is
// sent outside its POSTs, and a record per stream opened or closed.
func (s *Server) unheard(ctx context.Context, subject string, open uint64) (uint64, error) {
	from := uint64(1)
	for seq := uint64(1); ; {
		m, err := s.events.Get(ctx, subject, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return open + 1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("sse: event log: read %s from %d: %w", subject, seq, err)
		}
		if m.Sequence >= open {
			return from, nil
		}
		switch m.Header.Get(headerEvent) {
		case eventOpen:
			from = open + 1
		case eventClose:
			from = m.Sequence + 1
		}
		seq = m.Sequence + 1
	}
}

// An EventID names a stream and a position in it: "<session>:<seq>" on a session's
// standalone stream, "<session>:<post>:<seq>" on the stream of one POST. Session and
// post ids are base62, so ':' cannot occur in them.
type EventID struct {
	Session string
	Post    string // "" for the standalone stream
	Seq     uint64
}

// String is the id as an event stream carries it.
func (id EventID) String() string {
	if id.Post == "" {
		return id.Session + ":" + strconv.FormatUint(id.Seq, 10)
	}
	return id.Session + ":" + id.Post + ":" + strconv.FormatUint(id.Seq, 10)
}

// ParseEventID reads an event id a client sent (Last-Event-ID); false when it is none
// of this package's.
func ParseEventID(s string) (EventID, bool) {
	parts := strings.Split(strings.TrimSpace(s), ":")
	if len(parts) < 2 || len(parts) > 3 {
		return EventID{}, false
	}
	seq, err := strconv.ParseUint(parts[len(parts)-1], 10, 64)
	if err != nil {
		return EventID{}, false
	}
	id := EventID{Session: parts[0], Seq: seq}
	if len(parts) == 3 {
		id.Post = parts[1]
	}
	if !wire.ValidToken(id.Session) || (len(parts) == 3 && !wire.ValidToken(id.Post)) {
		return EventID{}, false
	}
	return id, true
}
