package workers

import (
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
)

// onDirect takes a request sent to this instance alone (wire.Subjects.Instance): an
// MCP session's, which the edges send to the instance that answered the session
// first, for a tool that keeps state per session. It goes where the same request on
// the tool's own subject goes.
func (w *Worker) onDirect(msg *nats.Msg) {
	in := inbound{subject: msg.Subject, reply: msg.Reply, data: msg.Data, header: msg.Header}
	kind := strings.TrimPrefix(msg.Subject, w.cfg.subjects.Instance(w.tool.ID, w.cfg.instance)+".")
	var m *Method
	subject := w.cfg.subjects.MCP(w.tool.ID)
	if name, ok := strings.CutPrefix(kind, "call."); ok {
		m, subject = w.lookup(name)(), w.cfg.subjects.Call(w.tool.ID, name)
	} else if kind == "mcp" {
		m = w.mcpMethod
	} else {
		w.log.Warn("request refused: its subject names no method", "subject", msg.Subject)
		return
	}
	w.mu.Lock()
	st := w.stats[subject]
	w.mu.Unlock()
	if st == nil {
		st = &methodStats{} // a method declared no more: refused below, counted nowhere
	}
	w.accept(in, m, st)
}

// accept hands a call to a runner and, at the concurrency bound, queues it for a
// slot (see slots), so the calls queue rather than being dropped.
func (w *Worker) accept(in inbound, m *Method, st *methodStats) {
	if !wire.CallReplyAcceptable(in.reply) {
		// Every call an edge sends waits for its answer on a plain reply subject; a
		// call without one, or one answered into JetStream's API, is none of theirs.
		w.log.Warn("call refused: its reply subject is none an edge gives", "subject", in.subject)
		return
	}
	if m == nil {
		_ = w.nc.PublishMsg(reply(in.reply, nil, &Error{Code: CodeMethodNotFound, Message: "the tool has no such method any more", Status: 404}))
		return
	}
	j := job{m, st, in, in.header.Get(wire.HeaderCallID)}
	if run, taken := w.slots.take(j); !taken || !run {
		return // queued for a slot, or nobody can hear the reply: the connection is gone
	}
	select {
	case w.idle <- j: // a runner done with its last call takes it
	default:
		go w.runner(j)
	}
}

// runner runs the call it is started with, then those handed to it while it waits,
// until Run returns. Runners outlive their calls so that a call pays neither for a new
// goroutine nor for its stack growing again through the handler, the encoding and the
// reply (both showed in the worker's profile under load). A runner is started only
// when none waits, and runs the queued calls before it waits, so there are about as
// many runners as the most calls ever run at once.
func (w *Worker) runner(j job) {
	for {
		w.call(j.m, j.st, j.in)
		next, ok := w.slots.next(j)
		if ok {
			j = next
			continue
		}
		select {
		case j = <-w.idle:
		case <-w.done:
			return
		}
	}
}

type job struct {
	m      *Method
	st     *methodStats
	in     inbound
	callID string
}

type inbound struct {
	subject string
	reply   string
	data    []byte
	header  nats.Header
	payload bool // data was read from a payload: the edge did not check its schema
}
