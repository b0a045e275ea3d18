package dashboard

import (
	"net/http"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/registry"
)

// record writes a change the dashboard made on the audit trail, as the admin API
// writes its own: rec says what changed (its action, and the key, tool or client),
// and record adds the account, who made it (By: the key or user signed in), the
// request's id and trace, and the dashboard as the door. Nothing is written when the
// edge keeps no trail.
func (d *Dashboard) record(w http.ResponseWriter, r *http.Request, v *visit, rec audit.Record) {
	t := d.gw.Audit()
	if t == nil {
		return
	}
	rec.Account, rec.By = v.principal.Account, changedBy(v.principal)
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	id := w.Header().Get("X-Request-Id") // the edge names every request
	if id == "" {
		id = registry.NewID("req_")
	}
	_ = t.Write(audit.Admin(r.Context(), rec, audit.TransportDashboard, id)) // the change is made: a record lost is counted
}

// changedBy names the principal of a dashboard session as an audit record's By.
func changedBy(p registry.Principal) string {
	if p.Key != nil {
		return "key:" + p.Key.ID
	}
	return "user:" + p.User
}
