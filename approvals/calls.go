package approvals

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/gateway"
)

// A call that outlives its request (package calls: a REST call answered 202, an MCP
// task) and that its account's rules hold is not held in its request: its record
// says it awaits approval, and its run waits for the decision before it sends the
// call. Both the edge's REST calls and the MCP tasks start such calls here.

// StartCall starts call, which passed the gateway's checks, as a call that outlives
// its request (cs.Start with start: its tool, method, request id and deadline). When
// its account's rules hold it, the approval is asked for now, the record awaits it
// (its deadline moved past the approval's expiry by as long as the call may run),
// and run runs only once the call is approved, its approval claimed, and the rule
// that holds it still the one it was approved under (Gateway.RecheckApproval); denied,
// expired, withdrawn (the call cancelled), ended(ctx, rec, err) makes its outcome
// instead. a nil a refuses a held call (gateway.ErrNoApprovals). The approval of a
// call that could not be recorded is withdrawn.
func StartCall(ctx context.Context, a *Approvals, g *gateway.Gateway, cs *calls.Calls, call *gateway.Call,
	start calls.Record, run calls.Run, ended func(context.Context, calls.Record, error) calls.Outcome) (*calls.Record, error) {
	rule, held := g.ApprovalRule(call)
	if !held {
		return cs.Start(ctx, call.Principal, start, run)
	}
	if a == nil {
		return nil, gateway.ErrNoApprovals
	}
	runs := time.Until(start.Deadline)
	approval, err := a.Ask(ctx, call, rule)
	if err != nil {
		return nil, err
	}
	start.Status, start.Approval, start.Deadline = calls.AwaitingApproval, approval.ID, approval.ExpiresAt.Add(runs)
	rec, err := cs.Start(ctx, call.Principal, start, func(ctx context.Context, rec calls.Record) calls.Outcome {
		if err := a.Cleared(ctx, g, approval, call); err != nil {
			return ended(ctx, rec, err)
		}
		if err := cs.Approved(ctx, rec.ID); err != nil {
			return ended(ctx, rec, err)
		}
		return run(ctx, rec)
	})
	if err != nil {
		a.Withdraw(approval.ID) // asked for, but the call never started
		return nil, err
	}
	return rec, nil
}

// Cleared waits for the decision on approval, asked for call, and reports whether
// call may run now: approved, claimed (Await), and still under the rule version it
// was asked under (Gateway.RecheckApproval); else the failure its caller reads.
func (a *Approvals) Cleared(ctx context.Context, g *gateway.Gateway, approval *Record, call *gateway.Call) error {
	if err := a.Await(ctx, approval.ID, call); err != nil {
		return err
	}
	return g.RecheckApproval(call, approval.PolicyVersion)
}
