package registry

import (
	"context"
	"slices"
	"strings"
	"time"
)

// RuleUsage is one quota rule's use by one subject: "account", or a key's id.
type RuleUsage struct {
	Rule       int              `json:"rule"`
	Quota      Quota            `json:"quota"`
	Subject    string           `json:"subject"`
	Windows    []WindowUsage    `json:"windows,omitempty"`
	Concurrent *ConcurrentUsage `json:"concurrent,omitempty"`
}

// WindowUsage is a rule's current window of one kind. Used counts the calls edges
// have taken from it, including the leases they hold unspent.
type WindowUsage struct {
	Window    Window    `json:"window"`
	Limit     int64     `json:"limit"`
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	ResetsAt  time.Time `json:"resets_at"`
}

// ConcurrentUsage is how many calls of a rule run at once on every edge together.
type ConcurrentUsage struct {
	Limit   int `json:"limit"`
	Running int `json:"running"`
}

// Usage is each quota rule of a, for each subject it counts (the account, or each
// key in use), as the quota bucket has it at now.
func (s *Store) Usage(ctx context.Context, a *Account, now time.Time) ([]RuleUsage, error) {
	keys, err := s.countedKeys(ctx, a)
	if err != nil {
		return nil, err
	}
	out := []RuleUsage{}
	for i, q := range a.Limits.Quotas {
		subjects := []string{QuotaAccount}
		switch {
		case q.Scope == QuotaKey && q.KeyID != "":
			subjects = []string{q.KeyID}
		case q.Scope == QuotaKey:
			subjects = keys
		}
		for _, subject := range subjects {
			r, err := s.ruleUsage(ctx, a.ID, i, q, subject, now)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// countedKeys are the ids of a's keys in use, in order, when a rule counts each key
// apart.
func (s *Store) countedKeys(ctx context.Context, a *Account) ([]string, error) {
	if !slices.ContainsFunc(a.Limits.Quotas, func(q Quota) bool { return q.Scope == QuotaKey && q.KeyID == "" }) {
		return nil, nil
	}
	keys, err := s.Keys(ctx, a.ID)
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
func (s *Store) ruleUsage(ctx context.Context, account string, i int, q Quota, subject string, now time.Time) (RuleUsage, error) {
	r := RuleUsage{Rule: i, Quota: q, Subject: subject}
	for _, w := range Windows {
		limit := q.Limit(w)
		if limit <= 0 {
			continue
		}
		start, end := w.Bounds(now)
		used, err := s.QuotaUsed(ctx, QuotaWindow(QuotaCounter(account, q, subject, w), start))
		if err != nil {
			return r, err
		}
		r.Windows = append(r.Windows, WindowUsage{Window: w, Limit: limit, Used: used, Remaining: max(limit-used, 0), ResetsAt: end})
	}
	if q.Concurrent > 0 {
		running, err := s.SlotsRunning(ctx, QuotaSlots(account, q, subject), now)
		if err != nil {
			return r, err
		}
		r.Concurrent = &ConcurrentUsage{Limit: q.Concurrent, Running: running}
	}
	return r, nil
}
