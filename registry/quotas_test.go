package registry_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestQuotaWindows: a window is a calendar minute, day or month in UTC, whatever the
// time's zone, months of every length and leap years included.
func TestQuotaWindows(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	tokyo := time.FixedZone("JST", 9*3600)
	for _, c := range []struct {
		name       string
		w          registry.Window
		at         time.Time
		start, end string
	}{
		{"a minute runs from its first second", registry.WindowMinute, utc("2026-03-04T05:06:07.5Z"), "2026-03-04T05:06:00Z", "2026-03-04T05:07:00Z"},
		{"the last minute of a year ends in the next", registry.WindowMinute, utc("2026-12-31T23:59:59.999Z"), "2026-12-31T23:59:00Z", "2027-01-01T00:00:00Z"},
		{"a day runs midnight to midnight UTC", registry.WindowDay, utc("2026-03-04T23:59:59Z"), "2026-03-04T00:00:00Z", "2026-03-05T00:00:00Z"},
		{"a day is UTC's even for a time in Tokyo", registry.WindowDay, time.Date(2026, 3, 5, 8, 0, 0, 0, tokyo), "2026-03-04T00:00:00Z", "2026-03-05T00:00:00Z"},
		{"a day at midnight is that day", registry.WindowDay, utc("2026-03-05T00:00:00Z"), "2026-03-05T00:00:00Z", "2026-03-06T00:00:00Z"},
		{"a month of 31 days", registry.WindowMonth, utc("2026-01-31T12:00:00Z"), "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"},
		{"February of a common year", registry.WindowMonth, utc("2026-02-28T23:59:59Z"), "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{"February of a leap year", registry.WindowMonth, utc("2028-02-29T10:00:00Z"), "2028-02-01T00:00:00Z", "2028-03-01T00:00:00Z"},
		{"a month of 30 days", registry.WindowMonth, utc("2026-04-30T23:00:00Z"), "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z"},
		{"December ends in the next year", registry.WindowMonth, utc("2026-12-15T00:00:00Z"), "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{"a month is UTC's even for a time in Tokyo", registry.WindowMonth, time.Date(2026, 5, 1, 8, 59, 0, 0, tokyo), "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z"},
	} {
		t.Run(c.name, func(t *testing.T) {
			start, end := c.w.Bounds(c.at)
			if !start.Equal(utc(c.start)) || !end.Equal(utc(c.end)) || start.Location() != time.UTC {
				t.Fatalf("%s of %v: %v to %v, want %s to %s", c.w, c.at, start, end, c.start, c.end)
			}
		})
	}
}

// TestQuotaRules: what a rule counts, and what is wrong with one, named by its field.
func TestQuotaRules(t *testing.T) {
	key := &registry.Key{ID: "key_a", Account: "acme"}
	byKey := registry.Principal{Account: "acme", Key: key}
	byLink := registry.Principal{Account: "acme", Tool: "email"}
	for _, c := range []struct {
		name    string
		q       registry.Quota
		p       registry.Principal
		subject string
	}{
		{"an account's rule counts a key's call", registry.Quota{Scope: "account", PerMinute: 1}, byKey, "account"},
		{"an account's rule counts a link's call", registry.Quota{Scope: "account", PerMinute: 1}, byLink, "account"},
		{"a key rule counts each key apart", registry.Quota{Scope: "key", PerMinute: 1}, byKey, "key_a"},
		{"a key rule counts no link", registry.Quota{Scope: "key", PerMinute: 1}, byLink, ""},
		{"a rule of one key counts that key", registry.Quota{Scope: "key", KeyID: "key_a", PerMinute: 1}, byKey, "key_a"},
		{"a rule of one key counts no other", registry.Quota{Scope: "key", KeyID: "key_b", PerMinute: 1}, byKey, ""},
		{"a rule of a tool counts its calls", registry.Quota{Scope: "account", Tool: "email", PerMinute: 1}, byKey, "account"},
		{"a rule of another tool counts nothing", registry.Quota{Scope: "account", Tool: "files", PerMinute: 1}, byKey, ""},
		{"a rule of another method counts nothing", registry.Quota{Scope: "account", Tool: "email", Method: "list", PerMinute: 1}, byKey, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			subject, ok := c.q.Counts(c.p, "email", "send_email")
			if subject != c.subject || ok != (c.subject != "") {
				t.Fatalf("counts %q, %v; want %q", subject, ok, c.subject)
			}
		})
	}
	for _, c := range []struct {
		q       registry.Quota
		pointer string
	}{
		{registry.Quota{PerMinute: 1}, "/q/scope"},
		{registry.Quota{Scope: "team", PerMinute: 1}, "/q/scope"},
		{registry.Quota{Scope: "account", KeyID: "key_a", PerMinute: 1}, "/q/key_id"},
		{registry.Quota{Scope: "key", KeyID: "key a", PerMinute: 1}, "/q/key_id"},
		{registry.Quota{Scope: "account", Tool: "Not A Tool", PerMinute: 1}, "/q/tool"},
		{registry.Quota{Scope: "account", Method: "send_email", PerMinute: 1}, "/q/method"},
		{registry.Quota{Scope: "account", PerDay: -1, PerMinute: 1}, "/q/per_day"},
		{registry.Quota{Scope: "account", Concurrent: -1, PerMinute: 1}, "/q/concurrent"},
		{registry.Quota{Scope: "account", Tool: "email"}, "/q"},
	} {
		vs := c.q.Violations("/q")
		if len(vs) != 1 || vs[0].Pointer != c.pointer {
			t.Errorf("%+v: violations %+v, want one at %s", c.q, vs, c.pointer)
		}
	}
	twice := []registry.Quota{{Scope: "account", Tool: "email", PerMinute: 1}, {Scope: "account", Tool: "email", PerDay: 9}}
	if vs := registry.QuotasViolations("/quotas", twice); len(vs) != 1 || vs[0].Pointer != "/quotas/1" {
		t.Errorf("two rules counting the same calls: %+v, want one violation at /quotas/1", vs)
	}
}

// TestTakeQuota: a window's count gives leases while it has calls left, cuts the
// last to what is left, takes back what is given back, tells an edge what a take
// whose answer it lost took, and never gives more than its limit however many take
// at once.
func TestTakeQuota(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	now := time.Now()
	_, end := registry.WindowMinute.Bounds(now)
	key := "acme.r1.account.minute.1"
	take := func(want, unspent int64) int64 {
		t.Helper()
		took, _, err := store.TakeQuota(ctx, key, 10, registry.QuotaTake{ID: registry.NewID("t"), Want: want, Unspent: unspent}, end, now)
		if err != nil {
			t.Fatal(err)
		}
		return took
	}
	if got := take(4, 0); got != 4 {
		t.Fatalf("took %d of a fresh window of 10, want 4", got)
	}
	if got := take(4, 0); got != 4 {
		t.Fatalf("took %d, want 4", got)
	}
	if got := take(4, 0); got != 2 {
		t.Fatalf("took %d of the 2 left, want 2", got)
	}
	if got := take(1, 0); got != 0 {
		t.Fatalf("took %d of a spent window", got)
	}
	if got := take(1, 3); got != 1 {
		t.Fatalf("after giving back 3, took %d, want 1", got)
	}
	if used, err := store.QuotaUsed(ctx, key); err != nil || used != 8 {
		t.Fatalf("used %d (%v), want 8", used, err)
	}
	// A take whose answer was lost is found again by the next.
	if _, _, err := store.TakeQuota(ctx, key, 10, registry.QuotaTake{ID: "lost-1", Want: 1}, end, now); err != nil {
		t.Fatal(err)
	}
	if took, recovered, err := store.TakeQuota(ctx, key, 10, registry.QuotaTake{ID: "next-1", Want: 1, Lost: "lost-1"}, end, now); err != nil || took != 1 || recovered != 1 {
		t.Fatalf("took %d and recovered %d (%v), want 1 and the lost take's 1", took, recovered, err)
	}
	if _, recovered, err := store.TakeQuota(ctx, key, 10, registry.QuotaTake{ID: "next-2", Want: 1, Lost: "never-written"}, end, now); err != nil || recovered != 0 {
		t.Fatalf("recovered %d (%v) of a take never written", recovered, err)
	}

	var took atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				n, _, err := store.TakeQuota(ctx, "acme.r2.account.minute.1", 100, registry.QuotaTake{ID: registry.NewID("t"), Want: 3}, end, now)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					return
				}
				took.Add(n)
			}
		})
	}
	wg.Wait()
	if took.Load() != 100 {
		t.Fatalf("eight takers took %d of a window of 100", took.Load())
	}
}

// TestHoldSlots: the calls at once every edge holds stay within the limit; an edge
// lets go of its own; an edge that stops renewing its hold loses it at its until.
func TestHoldSlots(t *testing.T) {
	env := testenv.NewRegistry(t)
	store, ctx := env.Store, env.Ctx
	now := time.Now()
	key := "acme.r1.account.concurrent"
	hold := func(edge string, calls int, until time.Time, at time.Time) bool {
		t.Helper()
		ok, err := store.HoldSlots(ctx, key, edge, calls, 3, until, at)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	soon := now.Add(time.Minute)
	if !hold("a", 2, soon, now) || !hold("b", 1, soon, now) {
		t.Fatal("two edges could not hold 3 calls of 3")
	}
	if hold("b", 2, soon, now) {
		t.Fatal("edge b held a fourth call of 3")
	}
	if !hold("a", 1, soon, now) || !hold("b", 2, soon, now) {
		t.Fatal("edge a let go of one, and b could not take it")
	}
	if n, err := store.SlotsRunning(ctx, key, now); err != nil || n != 3 {
		t.Fatalf("running %d (%v), want 3", n, err)
	}
	// Edge a dies: past its until, what it held is free.
	later := soon.Add(time.Second)
	if !hold("b", 3, later.Add(time.Minute), later) {
		t.Fatal("what a dead edge held was not freed at its until")
	}
	if n, err := store.SlotsRunning(ctx, key, later); err != nil || n != 3 {
		t.Fatalf("running %d (%v), want 3", n, err)
	}
}
