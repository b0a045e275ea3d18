package mcpbridge

import (
	"context"
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/workers"
)

// A server that acts per account (a template of Config.Env or Header names a field)
// gets each account's calls on an upstream session of that account's own, started
// with the account's values: for a stdio server, a process whose environment holds
// them. The calls that come without an MCP session share the account's session;
// each MCP client session has its own, with its account's values.

// CodeCredentials is the error code of a call whose connection values do not open
// (sealed to another seal key than this worker's).
const CodeCredentials = "credentials_unreadable"

// The bridge's metrics, on the default registry (the worker's --health-listen serves
// them on /metrics).
var (
	accountSessions = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_bridge_account_sessions",
		Help: "Upstream sessions (for a stdio server, processes) held for accounts now, by tool.",
	}, []string{"tool"})
	accountSessionsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_bridge_account_sessions_started_total",
		Help: "Upstream sessions started for accounts, by tool.",
	}, []string{"tool"})
	registerMetrics sync.Once
)

func (b *Bridge) registerMetrics() {
	registerMetrics.Do(func() {
		prometheus.MustRegister(accountSessions, accountSessionsStarted)
	})
}

// counted updates the metrics once s was added to or removed from its holder. b.mu
// is held.
func (b *Bridge) counted(s *session) {
	if s.account != "" {
		accountSessions.WithLabelValues(b.cfg.Tool).Set(float64(len(b.accounts)))
	}
}

// AccountSessions is how many upstream sessions the bridge holds for accounts now.
func (b *Bridge) AccountSessions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.accounts)
}

// valuesOf are the calling account's connection values, for a server that acts per
// account; nil for a server that does not, or a call that brings none.
func (b *Bridge) valuesOf(c *workers.Call) (map[string]string, error) {
	if !b.perAccount {
		return nil, nil
	}
	values, err := c.Credentials()
	if errors.Is(err, workers.ErrNoCredentials) {
		return nil, nil
	}
	if err != nil {
		return nil, &workers.Error{Code: CodeCredentials, Status: 502, Message: err.Error()}
	}
	return values, nil
}

// acquireAccount counts c, a call without an MCP session of an account that brings
// its values, as running on that account's upstream session, opening one first if
// there is none.
func (b *Bridge) acquireAccount(ctx context.Context, c *workers.Call, values map[string]string) (*inflight, error) {
	return b.acquireHeld(ctx, c, b.accounts, accountKey(c.Account, values), b.cfg.AccountSessions,
		"accounts (its account-sessions setting)", func() *session {
			accountSessionsStarted.WithLabelValues(b.cfg.Tool).Inc()
			return &session{idx: -1, account: c.Account, acting: c.Account, caps: everyCapability(), values: values}
		})
}
