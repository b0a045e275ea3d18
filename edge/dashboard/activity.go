package dashboard

import (
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// CallsPageSize is how many calls the calls page shows at once.
const CallsPageSize = 50

// callsView is the calls page: the account's calls from the audit trail, newest first.
type callsView struct {
	Off      bool // the edge keeps no audit trail
	Error    string
	Filter   callsFilter
	Tools    []string // the account's tools, for the filter
	Outcomes []string // ok and every error code, for the filter
	Calls    []audit.Record
	Older    template.URL // the query of the next page, older calls; "" when there are none
	Newest   bool         // the page starts at the newest call
}

type callsFilter struct{ Tool, Method, Outcome, User string }

// Query is the filter's part of a URL's query.
func (f callsFilter) Query() template.URL { return f.query(0) }

// query is the filter's part of a URL's query, with before as the cursor: encoded
// here, so the template takes it as it is.
func (f callsFilter) query(before uint64) template.URL {
	q := url.Values{}
	for k, v := range map[string]string{"tool": f.Tool, "method": f.Method, "outcome": f.Outcome, "user": f.User} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	return template.URL(q.Encode())
}

// callsPage shows the signed-in account's calls, newest first, filtered by tool,
// method and outcome, a page at a time: the cursor ("before") is the stream sequence
// the admin API's cursor is. The account is the session's, never the request's.
func (d *Dashboard) callsPage(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayReadActivity(w, r, v) {
		return
	}
	q := r.URL.Query()
	cv := callsView{Filter: callsFilter{Tool: q.Get("tool"), Method: q.Get("method"), Outcome: q.Get("outcome"), User: q.Get("user")},
		Tools: d.accountTools(v), Outcomes: outcomes()}
	trail := d.gw.Audit()
	if trail == nil {
		cv.Off = true
		d.render(w, http.StatusOK, "calls", d.page(v, "Calls", "calls", cv))
		return
	}
	f := audit.Filter{Kind: audit.KindCall, Account: v.account.ID, Tool: cv.Filter.Tool, Method: cv.Filter.Method,
		Outcome: cv.Filter.Outcome, User: cv.Filter.User, Limit: CallsPageSize}
	var bad bool
	if s := q.Get("before"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		f.Before, bad = n, err != nil || n == 0
	}
	switch {
	case bad:
		cv.Error = "The page's position is not valid: start again from the newest calls."
	case f.Tool != "" && !wire.ValidToolID(f.Tool), len(f.Method) > 128:
		cv.Error = "There is no such tool or method."
	case f.User != "" && registry.CheckUserName(f.User) != nil:
		cv.Error = "There is no such user."
	case f.Outcome != "" && !slices.Contains(cv.Outcomes, f.Outcome):
		cv.Error = "There is no such outcome."
	}
	if cv.Error != "" {
		d.render(w, http.StatusBadRequest, "calls", d.page(v, "Calls", "calls", cv))
		return
	}
	page, err := trail.ReadBack(r.Context(), f)
	if err != nil {
		d.log.Error("dashboard: reading the audit trail", "account", v.account.ID, "err", err)
		d.fail(w, r, v, http.StatusServiceUnavailable, "The calls cannot be read right now. Try again in a moment.")
		return
	}
	cv.Calls, cv.Newest = page.Records, f.Before == 0
	if page.More {
		cv.Older = cv.Filter.query(page.Next)
	}
	d.render(w, http.StatusOK, "calls", d.page(v, "Calls", "calls", cv))
}

// usageView is the usage page: each quota rule's use in its current windows.
type usageView struct {
	At    time.Time
	Rules []registry.RuleUsage
}

// usagePage shows the signed-in account's use of its quotas, as GET /admin/usage.
func (d *Dashboard) usagePage(w http.ResponseWriter, r *http.Request, v *visit) {
	if !d.mayReadActivity(w, r, v) {
		return
	}
	uv := usageView{At: d.now()}
	var err error
	if uv.Rules, err = d.store.Usage(r.Context(), v.account, uv.At); err != nil {
		d.log.Error("dashboard: reading the quotas' use", "account", v.account.ID, "err", err)
		d.fail(w, r, v, http.StatusServiceUnavailable, "The usage cannot be read right now. Try again in a moment.")
		return
	}
	d.render(w, http.StatusOK, "usage", d.page(v, "Usage", "usage", uv))
}

// mayReadActivity refuses a visit whose key is limited to some tools: the calls and
// the usage are the whole account's. It reports whether the visit may go on.
func (d *Dashboard) mayReadActivity(w http.ResponseWriter, r *http.Request, v *visit) bool {
	if v.canManageKeys() && v.account != nil {
		return true
	}
	d.fail(w, r, v, http.StatusForbidden, "The key you signed in with is limited to some tools, so it cannot see the whole account's calls and usage. Sign in with a key that reaches every tool.")
	return false
}

// accountTools are the ids of the tools the account is connected to.
func (d *Dashboard) accountTools(v *visit) []string {
	var ids []string
	for _, c := range d.view.Snapshot().Connections(v.account.ID) {
		ids = append(ids, c.Tool)
	}
	return ids
}

// outcomes are ok and the error codes of the gateway's table, each once.
func outcomes() []string {
	out := []string{audit.OutcomeOK}
	for _, k := range gateway.Kinds {
		if !slices.Contains(out, k.Code) {
			out = append(out, k.Code)
		}
	}
	return out
}
