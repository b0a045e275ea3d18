package dashboard

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// tryResult is the try-it form's answer of a call that ended with reply or err, as an
// HTTP caller would have seen it.
func (d *Dashboard) tryResult(call *gateway.Call, reply *wire.Reply, err error) *callResult {
	res := &callResult{RequestID: call.RequestID}
	if err != nil {
		status, env, retry := edge.ErrorAnswer(err, call.RequestID)
		b, _ := json.MarshalIndent(env, "", "  ")
		res.Status, res.ContentType, res.Body, res.Failed = status, "application/json", string(b), true
		if retry > 0 {
			res.RetryAfter = edge.RetryAfterSeconds(retry)
		}
		if status == http.StatusInternalServerError {
			d.log.Error("dashboard: try-it call", "tool", call.Tool, "method", call.Method, "request_id", call.RequestID, "err", err)
		}
		return res
	}
	res.Status, res.ContentType = reply.Status, reply.ContentType
	res.Body, res.Note = showBody(reply.Data, reply.ContentType)
	res.Failed = reply.Status >= 400
	return res
}

// tryHeld starts a try-it call that its account's rules hold for a person's
// approval, when it is one (held), rather than keep the page waiting until the
// approval expires: checked now (a refusal is shown as any), its approval asked for,
// it waits for the decision on this edge past the page's request and runs once
// approved, its end recorded in the audit trail (the Calls page). The page answers
// 202 with the approval's id. Without approvals on this edge the gateway refuses it,
// as it refuses any held call there.
func (d *Dashboard) tryHeld(ctx context.Context, call *gateway.Call) (*callResult, bool) {
	rule, held := d.gw.ApprovalRule(call)
	if !held || d.cfg.Approvals == nil {
		return nil, false
	}
	asSent := call.Params
	m, err := d.gw.Check(ctx, call)
	if err != nil {
		return d.tryResult(call, nil, d.gw.Refuse(ctx, call, err)), true
	}
	approval, err := d.cfg.Approvals.Ask(ctx, call, rule)
	if err != nil {
		_ = d.gw.Answered(ctx, call, asSent, nil, err)
		return d.tryResult(call, nil, err), true
	}
	call.CallID = registry.NewID("try-")
	go d.runHeld(call, m, approval, asSent)
	return &callResult{Status: http.StatusAccepted, RequestID: call.RequestID, Approval: approval.ID}, true
}

// runHeld waits for the decision on a try-it call's approval and runs it once
// approved, until the approval's expiry and the call's timeout after it. Its end is
// the audit trail's.
func (d *Dashboard) runHeld(call *gateway.Call, m *registry.MethodEntry, approval *approvals.Record, asSent []byte) {
	timeout := d.gw.Timeout(m.Method, 0)
	ctx, cancel := context.WithDeadline(context.Background(), approval.ExpiresAt.Add(timeout))
	defer cancel()
	var reply *wire.Reply
	err := d.cfg.Approvals.Cleared(ctx, d.gw, approval, call)
	if err == nil {
		reply, err = d.gw.Send(ctx, call, m, timeout)
	}
	if aerr := d.gw.Answered(ctx, call, asSent, reply, err); aerr != nil {
		d.log.Warn("dashboard: recording a held try-it call", "request_id", call.RequestID, "err", aerr)
	}
}
