package edge

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/registry"
)

// Usage is the answer of GET /admin/usage?account=ID: each quota rule of the account,
// for each subject it counts (the account, or each key), as the quota bucket has it.
type Usage struct {
	Account string      `json:"account"`
	At      time.Time   `json:"at"`
	Rules   []RuleUsage `json:"rules"`
}

// RuleUsage is one rule's use by one subject: "account", or a key's id.
type RuleUsage struct {
	Rule       int              `json:"rule"`
	Quota      registry.Quota   `json:"quota"`
	Subject    string           `json:"subject"`
	Windows    []WindowUsage    `json:"windows,omitempty"`
	Concurrent *ConcurrentUsage `json:"concurrent,omitempty"`
}

// WindowUsage is a rule's current window of one kind. Used counts the calls edges
// have taken from it, including the leases they hold unspent (see
// gateway.WithQuotas).
type WindowUsage struct {
	Window    registry.Window `json:"window"`
	Limit     int64           `json:"limit"`
	Used      int64           `json:"used"`
	Remaining int64           `json:"remaining"`
	ResetsAt  time.Time       `json:"resets_at"`
}

// ConcurrentUsage is how many calls of a rule run at once on every edge together.
type ConcurrentUsage struct {
	Limit   int `json:"limit"`
	Running int `json:"running"`
}

func (e *Edge) usage(c *gin.Context) {
	id := c.Query("account")
	if vs := checkID(nil, "/account", id); len(vs) > 0 {
		e.fail(c, invalidInput(vs))
		return
	}
	ctx := c.Request.Context()
	a, err := e.store.Account(ctx, id)
	if err != nil {
		e.fail(c, err)
		return
	}
	keys, err := e.accountKeys(ctx, a)
	if err != nil {
		e.fail(c, err)
		return
	}
	u := Usage{Account: a.ID, At: time.Now().UTC(), Rules: []RuleUsage{}}
	for i, q := range a.Limits.Quotas {
		subjects := []string{registry.QuotaAccount}
		switch {
		case q.Scope == registry.QuotaKey && q.KeyID != "":
			subjects = []string{q.KeyID}
		case q.Scope == registry.QuotaKey:
			subjects = keys
		}
		for _, s := range subjects {
			r, err := e.ruleUsage(ctx, a.ID, i, q, s, u.At)
			if err != nil {
				e.fail(c, err)
				return
			}
			u.Rules = append(u.Rules, r)
		}
	}
	c.JSON(http.StatusOK, u)
}

// accountKeys are the ids of a's keys in use, in order, when a rule counts each key
// apart.
func (e *Edge) accountKeys(ctx context.Context, a *registry.Account) ([]string, error) {
	if !slices.ContainsFunc(a.Limits.Quotas, func(q registry.Quota) bool { return q.Scope == registry.QuotaKey && q.KeyID == "" }) {
		return nil, nil
	}
	keys, err := e.store.Keys(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, k := range keys {
		if k.RevokedAt == nil {
			ids = append(ids, k.ID)
		}
	}
	slices.SortFunc(ids, strings.Compare)
	return ids, nil
}

// ruleUsage reads what subject used of rule i, q, of account as of now.
func (e *Edge) ruleUsage(ctx context.Context, account string, i int, q registry.Quota, subject string, now time.Time) (RuleUsage, error) {
	r := RuleUsage{Rule: i, Quota: q, Subject: subject}
	for _, w := range registry.Windows {
		limit := q.Limit(w)
		if limit <= 0 {
			continue
		}
		start, end := w.Bounds(now)
		used, err := e.store.QuotaUsed(ctx, registry.QuotaWindow(registry.QuotaCounter(account, q, subject, w), start))
		if err != nil {
			return r, err
		}
		r.Windows = append(r.Windows, WindowUsage{Window: w, Limit: limit, Used: used, Remaining: max(limit-used, 0), ResetsAt: end})
	}
	if q.Concurrent > 0 {
		running, err := e.store.SlotsRunning(ctx, registry.QuotaSlots(account, q, subject), now)
		if err != nil {
			return r, err
		}
		r.Concurrent = &ConcurrentUsage{Limit: q.Concurrent, Running: running}
	}
	return r, nil
}
