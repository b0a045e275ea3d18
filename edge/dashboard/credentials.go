package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/registry"
)

// credentialsView is the connection of a tool whose connection needs fields (a
// token, an API key), as its account's key holder sees and sets it: the state, and
// of each field its name, what it is, whether and when it is set and its value's
// fingerprint. Never a value: the form's inputs start empty.
type credentialsView struct {
	State   string // edge.ConnectionReady, ConnectionNeedsCredentials, ConnectionNeedsReauth
	Missing []string
	Fields  []credentialField
	Saved   []string // the fields the form just set, from the redirect's query
}

type credentialField struct {
	Name, Description string
	Secret, Optional  bool
	Set               bool
	SetAt             string
	Fingerprint       string
}

// sets reports whether the account's key holder sets t's connection fields here:
// the tool declares some, and this edge holds the connections' credentials.
func (d *Dashboard) sets(t *registry.Tool) bool {
	return d.cfg.Connector != nil && t.Connection != nil && len(t.Connection.Fields) > 0
}

// credentials is account's connection to t as the page shows it.
func (d *Dashboard) credentials(ctx context.Context, account string, t *registry.Tool) *credentialsView {
	r, _, err := d.cfg.Connector.Lookup(ctx, account, t)
	if err != nil {
		d.log.Warn("dashboard: a connection's record", "tool", t.ID, "err", err)
	}
	st := edge.StateOf(t, r)
	cv := &credentialsView{State: st.State, Missing: st.Missing}
	for _, f := range t.Connection.Fields {
		cf := credentialField{Name: f.Name, Description: f.Description, Secret: f.Secret, Optional: f.Optional}
		if r != nil {
			if st, ok := r.Fields[f.Name]; ok {
				cf.Set, cf.SetAt, cf.Fingerprint = true, formatDate(st.SetAt), st.Fingerprint
			}
		}
		cv.Fields = append(cv.Fields, cf)
	}
	return cv
}

// savedFields reads the fields a save named in its redirect (`?saved=token,user`),
// keeping only the tool's own field names, in the tool's order.
func savedFields(t *registry.Tool, q string) []string {
	if q == "" {
		return nil
	}
	named := strings.Split(q, ",")
	var saved []string
	for _, f := range t.Connection.Fields {
		if slices.Contains(named, f.Name) {
			saved = append(saved, f.Name)
		}
	}
	return saved
}

// setCredentials sets the fields the form filled in of the signed-in account's
// connection to a tool; a field left empty keeps its value. The values go to the
// vault only: no log line, page or error names one.
func (d *Dashboard) setCredentials(w http.ResponseWriter, r *http.Request, v *visit) {
	t, _, ok := d.tool(w, r, v)
	if !ok {
		return
	}
	if !d.sets(t.Tool) {
		d.fail(w, r, v, http.StatusNotFound, "This tool's connection has no fields to set here.")
		return
	}
	values := map[string]*string{}
	var names []string
	for _, f := range t.Tool.Connection.Fields {
		if val := r.PostForm.Get(f.Name); val != "" {
			values[f.Name] = &val
			names = append(names, f.Name)
		}
	}
	if len(values) == 0 {
		d.fail(w, r, v, http.StatusBadRequest, "Fill in at least one field: a field left empty keeps its value.")
		return
	}
	_, err := d.cfg.Connector.Update(r.Context(), v.principal.Account, t.Tool.ID, t.Tool.Connection, values, false)
	for _, val := range values {
		*val = ""
	}
	if err != nil {
		d.log.Error("dashboard: set a connection's fields", "tool", t.Tool.ID, "fields", names, "err", err)
		d.fail(w, r, v, http.StatusInternalServerError, "The fields could not be saved; nothing changed. Try again.")
		return
	}
	slices.Sort(names)
	d.log.Info("dashboard: a connection's fields set", "account", v.principal.Account, "tool", t.Tool.ID, "fields", strings.Join(names, ","))
	d.record(w, r, v, audit.Record{Method: audit.ActionSetCredentials, Tool: t.Tool.ID})
	d.redirect(w, r, "tools/"+t.Tool.ID+"?saved="+url.QueryEscape(strings.Join(names, ",")))
}
