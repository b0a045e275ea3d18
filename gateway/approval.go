package gateway

import (
	"context"
	"encoding/json"
	"slices"

	"github.com/toolgate/toolgate/registry"
)

// Approver holds a call its account's rules keep for a person's approval
// (registry.ApprovalRule) until the decision: nil once approved (the call then runs,
// once), else the failure its caller reads. Package approvals is the one.
type Approver interface {
	Hold(ctx context.Context, c *Call, rule registry.ApprovalRule) error
}

// WithApprovals holds the calls that need approval with a. Without it, such a call
// is refused: a rule that asks for a person is never skipped.
func WithApprovals(a Approver) Option {
	return func(g *Gateway) { g.approver = a }
}

// ApprovalRule is the rule of c's account that asks for approval of c, if any.
func (g *Gateway) ApprovalRule(c *Call) (registry.ApprovalRule, bool) {
	a := g.view.Snapshot().Account(c.Principal.Account)
	if a == nil {
		return registry.ApprovalRule{}, false
	}
	return a.Limits.ApprovalRuleFor(c.Tool, c.Method)
}

// ErrNoApprovals refuses a call that needs approval on an edge that holds none.
var ErrNoApprovals = Fail(KindToolUnavailable, "the call needs a person's approval, and this edge takes no approvals")

// hold waits for the approval c needs, if it needs one (the calls that wait in their
// request: an MCP tools/call; a REST call needing one is answered 202 before it).
func (g *Gateway) hold(ctx context.Context, c *Call) error {
	rule, ok := g.ApprovalRule(c)
	if !ok {
		return nil
	}
	if g.approver == nil {
		return ErrNoApprovals
	}
	if err := g.approver.Hold(ctx, c, rule); err != nil {
		return err
	}
	return g.RecheckApproval(c, rule.Version())
}

// RecheckApproval is nil when c, just approved under its account's rule as it was at
// version, may run: the rule that holds c now is the same, or no rule holds it any
// more (the person approved it, and nothing asks for more). A rule changed since
// (another expiry, another tool or method matching) is another policy: an approval
// given under the old one does not count under it, and the call fails with
// approval_expired, its approval used up; the caller calls again for a new one.
func (g *Gateway) RecheckApproval(c *Call, version string) error {
	rule, ok := g.ApprovalRule(c)
	if !ok || rule.Version() == version {
		return nil
	}
	return Fail(KindApprovalExpired, "the account's approval rule for %s/%s changed after the call's approval was asked for: call it again for an approval under the rule as it is", c.Tool, c.Method)
}

// holdForwarded holds a tools/call a session forwards as the client sent it (a
// task-augmented call of a bridged server), as the gateway's own tools/call is held:
// the rule and the approval are of the tool's method it names and its arguments. A
// call whose params do not say which is held under the method "" too, so that no
// rule of the tool's every method is passed by.
func (g *Gateway) holdForwarded(ctx context.Context, c *Call) error {
	if c.Method != "tools/call" {
		return nil
	}
	a := g.view.Snapshot().Account(c.Principal.Account)
	if a == nil || !slices.ContainsFunc(a.Limits.Approvals, func(r registry.ApprovalRule) bool { return r.Tool == c.Tool }) {
		return nil // no rule of the tool's holds any of its methods: the params need no reading
	}
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(c.Params, &p) // the worker judges the params; the rule needs the name only
	held := *c
	held.Method, held.Params = p.Name, p.Arguments
	if len(held.Params) == 0 || string(held.Params) == "null" {
		held.Params = []byte("{}")
	}
	return g.hold(ctx, &held)
}
