package edge

import (
	"net/http"
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

// The parts of a Usage (registry.Store.Usage, which the dashboard shows an account
// too). Used counts the calls edges have taken from a window, including the leases
// they hold unspent (see gateway.WithQuotas).
type (
	RuleUsage       = registry.RuleUsage
	WindowUsage     = registry.WindowUsage
	ConcurrentUsage = registry.ConcurrentUsage
)

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
	u := Usage{Account: a.ID, At: time.Now().UTC()}
	if u.Rules, err = e.store.Usage(ctx, a, u.At); err != nil {
		e.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}
