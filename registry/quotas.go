package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// Quota scopes: whom a rule counts.
const (
	// QuotaAccount counts every call of the account, by any of its keys or links.
	QuotaAccount = "account"
	// QuotaKey counts the calls of one key (KeyID), or of each of the account's keys
	// apart when KeyID is empty. A call through a link is counted by no such rule.
	QuotaKey = "key"
)

// MaxQuotas is the most rules an account may have.
const MaxQuotas = 64

// Quota is one rule of an account's quotas: the calls it counts (of the account or of
// a key, optionally of one tool and one method of it) may be at most PerMinute in a
// calendar minute, PerDay in a calendar day and PerMonth in a calendar month (UTC),
// and Concurrent at once, across every edge. A limit left at 0 does not apply.
type Quota struct {
	Scope      string `json:"scope"`
	KeyID      string `json:"key_id,omitempty"`
	Tool       string `json:"tool,omitempty"`
	Method     string `json:"method,omitempty"`
	PerMinute  int64  `json:"per_minute,omitempty"`
	PerDay     int64  `json:"per_day,omitempty"`
	PerMonth   int64  `json:"per_month,omitempty"`
	Concurrent int    `json:"concurrent,omitempty"`
}

// Window is a calendar window of a quota, in UTC.
type Window string

// The windows, shortest first.
const (
	WindowMinute Window = "minute"
	WindowDay    Window = "day"
	WindowMonth  Window = "month"
)

// Windows lists the windows, shortest first.
var Windows = []Window{WindowMinute, WindowDay, WindowMonth}

// Bounds are the start and the end of the window of kind w that holds t, in UTC: a
// calendar minute, day (from midnight) or month (from its first day's midnight).
func (w Window) Bounds(t time.Time) (start, end time.Time) {
	t = t.UTC()
	switch w {
	case WindowMinute:
		start = t.Truncate(time.Minute)
		return start, start.Add(time.Minute)
	case WindowDay:
		start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	default:
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
}

// Limit is q's limit in window w; 0 when it sets none.
func (q Quota) Limit(w Window) int64 {
	switch w {
	case WindowMinute:
		return q.PerMinute
	case WindowDay:
		return q.PerDay
	case WindowMonth:
		return q.PerMonth
	}
	return 0
}

// ID names the rule by what it counts (scope, key, tool and method), not by its
// limits: a rule whose limit changes keeps its counts.
func (q Quota) ID() string {
	sum := sha256.Sum256([]byte(q.Scope + "\x00" + q.KeyID + "\x00" + q.Tool + "\x00" + q.Method))
	return hex.EncodeToString(sum[:8])
}

// Counts reports whether q counts a call of tool and method by p, and whose count it
// is: "account", or the id of the key.
func (q Quota) Counts(p Principal, tool, method string) (subject string, ok bool) {
	if (q.Tool != "" && q.Tool != tool) || (q.Method != "" && q.Method != method) {
		return "", false
	}
	if q.Scope == QuotaAccount {
		return QuotaAccount, true
	}
	if p.Key == nil || (q.KeyID != "" && q.KeyID != p.Key.ID) {
		return "", false
	}
	return p.Key.ID, true
}

// QuotaCounter names a rule's counts in windows of kind w, for subject (see
// Quota.Counts); QuotaWindow names the count of one window of them.
func QuotaCounter(account string, q Quota, subject string, w Window) string {
	return account + "." + q.ID() + "." + subject + "." + string(w)
}

// QuotaWindow is the key of the count of counter (see QuotaCounter) in the window
// that starts at start.
func QuotaWindow(counter string, start time.Time) string {
	return counter + "." + strconv.FormatInt(start.Unix(), 10)
}

// QuotaSlots is the key of the calls a rule's subject has running at once.
func QuotaSlots(account string, q Quota, subject string) string {
	return account + "." + q.ID() + "." + subject + ".concurrent"
}

// Violations are what is wrong with q, the rule at pointer.
func (q Quota) Violations(pointer string) []Violation {
	var vs []Violation
	bad := func(field, msg string) { vs = append(vs, Violation{Pointer: pointer + field, Message: msg}) }
	switch q.Scope {
	case QuotaAccount:
		if q.KeyID != "" {
			bad("/key_id", "only a rule of scope key names a key")
		}
	case QuotaKey:
		if q.KeyID != "" && !validKeyID(q.KeyID) {
			bad("/key_id", "must be a key's id (key_ then letters and digits)")
		}
	case "":
		bad("/scope", "required: account or key")
	default:
		bad("/scope", "must be account or key")
	}
	if q.Tool != "" && !wire.ValidToolID(q.Tool) {
		bad("/tool", "must be a tool id")
	}
	if q.Method != "" && q.Tool == "" {
		bad("/method", "a rule that names a method names its tool too")
	} else if q.Method != "" && !wire.ValidMethodName(q.Method) {
		bad("/method", "must be a method name")
	}
	for _, f := range []struct {
		field string
		n     int64
	}{{"/per_minute", q.PerMinute}, {"/per_day", q.PerDay}, {"/per_month", q.PerMonth}, {"/concurrent", int64(q.Concurrent)}} {
		if f.n < 0 {
			bad(f.field, "must not be negative")
		}
	}
	if q.PerMinute <= 0 && q.PerDay <= 0 && q.PerMonth <= 0 && q.Concurrent <= 0 {
		bad("", "sets no limit: give per_minute, per_day, per_month or concurrent")
	}
	return vs
}

// QuotasViolations are what is wrong with an account's list of quotas, at pointer.
func QuotasViolations(pointer string, qs []Quota) []Violation {
	if len(qs) > MaxQuotas {
		return []Violation{{Pointer: pointer, Message: fmt.Sprintf("at most %d rules", MaxQuotas)}}
	}
	var vs []Violation
	seen := map[string]int{}
	for i, q := range qs {
		at := pointer + "/" + strconv.Itoa(i)
		vs = append(vs, q.Violations(at)...)
		if j, ok := seen[q.ID()]; ok {
			vs = append(vs, Violation{Pointer: at, Message: fmt.Sprintf("counts what rule %d counts (same scope, key, tool and method): make it one rule", j)})
		}
		seen[q.ID()] = i
	}
	return vs
}

// validKeyID: an id CreateKey makes, which is a token of a quota's keys.
func validKeyID(id string) bool {
	if len(id) <= len("key_") || len(id) > 64 || id[:4] != "key_" {
		return false
	}
	for _, r := range id[4:] {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
