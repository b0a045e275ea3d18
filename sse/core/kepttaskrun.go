package core

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// keptTaskRun is the run of a kept task on the edge that took its tools/call: the
// call, and again, each time its tool asked the client for input (an input_required
// result of its own), with the client's answers and the tool's requestState, until the
// tool answers. Its first answer may be the request's own instead of the task's
// (shortcut), when the request still waits for it and has not announced the task.
type keptTaskRun struct {
	s        *Server
	r        *Request
	m        *registry.Method
	call     *gateway.Call
	entry    *registry.MethodEntry
	timeout  time.Duration
	shortcut func(any) bool // which first answers the request takes; nil: none
	first    chan any       // the first answer, handed to the request

	mu        sync.Mutex
	announced bool // the request answered with the task
	handed    bool // the request took the first answer
}

// announce reports whether the request may answer with the task: the run has not
// handed it its first answer.
func (k *keptTaskRun) announce() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.handed {
		return false
	}
	k.announced = true
	return true
}

// hand gives the request the call's first answer, res, when the request still waits
// and takes it.
func (k *keptTaskRun) hand(res any) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.announced || k.handed || k.shortcut == nil || !k.shortcut(res) {
		return false
	}
	k.handed = true
	k.first <- res
	return true
}

// run is the task's calls.Run: the call's rounds, and, for a session of 2025-11-25,
// notifications/tasks/status on the session's stream once the end is recorded.
func (k *keptTaskRun) run(ctx context.Context, rec calls.Record) calls.Outcome {
	return k.told(k.rounds(ctx, rec))
}

// ended ends a task whose call was never sent (its approval denied, expired or
// withdrawn) with err, as the call's failure would have, in the audit trail too.
func (k *keptTaskRun) ended(ctx context.Context, rec calls.Record, err error) calls.Outcome {
	call := *k.call
	call.CallID, call.RequestID = rec.CallID, rec.ID
	if errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), calls.ErrCancelled) {
		err = context.Cause(ctx)
	}
	k.s.gw.Answered(ctx, &call, call.Params, nil, err)
	return k.told(taskOutcome(k.r.Tool, k.m, nil, err))
}

// told is out, which a session of 2025-11-25 hears of (notifications/tasks/status)
// once it is recorded.
func (k *keptTaskRun) told(out calls.Outcome) calls.Outcome {
	if k.r.Session != nil && !k.r.Stateless {
		out.Recorded = k.notifyStatus
	}
	return out
}

// notifyStatus tells the session that made the task that it ended
// (notifications/tasks/status, with the task), on its standalone stream.
func (k *keptTaskRun) notifyStatus(rec calls.Record) {
	s, sess := k.s, k.r.Session
	msg := EncodeNotification("notifications/tasks/status", s.taskFieldsOf(&rec, false))
	ctx, cancel := s.detached()
	defer cancel()
	if _, err := s.events.Append(ctx, s.events.StandaloneSubject(sess.Tool, sess.ID), msg, nil, "task-status."+rec.ID); err != nil {
		s.log.Warn("telling a session its task ended", "session", sess.ID, "task", rec.ID, "err", err)
	}
}

// rounds calls the tool, and again with its client's answers, until it answers.
func (k *keptTaskRun) rounds(ctx context.Context, rec calls.Record) calls.Outcome {
	s, args := k.s, k.call.Params
	for round := 0; ; round++ {
		// Every round is the same call on the bus: its cancel and progress subjects
		// are the record's.
		call := *k.call
		call.CallID, call.RequestID = rec.CallID, rec.ID
		call.MCPContext.ReplyTo = s.cfg.Tasks.ReplyTo(rec) // kept, should this edge die
		reply, err := s.gw.Send(ctx, &call, k.entry, k.timeout)
		if errors.Is(err, context.Canceled) && errors.Is(context.Cause(ctx), calls.ErrCancelled) {
			err = context.Cause(ctx)
		}
		s.gw.Answered(ctx, &call, args, reply, err)
		if res, aerr := toolAnswer(k.r.Tool, k.m, reply, err); aerr == nil && round == 0 && k.hand(res) {
			// The request answers with it; the record keeps it too.
			return taskOutcome(k.r.Tool, k.m, reply, err)
		}
		in, asks := askedInput(reply, err)
		if !asks {
			return taskOutcome(k.r.Tool, k.m, reply, err)
		}
		answers, werr := s.cfg.Tasks.AwaitInput(ctx, rec.ID, in)
		if werr != nil {
			return taskOutcome(k.r.Tool, k.m, nil, werr)
		}
		header, herr := retryHeader(k.call.MCPContext.Header, in.State, answers)
		if herr != nil {
			return taskOutcome(k.r.Tool, k.m, nil, herr)
		}
		k.call.MCPContext.Header = header
	}
}

// askedInput reads a tool's own input_required result: its requests and state.
func askedInput(reply *wire.Reply, err error) (calls.Input, bool) {
	if err != nil || reply == nil || !reply.MCPResult {
		return calls.Input{}, false
	}
	fields, ok := resultOfType(json.RawMessage(reply.Data), "input_required")
	if !ok {
		return calls.Input{}, false
	}
	var in calls.Input
	if json.Unmarshal(fields["inputRequests"], &in.Requests) != nil || len(in.Requests) == 0 {
		return calls.Input{}, false
	}
	_ = json.Unmarshal(fields["requestState"], &in.State)
	return in, true
}

// retryHeader is the header of a task's next call to its tool: base's revision, the
// tool's requestState and the client's answers, as a client's retry carries them.
func retryHeader(base nats.Header, state string, answers map[string]json.RawMessage) (nats.Header, error) {
	h := nats.Header{}
	maps.Copy(h, base)
	h.Del(wire.HeaderRequestState)
	if state != "" {
		h.Set(wire.HeaderRequestState, state)
	}
	b, err := json.Marshal(answers)
	if err != nil {
		return nil, err
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, b); err != nil {
		return nil, err
	}
	h.Set(wire.HeaderInputResponses, compact.String())
	return h, nil
}

// adoptKeptTasks lets this edge finish the kept tasks an edge that died left working,
// from their tools' stored answers (calls.Calls.Adopt): an answer that asks the
// client for input ends nothing, since only the edge running the task could call the
// tool again.
func (s *Server) adoptKeptTasks() {
	s.cfg.Tasks.Adopt(s.storedAnswer, calls.ProtocolMCP, func(ctx context.Context, rec *calls.Record, reply *wire.Reply, err error) (calls.Outcome, bool) {
		if err == nil { // a large answer names its payload, read whole here
			c := &gateway.Call{Tool: rec.Tool, Principal: registry.Principal{Account: rec.Account}}
			if reply, err = s.gw.PeekReply(ctx, c, reply); errors.Is(err, gateway.ErrPayloadUnread) {
				return calls.Outcome{}, false // gone: the edge running the task took it
			}
		}
		if _, asks := askedInput(reply, err); asks {
			return calls.Outcome{}, false
		}
		m := &registry.Method{Name: rec.Method}
		if t := s.view.Snapshot().RawTool(rec.Tool); t != nil {
			if found := t.Method(rec.Method); found != nil {
				m = found.Method
			}
		}
		return taskOutcome(rec.Tool, m, reply, err), true
	})
}

// storedAnswer is the last answer a tool sent on the reply subject an edge stores
// (wire.Subjects.StreamAnswer): nil when none is stored.
func (s *Server) storedAnswer(ctx context.Context, tool, session, post string) (*nats.Msg, error) {
	msg, err := s.events.Last(ctx, s.subj.StreamAnswerLogged(tool, session, post))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &nats.Msg{Subject: msg.Subject, Header: msg.Header, Data: msg.Data}, nil
}
