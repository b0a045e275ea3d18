package edge

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
)

// adminChange records on the audit trail a change the admin API made: what it did,
// to which account, key and tool, answered with status.
func (e *Edge) adminChange(c *gin.Context, status int, action, account, key, tool string) {
	e.adminRecord(c, audit.Record{Status: status, Method: action, Account: account, Key: key, Tool: tool})
}

// adminRecord writes r, an admin change's record with its action, status and what it
// changed, completed with what every such record says.
func (e *Edge) adminRecord(c *gin.Context, r audit.Record) {
	t := e.gw.Audit()
	if t == nil {
		return
	}
	_ = t.Write(audit.Admin(c.Request.Context(), r, audit.TransportAdmin, requestID(c))) // the change is made: a record lost is counted
}

// errAuditOff answers GET /admin/audit on an edge that keeps no trail.
var errAuditOff = newHTTPError(gateway.KindNotFound, "this edge keeps no audit trail (toolgate edge --no-audit)")

// readAudit answers GET /admin/audit: the trail's records, oldest first, picked by
// kind, account, tool, method and outcome, stored since and until a time (RFC 3339,
// or a duration before now: since=5m), after a cursor (the last page's next), at most
// limit of them.
func (e *Edge) readAudit(c *gin.Context) {
	t := e.gw.Audit()
	if t == nil {
		e.fail(c, errAuditOff)
		return
	}
	f, vs := auditFilter(c, time.Now())
	if len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	page, err := t.Read(c.Request.Context(), f)
	if err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, page)
}

// auditFilter reads GET /admin/audit's query, naming each parameter that is wrong.
func auditFilter(c *gin.Context, now time.Time) (audit.Filter, []registry.Violation) {
	f := audit.Filter{Kind: c.Query("kind"), Account: c.Query("account"), Tool: c.Query("tool"),
		Method: c.Query("method"), Outcome: c.Query("outcome"), User: c.Query("user"), Client: c.Query("client")}
	var vs []registry.Violation
	if f.Kind != "" && f.Kind != audit.KindCall && f.Kind != audit.KindAdmin {
		vs = append(vs, registry.Violation{Pointer: "/kind", Message: "must be call or admin"})
	}
	if f.Account != "" {
		vs = checkID(vs, "/account", f.Account)
	}
	if f.Tool != "" {
		vs = checkID(vs, "/tool", f.Tool)
	}
	if f.Outcome != "" && f.Outcome != audit.OutcomeOK && !slices.ContainsFunc(gateway.Kinds, func(k *gateway.Kind) bool { return k.Code == f.Outcome }) {
		vs = append(vs, registry.Violation{Pointer: "/outcome", Message: "must be ok or an error code"})
	}
	var ok bool
	if f.Since, ok = queryTime(c.Query("since"), now); !ok {
		vs = append(vs, registry.Violation{Pointer: "/since", Message: "must be an RFC 3339 time or a duration before now (5m)"})
	}
	if f.Until, ok = queryTime(c.Query("until"), now); !ok {
		vs = append(vs, registry.Violation{Pointer: "/until", Message: "must be an RFC 3339 time or a duration before now (5m)"})
	}
	if v := c.Query("after"); v != "" {
		var err error
		if f.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			vs = append(vs, registry.Violation{Pointer: "/after", Message: "must be a record's seq (a whole number)"})
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > audit.MaxLimit {
			vs = append(vs, registry.Violation{Pointer: "/limit", Message: "must be from 1 to " + strconv.Itoa(audit.MaxLimit)})
		}
		f.Limit = n
	}
	return f, vs
}

// queryTime reads a time of the query: RFC 3339, or a duration before now; "" is
// the zero time.
func queryTime(v string, now time.Time) (time.Time, bool) {
	if v == "" {
		return time.Time{}, true
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, true
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), true
	}
	return time.Time{}, false
}
