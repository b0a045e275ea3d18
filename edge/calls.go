package edge

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// The calls that outlive their request (package calls): a tool call sent with
// Prefer: respond-async is answered 202 at once, runs on this edge to its end, and is
// read (GET /calls/{id}) and cancelled (DELETE) through any edge.

// CallStatus is what the edge says of a call that outlives its request while it runs,
// and when it starts or is cancelled.
type CallStatus struct {
	ID        string          `json:"id"`
	Status    calls.Status    `json:"status"`
	Tool      string          `json:"tool"`
	Method    string          `json:"method"`
	CreatedAt time.Time       `json:"created_at"`
	Deadline  time.Time       `json:"deadline"`
	Progress  *calls.Progress `json:"progress,omitempty"`
	// Approval is the id of the approval the call waits for (or waited for).
	Approval string   `json:"approval,omitempty"`
	URLs     CallURLs `json:"urls"`
}

// CallURLs are where a call is read (GET) and cancelled (DELETE): the same address.
type CallURLs struct {
	Status string `json:"status"`
	Cancel string `json:"cancel"`
}

// HeaderCallStatus names the status of the call an answer of GET /calls/{id} is
// about, whatever the answer's own status (a tool may answer 202 itself).
const HeaderCallStatus = "Tg-Call-Status"

// respondAsync reports whether the request prefers an answer before the call ends
// (RFC 7240's respond-async).
func respondAsync(r *http.Request) bool {
	for _, v := range r.Header.Values("Prefer") {
		for _, pref := range strings.Split(v, ",") {
			name, _, _ := strings.Cut(pref, ";")
			name, _, _ = strings.Cut(name, "=")
			if strings.EqualFold(strings.TrimSpace(name), "respond-async") {
				return true
			}
		}
	}
	return false
}

// startCall checks call as a synchronous call is checked (a call refused is refused
// now, not recorded), then records it and runs it to its end whatever becomes of the
// request, and answers 202 with where to read it. It reports whether the call started.
func (e *Edge) startCall(c *gin.Context, call *gateway.Call) bool {
	ctx := c.Request.Context()
	asSent := call.Params
	m, err := e.gw.Check(ctx, call)
	if err != nil {
		e.fail(c, e.gw.Refuse(ctx, call, err))
		return false
	}
	// The request's buffer goes back to its pool: the call keeps copies, of what the
	// tool is sent and of what the caller sent (for the audit trail) when they differ.
	if bytes.Equal(asSent, call.Params) {
		call.Params = bytes.Clone(call.Params)
		asSent = call.Params
	} else {
		call.Params, asSent = bytes.Clone(call.Params), bytes.Clone(asSent)
	}
	timeout := e.gw.AsyncTimeout(m.Method, call.Timeout)
	start := calls.Record{Tool: call.Tool, Method: call.Method, RequestID: call.RequestID, Deadline: time.Now().Add(timeout)}
	rec, err := approvals.StartCall(ctx, e.cfg.Approvals, e.gw, e.cfg.Calls, call, start, func(ctx context.Context, rec calls.Record) calls.Outcome {
		e.runsAs(call, rec)
		return e.runCall(ctx, call, m, timeout, asSent)
	}, func(ctx context.Context, rec calls.Record, err error) calls.Outcome {
		e.runsAs(call, rec)
		return e.endCall(ctx, call, asSent, err)
	})
	if err != nil {
		_ = e.gw.Answered(ctx, call, asSent, nil, err) // refused either way
		e.fail(c, err)
		return false
	}
	c.Header("Location", e.basePath+"/calls/"+rec.ID)
	if respondAsync(c.Request) {
		c.Header("Preference-Applied", "respond-async")
	}
	c.Header(HeaderCallStatus, string(rec.Status))
	c.Header("Retry-After", "1")
	c.JSON(http.StatusAccepted, e.callStatus(rec))
	return true
}

// runsAs makes call the call of rec: its id and reply subject on the bus are the
// record's, kept should this edge die, and its progress is recorded.
func (e *Edge) runsAs(call *gateway.Call, rec calls.Record) {
	call.CallID, call.Progress = rec.CallID, true
	call.MCPContext.ReplyTo = e.cfg.Calls.ReplyTo(rec)
}

// endCall ends a call that outlives its request before it was sent (its approval
// was denied or expired, or it was cancelled meanwhile) with err, as runCall would.
func (e *Edge) endCall(ctx context.Context, call *gateway.Call, asSent []byte, err error) calls.Outcome {
	if errors.Is(err, context.Canceled) {
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			err = cause
		}
	}
	e.gw.Answered(ctx, call, asSent, nil, err)
	out := e.callOutcome(nil, err, call.RequestID)
	t, mt := e.metricLabels(call.Tool, call.Method)
	e.metrics.observe(t, mt, cmp.Or(out.Answer.Code, "ok"), 0, 0)
	return out
}

// runCall sends a call that outlives its request and turns its end into the answer a
// synchronous call would have had. It counts in the edge's call metrics and the audit
// trail (asSent: the parameters as the caller sent them) as a call does.
func (e *Edge) runCall(ctx context.Context, call *gateway.Call, m *registry.MethodEntry, timeout time.Duration, asSent []byte) calls.Outcome {
	start := time.Now()
	e.metrics.inFlight.Inc()
	defer e.metrics.inFlight.Dec()
	reply, err := e.gw.Send(ctx, call, m, timeout)
	if err != nil && errors.Is(err, context.Canceled) {
		if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
			err = cause // cancelled by a DELETE, or the edge stopping
		}
	}
	if aerr := e.gw.Answered(ctx, call, asSent, reply, err); aerr != nil {
		reply, err = nil, aerr // the account requires the record it could not have
	}
	out := e.callOutcome(reply, err, call.RequestID)
	var toolTime time.Duration
	if reply != nil {
		toolTime = reply.Elapsed
	}
	t, mt := e.metricLabels(call.Tool, call.Method)
	e.metrics.observe(t, mt, cmp.Or(out.Answer.Code, "ok"), time.Since(start), toolTime)
	return out
}

// callOutcome is the answer a synchronous call with this reply or error would have
// had: the tool's status, content type and bytes, or the failure's envelope naming
// the request that started the call.
func (e *Edge) callOutcome(reply *wire.Reply, err error, requestID string) calls.Outcome {
	if err == nil {
		return calls.Outcome{Status: calls.Completed, Body: reply.Data,
			Answer: calls.Answer{Status: reply.Status, ContentType: reply.ContentType}}
	}
	status, env, retry := ErrorAnswer(err, requestID)
	body, merr := json.Marshal(env)
	if merr != nil {
		body, status = []byte(`{"error":{"code":"internal","message":"internal error"}}`), http.StatusInternalServerError
	}
	out := calls.Outcome{Status: calls.Failed, Body: body, Answer: calls.Answer{
		Status: status, ContentType: jsonUTF8, Code: env.Error.Code,
	}}
	if retry > 0 {
		out.Answer.RetryAfter = RetryAfterSeconds(retry)
	}
	return out
}

const jsonUTF8 = "application/json; charset=utf-8"

// adoptedOutcome is the outcome of a call another edge ran, from its worker's stored
// reply, as that edge would have recorded it; none when the reply names a payload
// that is gone (the edge running the call took it, and records the end itself).
func (e *Edge) adoptedOutcome(ctx context.Context, rec *calls.Record, reply *wire.Reply, err error) (calls.Outcome, bool) {
	if err == nil {
		c := &gateway.Call{Tool: rec.Tool, Principal: registry.Principal{Account: rec.Account}}
		if reply, err = e.gw.PeekReply(ctx, c, reply); errors.Is(err, gateway.ErrPayloadUnread) {
			return calls.Outcome{}, false
		}
	}
	return e.callOutcome(reply, err, rec.RequestID), true
}

func (e *Edge) callStatus(rec *calls.Record) CallStatus {
	u := e.base + "/calls/" + rec.ID
	return CallStatus{ID: rec.ID, Status: rec.Status, Tool: rec.Tool, Method: rec.Method,
		CreatedAt: rec.CreatedAt, Deadline: rec.Deadline, Progress: rec.Progress, Approval: rec.Approval,
		URLs: CallURLs{Status: u, Cancel: u}}
}

// getCall answers GET /calls/{id}: while the call runs, 202 and its status; once it
// ended, the answer the synchronous call would have had, its status in Tg-Call-Status.
func (e *Edge) getCall(c *gin.Context) {
	rec, body, err := e.cfg.Calls.Open(c.Request.Context(), principal(c), c.Param("id"))
	if err != nil {
		e.fail(c, err)
		return
	}
	if body != nil {
		defer body.Close()
	}
	switch {
	case rec.Overdue(time.Now()):
		// The edge running it stopped before it could record the end: the deadline has passed.
		e.answerCallFailure(c, calls.Failed, bus.ErrTimeout, rec.RequestID)
	case rec.Status.Active():
		c.Header(HeaderCallStatus, string(rec.Status))
		c.Header("Retry-After", "1")
		c.JSON(http.StatusAccepted, e.callStatus(rec))
	case rec.Status == calls.Cancelled:
		e.answerCallFailure(c, calls.Cancelled, gateway.Fail(gateway.KindCanceled, "the call was cancelled"), rec.RequestID)
	default:
		a := rec.Answer
		if a.RetryAfter > 0 {
			c.Header("Retry-After", strconv.Itoa(a.RetryAfter))
		}
		c.Header(HeaderCallStatus, string(rec.Status))
		if a.Code != "" {
			c.Set(ctxErrorCode, a.Code)
		}
		e.writeCallAnswer(c, rec, body)
	}
}

// writeCallAnswer writes the answer of the ended call rec, body, as it is read from
// where it is kept: a large one is never held whole. A body that breaks off midway
// aborts the answer, whose declared length then says it is short.
func (e *Edge) writeCallAnswer(c *gin.Context, rec *calls.Record, body io.Reader) {
	a := rec.Answer
	w := c.Writer
	toolAnswerHeaders(w.Header(), a.ContentType)
	w.Header()["Content-Length"] = []string{strconv.Itoa(a.Size)}
	w.WriteHeader(a.Status)
	if n, err := io.Copy(w, body); err != nil || n != int64(a.Size) {
		e.log.Warn("a call's answer not sent whole", "call", rec.ID, "sent", n, "size", a.Size, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// answerCallFailure answers a read of a call that ended with err, as the synchronous
// call would have been: its envelope names the request that started the call.
func (e *Edge) answerCallFailure(c *gin.Context, status calls.Status, err error, requestID string) {
	out := e.callOutcome(nil, err, requestID)
	if out.Answer.RetryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(out.Answer.RetryAfter))
	}
	c.Header(HeaderCallStatus, string(status))
	c.Set(ctxErrorCode, out.Answer.Code)
	writeToolAnswer(c.Writer, out.Answer.Status, out.Answer.ContentType, out.Body)
}

// cancelCall answers DELETE /calls/{id}: the call is cancelled, its worker told; a call
// that ended already is a 409.
func (e *Edge) cancelCall(c *gin.Context) {
	rec, err := e.cfg.Calls.Cancel(c.Request.Context(), principal(c), c.Param("id"))
	if errors.Is(err, calls.ErrEnded) {
		status := rec.Status
		if rec.Overdue(time.Now()) {
			status = calls.Failed
		}
		e.fail(c, gateway.Fail(gateway.KindConflict, "the call has ended already: %s", status))
		return
	}
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e.callStatus(rec))
}
