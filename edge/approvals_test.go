package edge_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestApprovalRulesOnTheAccount: PATCH /admin/accounts/{id} sets an account's approval
// rules as it sets its quotas; a bad rule is a 400 naming it and changes nothing; a
// wait longer than the deployment's maximum is refused.
func TestApprovalRulesOnTheAccount(t *testing.T) {
	e := newEnv(t, withApprovals(func(c *approvals.Config) { c.MaxExpiry = time.Hour }))
	e.admin(http.MethodPost, "/accounts", `{"id":"acme"}`)
	for _, bad := range []struct{ body, pointer string }{
		{`{"limits":{"approvals":[{"tool":"email","method":"send_email","expires_in":3601}]}}`, "/limits/approvals/0/expires_in"},
		{`{"limits":{"approvals":[{"tool":"email","method":"send_email","expires_in":-1}]}}`, "/limits/approvals/0/expires_in"},
		{`{"limits":{"approvals":[{"tool":"Email!","method":"*"}]}}`, "/limits/approvals/0/tool"},
		{`{"limits":{"approvals":[{"tool":"email","method":"send email"}]}}`, "/limits/approvals/0/method"},
		{`{"limits":{"approvals":[{"tool":"email","method":"*"},{"tool":"email","method":"*"}]}}`, "/limits/approvals/1"},
		{`{"limits":{"approvals":[{"tool":"email","method":"*","expires":60}]}}`, "/limits/approvals/0/expires"},
		{`{"limits":{"approvals":[{"tool":"email","method":"*","expires_in":"1m"}]}}`, "/limits/approvals/0/expires_in"},
	} {
		got := e.admin(http.MethodPatch, "/accounts/acme", bad.body).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
		if !jsonContains(got.Details, `"pointer":"`+bad.pointer+`"`) {
			t.Fatalf("%s: details %+v do not name %s", bad.body, got.Details, bad.pointer)
		}
	}
	if a := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); len(a.Limits.Approvals) != 0 {
		t.Fatalf("refused rules were kept: %+v", a.Limits)
	}
	r := e.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"approvals":[{"tool":"email","method":"send_email","expires_in":3600},{"tool":"github","method":"*"}]}}`)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	want := []registry.ApprovalRule{{Tool: "email", Method: "send_email", ExpiresIn: 3600}, {Tool: "github", Method: "*"}}
	if a := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); !equalRules(a.Limits.Approvals, want) {
		t.Fatalf("rules %+v, want %+v", a.Limits.Approvals, want)
	}
	testenv.WaitFor(t, "the edge's view has the rules", func() bool {
		_, ok := e.gw.ApprovalRule(&gateway.Call{Principal: registry.Principal{Account: "acme"}, Tool: "github", Method: "delete_repo"})
		return ok
	})
	e.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"approvals":null}}`)
	if a := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); len(a.Limits.Approvals) != 0 {
		t.Fatalf("null left rules: %+v", a.Limits)
	}
}

func equalRules(a, b []registry.ApprovalRule) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// approvalEnv is an edge with the email tool, counting the sends it is asked for,
// and account acme whose rule holds send_email for approval.
type approvalEnv struct {
	*env
	key   string
	sends atomic.Int64
}

func newApprovalEnv(t *testing.T, expiresIn int) *approvalEnv {
	a := &approvalEnv{env: newEnv(t, withAudit())}
	a.serve(emailTool, func(_ string, m *nats.Msg) {
		a.sends.Add(1)
		respond(m, 0, "application/json", []byte(`{"id":"msg_1"}`))
	})
	a.key = a.account("acme", registry.Limits{Approvals: []registry.ApprovalRule{{Tool: "email", Method: "send_email", ExpiresIn: expiresIn}}})
	a.connect("acme", "email")
	return a
}

// held makes a call that waits for approval, checks the 202, and returns its status.
func (a *approvalEnv) held(t *testing.T, body string) edge.CallStatus {
	t.Helper()
	r := a.call(a.key, "email", "send_email", body)
	if r.status != http.StatusAccepted || r.header.Get(edge.HeaderCallStatus) != string(calls.AwaitingApproval) {
		t.Fatalf("status %d (%s), want 202 (awaiting_approval); body %s", r.status, r.header.Get(edge.HeaderCallStatus), r.body)
	}
	st := decode[edge.CallStatus](t, r)
	if st.Status != calls.AwaitingApproval || !strings.HasPrefix(st.Approval, "apr_") || r.header.Get("Location") != "/calls/"+st.ID {
		t.Fatalf("status %+v, Location %q", st, r.header.Get("Location"))
	}
	return st
}

func (a *approvalEnv) decide(id, decision string) result {
	return a.admin(http.MethodPost, "/approvals/"+id, `{"decision":"`+decision+`","reason":"checked"}`)
}

// TestApprovalOverREST: a call the account's rule holds is answered 202 and waits,
// unsent, until approved through the admin API; it then runs once and its record
// answers as the synchronous call would. Other arguments are another approval; a
// second decision is refused; a denied call fails with approval_denied.
func TestApprovalOverREST(t *testing.T) {
	a := newApprovalEnv(t, 0)
	st := a.held(t, goodEmail)
	if r := a.do(http.MethodGet, "/calls/"+st.ID, "", "SERVICE_API_KEY", a.key); r.status != http.StatusAccepted ||
		r.header.Get(edge.HeaderCallStatus) != string(calls.AwaitingApproval) {
		t.Fatalf("GET while it waits: %d %s", r.status, r.header.Get(edge.HeaderCallStatus))
	}
	list := decode[edge.ApprovalList](t, a.admin(http.MethodGet, "/approvals?account=acme", ""))
	if len(list.Approvals) != 1 || list.Approvals[0].ID != st.Approval || list.Approvals[0].Decision != approvals.Pending {
		t.Fatalf("pending approvals %+v, want %s", list.Approvals, st.Approval)
	}
	digest, _ := approvals.Digest([]byte(`{"body":"hello","subject":"hi","to":"ada@example.com"}`))
	if got := list.Approvals[0]; got.ArgsSHA256 != digest || got.Tool != "email" || got.Method != "send_email" || got.KeyID == "" || got.PolicyVersion == "" {
		t.Fatalf("approval %+v, want bound to the call (digest %s)", got, digest)
	}
	if n := a.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls before approval", n)
	}
	other := a.held(t, `{"to":"bob@example.com","subject":"hi","body":"hello"}`)
	if other.Approval == st.Approval {
		t.Fatal("other arguments share the approval")
	}

	if r := a.decide(st.Approval, "approve"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	r := a.readCall(t, a.key, st.ID, "the approved call ends", ended)
	if r.status != http.StatusOK || string(r.body) != `{"id":"msg_1"}` || r.header.Get(edge.HeaderCallStatus) != string(calls.Completed) {
		t.Fatalf("the approved call: %d %s %s", r.status, r.header.Get(edge.HeaderCallStatus), r.body)
	}
	if n := a.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1: the other arguments wait for their own approval", n)
	}
	a.decide(st.Approval, "deny").expect(t, http.StatusConflict, edge.CodeConflict)
	a.decide(st.Approval, "approve").expect(t, http.StatusConflict, edge.CodeConflict)

	if r := a.decide(other.Approval, "deny"); r.status != http.StatusOK {
		t.Fatalf("deny: %d %s", r.status, r.body)
	}
	r = a.readCall(t, a.key, other.ID, "the denied call ends", ended)
	failedCall(t, r, http.StatusForbidden, calls.Failed, gateway.CodeApprovalDenied, decode[edge.Envelope](t, r).Error.RequestID)
	if n := a.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1", n)
	}
	list = decode[edge.ApprovalList](t, a.admin(http.MethodGet, "/approvals", ""))
	if len(list.Approvals) != 0 {
		t.Fatalf("decided approvals still pending: %+v", list.Approvals)
	}
	a.decide("apr_nosuch", "approve").expect(t, http.StatusNotFound, edge.CodeNotFound)
	a.admin(http.MethodPost, "/approvals/"+st.Approval, `{"decision":"maybe"}`).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
	a.admin(http.MethodPost, "/approvals/"+st.Approval, `{"decision":"approve","extra":1}`).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
	a.do(http.MethodGet, "/admin/approvals", "", "Authorization", "Bearer "+a.key).expect(t, http.StatusUnauthorized, edge.CodeUnauthenticated)
}

// TestApprovalExpires: a call nobody decides on fails at its rule's expiry with
// approval_expired, unsent, and can no longer be approved.
func TestApprovalExpires(t *testing.T) {
	a := newApprovalEnv(t, 1)
	st := a.held(t, goodEmail)
	r := a.readCall(t, a.key, st.ID, "the call's approval expires", ended)
	failedCall(t, r, http.StatusGone, calls.Failed, gateway.CodeApprovalExpired, decode[edge.Envelope](t, r).Error.RequestID)
	a.decide(st.Approval, "approve").expect(t, http.StatusGone, gateway.CodeApprovalExpired)
	if n := a.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls, want none", n)
	}
}

// TestApprovalDecisionsAreAudited: the audit trail names who approved (the admin key)
// and who denied; a call held through the direct tool API waits as one through
// /tool-call does; a call cancelled while it waits withdraws its approval, which can
// then be decided no more.
func TestApprovalDecisionsAreAudited(t *testing.T) {
	a := newApprovalEnv(t, 0)
	st := a.held(t, goodEmail)
	r := a.do(http.MethodPost, "/tools/email/send_email", `{"to":"eve@example.com","subject":"hi","body":"x"}`, "SERVICE_API_KEY", a.key)
	direct := decode[edge.CallStatus](t, r)
	if r.status != http.StatusAccepted || direct.Status != calls.AwaitingApproval {
		t.Fatalf("the direct tool API: %d %s", r.status, r.body)
	}
	a.decide(st.Approval, "approve")
	a.decide(direct.Approval, "deny")
	for _, want := range []struct{ method, id string }{{approvals.ActionApprove, st.Approval}, {approvals.ActionDeny, direct.Approval}} {
		testenv.WaitFor(t, "the trail holds "+want.method, func() bool {
			r := a.admin(http.MethodGet, "/audit?kind=admin&method="+want.method, "")
			return r.status == http.StatusOK && strings.Contains(string(r.body), `"key":"admin"`) &&
				strings.Contains(string(r.body), `"request_id":"`+want.id+`"`) && strings.Contains(string(r.body), `"account":"acme"`)
		})
	}

	waiting := a.held(t, `{"to":"fay@example.com","subject":"hi","body":"x"}`)
	if r := a.do(http.MethodDelete, "/calls/"+waiting.ID, "", "SERVICE_API_KEY", a.key); r.status != http.StatusOK {
		t.Fatalf("cancel a waiting call: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the cancelled call's approval is withdrawn", func() bool {
		r := a.admin(http.MethodGet, "/approvals/"+waiting.Approval, "")
		return strings.Contains(string(r.body), `"decision":"withdrawn"`)
	})
	a.decide(waiting.Approval, "approve").expect(t, http.StatusConflict, edge.CodeConflict)
	if n := a.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want the approved one", n)
	}
}

// TestApprovalAcrossEdges: a call held on one edge is approved through another and
// read through it; a rule removed through one edge stops holding calls on the other.
func TestApprovalAcrossEdges(t *testing.T) {
	a := newApprovalEnv(t, 0)
	b := newEnv(t, onServer(a.srv.ClientURL()))
	st := a.held(t, goodEmail)
	if r := b.admin(http.MethodPost, "/approvals/"+st.Approval, `{"decision":"approve"}`); r.status != http.StatusOK {
		t.Fatalf("approve through the other edge: %d %s", r.status, r.body)
	}
	if r := b.readCall(t, a.key, st.ID, "the call ends", ended); r.status != http.StatusOK || a.sends.Load() != 1 {
		t.Fatalf("read through the other edge: %d %s; %d sent", r.status, r.body, a.sends.Load())
	}
	if r := b.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"approvals":null}}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the first edge no longer holds the call", func() bool {
		return a.call(a.key, "email", "send_email", goodEmail).status == http.StatusOK
	})
}

// TestApprovalUnderAChangedRule: an approval is bound to the version of the rule that
// asked for it. A call approved after its rule changed (another expiry) does not run:
// it fails with approval_expired. A call approved after its rule was removed runs:
// nothing asks for more than the approval it has.
func TestApprovalUnderAChangedRule(t *testing.T) {
	a := newApprovalEnv(t, 0)
	patch := func(rules string, want []registry.ApprovalRule) {
		t.Helper()
		if r := a.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"approvals":`+rules+`}}`); r.status != http.StatusOK {
			t.Fatalf("PATCH: %d %s", r.status, r.body)
		}
		testenv.WaitFor(t, "the edge sees the account's rules", func() bool {
			got := a.view.Snapshot().Account("acme").Limits.Approvals
			return len(got) == len(want) && (len(got) == 0 || equalRules(got, want))
		})
	}

	changed := a.held(t, goodEmail)
	patch(`[{"tool":"email","method":"send_email","expires_in":600}]`, []registry.ApprovalRule{{Tool: "email", Method: "send_email", ExpiresIn: 600}})
	if r := a.decide(changed.Approval, "approve"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	r := a.readCall(t, a.key, changed.ID, "the call approved under the old rule ends", ended)
	failedCall(t, r, http.StatusGone, calls.Failed, gateway.CodeApprovalExpired, decode[edge.Envelope](t, r).Error.RequestID)
	if !strings.Contains(string(r.body), "rule") {
		t.Fatalf("the failure does not say the rule changed: %s", r.body)
	}
	if n := a.sends.Load(); n != 0 {
		t.Fatalf("the tool was sent %d calls, want none", n)
	}

	removed := a.held(t, goodEmail)
	patch(`[]`, nil)
	if r := a.decide(removed.Approval, "approve"); r.status != http.StatusOK {
		t.Fatalf("approve: %d %s", r.status, r.body)
	}
	r = a.readCall(t, a.key, removed.ID, "the call approved after its rule was removed ends", ended)
	if r.status != http.StatusOK || string(r.body) != `{"id":"msg_1"}` {
		t.Fatalf("the call approved after its rule was removed: %d %s", r.status, r.body)
	}
	if n := a.sends.Load(); n != 1 {
		t.Fatalf("the tool was sent %d calls, want 1", n)
	}
}
