package dashboard

import (
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
)

// The approvals page: the calls of the account that wait for a person's approval
// (package approvals), each with its arguments and an Approve and a Deny button. The
// signed-in key decides for its account only, and, when it is limited to some tools,
// for those tools' calls only.

type approvalsView struct {
	Pending []approvals.Record
	Decided *approvals.Record // the decision just made
	Error   string
}

// decider is the visit's key deciding for its account.
func (v *visit) decider() approvals.Decider {
	return approvals.Decider{Account: v.principal.Account, KeyID: v.keyID(), Transport: audit.TransportDashboard}
}

// mayDecide: a key limited to some tools decides their calls only; a user signed in
// without a key decides none (an approval names the key that decided it).
func (v *visit) mayDecide(r approvals.Record) bool {
	k := v.principal.Key
	return k != nil && (len(k.Scopes) == 0 || slices.Contains(k.Scopes, r.Tool))
}

func (d *Dashboard) approvalsView(w http.ResponseWriter, r *http.Request, v *visit) (*approvalsView, bool) {
	list, err := d.cfg.Approvals.Pending(r.Context(), v.decider(), v.principal.Account)
	if err != nil {
		d.log.Error("dashboard: approvals", "account", v.principal.Account, "err", err)
		d.fail(w, r, v, http.StatusServiceUnavailable, "The approvals cannot be read right now. Try again in a moment.")
		return nil, false
	}
	av := &approvalsView{}
	for _, a := range list {
		if v.mayDecide(a) {
			av.Pending = append(av.Pending, a)
		}
	}
	return av, true
}

func (d *Dashboard) approvalsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	av, ok := d.approvalsView(w, r, v)
	if !ok {
		return
	}
	d.render(w, http.StatusOK, "approvals", d.page(v, "Approvals", "approvals", av))
}

// decide approves or denies one of the account's pending calls, once.
func (d *Dashboard) decide(w http.ResponseWriter, r *http.Request, v *visit) {
	decision := r.PostForm.Get("decision")
	if decision != "approve" && decision != "deny" {
		d.fail(w, r, v, http.StatusBadRequest, "Choose Approve or Deny.")
		return
	}
	id := r.PathValue("id")
	rec, err := d.cfg.Approvals.Get(r.Context(), v.decider(), id)
	if err == nil && !v.mayDecide(*rec) {
		err = gateway.Fail(gateway.KindNotFound, "")
	}
	if err == nil {
		rec, err = d.cfg.Approvals.Decide(r.Context(), v.decider(), id, decision == "approve", strings.TrimSpace(r.PostForm.Get("reason")))
	}
	var f *gateway.Error
	switch {
	case errors.As(err, &f) && f.Kind == gateway.KindNotFound:
		d.fail(w, r, v, http.StatusNotFound, "There is no such approval on this account.")
		return
	case errors.As(err, &f):
		d.fail(w, r, v, f.Kind.Status, "The call could not be decided: "+f.Error())
		return
	case err != nil:
		d.log.Error("dashboard: decide an approval", "approval", id, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The call could not be decided. Try again.")
		return
	}
	d.log.Info("dashboard: approval decided", "account", rec.Account, "approval", rec.ID, "decision", rec.Decision, "key_id", v.keyID())
	av, ok := d.approvalsView(w, r, v)
	if !ok {
		return
	}
	av.Decided = rec
	d.render(w, http.StatusOK, "approvals", d.page(v, "Approvals", "approvals", av))
}
