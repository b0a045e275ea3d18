package edge

import (
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// The calls an account's rules hold for a person's approval (package approvals): over
// REST and the direct tool API such a call is answered 202 at once, as a call made
// with Prefer: respond-async, and runs, on the edge that took it, once approved. An
// administrator lists and decides the pending ones here; the account's own key holder
// decides its account's on the dashboard.

// ApprovalList is the answer of GET /admin/approvals.
type ApprovalList struct {
	Approvals []approvals.Record `json:"approvals"`
}

// ApprovalDecision is the body of POST /admin/approvals/{id}.
type ApprovalDecision struct {
	Decision string `json:"decision"` // "approve" or "deny"
	Reason   string `json:"reason,omitempty"`
}

// The decisions a body may name.
const (
	DecisionApprove = "approve"
	DecisionDeny    = "deny"
)

var errApprovalsOff = newHTTPError(gateway.KindNotFound, "this edge takes no approvals")

func (e *Edge) approvalRoutes(g *gin.RouterGroup) {
	g.GET("/approvals", e.listApprovals)
	g.GET("/approvals/:id", e.getApproval)
	g.POST("/approvals/:id", e.decideApproval)
}

func (e *Edge) adminDecider(c *gin.Context) approvals.Decider {
	return approvals.Decider{Transport: audit.TransportAdmin, RequestID: requestID(c)}
}

// listApprovals answers GET /admin/approvals: the approvals waiting for a decision,
// of one account with ?account=ID, oldest first.
func (e *Edge) listApprovals(c *gin.Context) {
	if e.cfg.Approvals == nil {
		e.fail(c, errApprovalsOff)
		return
	}
	account := c.Query("account")
	if account != "" && checkID(nil, "", account) != nil {
		e.fail(c, invalidInput([]registry.Violation{{Pointer: "/account", Message: "must be an account id"}}))
		return
	}
	list, err := e.cfg.Approvals.Pending(c.Request.Context(), e.adminDecider(c), account)
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, ApprovalList{Approvals: list})
}

func (e *Edge) getApproval(c *gin.Context) {
	if e.cfg.Approvals == nil {
		e.fail(c, errApprovalsOff)
		return
	}
	r, err := e.cfg.Approvals.Get(c.Request.Context(), e.adminDecider(c), c.Param("id"))
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

// decideApproval answers POST /admin/approvals/{id}: approve or deny, once.
func (e *Edge) decideApproval(c *gin.Context) {
	if e.cfg.Approvals == nil {
		e.fail(c, errApprovalsOff)
		return
	}
	var body ApprovalDecision
	if err := decodeStrict(c.Request.Body, &body); err != nil {
		e.fail(c, err)
		return
	}
	if body.Decision != DecisionApprove && body.Decision != DecisionDeny {
		e.fail(c, invalidInput([]registry.Violation{{Pointer: "/decision", Message: `must be "approve" or "deny"`}}))
		return
	}
	r, err := e.cfg.Approvals.Decide(c.Request.Context(), e.adminDecider(c), c.Param("id"), body.Decision == DecisionApprove, body.Reason)
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, r)
}

// approvalMax is the longest wait a rule may ask for on this edge.
func (e *Edge) approvalMax() time.Duration {
	if e.cfg.Approvals == nil {
		return approvals.DefaultMaxExpiry
	}
	return e.cfg.Approvals.Config().MaxExpiry
}
