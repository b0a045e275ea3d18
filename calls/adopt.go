package calls

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// A call's worker answers on a subject of its own (ReplyTo), which the edge running
// the call follows and which an edge (any one, of the queue group of asks) stores in
// the event log: so the answer outlives the edge running the call. An edge that reads
// a working record whose answer is stored (the edge running it died before recording
// its end) records the end itself, compare-and-set, rendered by the renderer of the
// record's protocol as the edge running it would have: a call an edge ran is adopted
// by whichever edge reads it next.

// StoredAnswer reads the answer a call's worker sent on its ReplyTo, as stored: nil
// when none is.
type StoredAnswer func(ctx context.Context, tool, session, post string) (*nats.Msg, error)

// Render makes the outcome of a call of rec from its worker's reply (or the reply's
// error); false when the reply does not end the call (an MCP task's tool asking its
// client for input), or when the payload it names is gone (the edge running the call
// took it, and records the end itself).
type Render func(ctx context.Context, rec *Record, reply *wire.Reply, err error) (Outcome, bool)

type adoption struct {
	mu     sync.Mutex
	stored StoredAnswer
	render map[string]Render // by Record.Protocol
}

// Adopt lets this edge record the end of calls other edges ran and left working: it
// reads their stored answers with stored and renders those of records of protocol
// with render.
func (cs *Calls) Adopt(stored StoredAnswer, protocol string, render Render) {
	cs.adopt.mu.Lock()
	defer cs.adopt.mu.Unlock()
	if stored != nil {
		cs.adopt.stored = stored
	}
	if cs.adopt.render == nil {
		cs.adopt.render = map[string]Render{}
	}
	cs.adopt.render[protocol] = render
}

// ReplyTo is where the worker of the call rec answers: an edge stores it there.
func (cs *Calls) ReplyTo(rec Record) string {
	return cs.subjects.StreamAnswer(rec.Tool, rec.ID, rec.CallID)
}

// adopted is rec as it stands once its stored answer, if any, is recorded: rec when
// it is not working, has no stored answer, or this edge cannot render it.
func (cs *Calls) adopted(ctx context.Context, rec *Record, rev uint64) (*Record, uint64) {
	if rec.Status != Working || rec.Overdue(time.Now()) {
		return rec, rev
	}
	cs.adopt.mu.Lock()
	stored, render := cs.adopt.stored, cs.adopt.render[rec.Protocol]
	cs.adopt.mu.Unlock()
	if stored == nil || render == nil {
		return rec, rev
	}
	msg, err := stored(ctx, rec.Tool, rec.ID, rec.CallID)
	if err != nil || msg == nil || len(msg.Data) == 0 && msg.Header.Get("Status") == "503" {
		return rec, rev // none, or the bus's "no responders", which no worker sent
	}
	reply, rerr := wire.ReadReply(msg)
	out, ends := render(ctx, rec, reply, rerr)
	if !ends {
		return rec, rev
	}
	cs.finish(*rec, rev, out)
	cur, curRev, err := cs.recs.get(ctx, rec.ID)
	if err != nil {
		return rec, rev
	}
	return cur, curRev
}
