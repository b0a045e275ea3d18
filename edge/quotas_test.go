package edge_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// twoEdges are two real edges on one NATS server, serving echo, with an account
// whose key both edges know.
func twoEdges(t *testing.T) (a, b *env) {
	t.Helper()
	a = newEnv(t)
	b = newEnv(t, onServer(a.srv.ClientURL()))
	a.serve(echoTool, echo)
	return a, b
}

// quotaAccount makes account id with quotas and one key, connected to tool, and
// waits until both edges know them.
func quotaAccount(t *testing.T, a, b *env, id, tool string, quotas ...registry.Quota) string {
	t.Helper()
	key := a.account(id, registry.Limits{Rate: 100000, Burst: 100000, Quotas: quotas})
	a.connect(id, tool)
	testenv.WaitFor(t, "edge b sees the account, its key and its tool", func() bool {
		_, err := b.view.Snapshot().AuthenticateKey(key, time.Now())
		acct := b.view.Snapshot().Account(id)
		return err == nil && acct != nil && len(acct.Limits.Quotas) == len(quotas) && b.view.Snapshot().Connection(id, tool) != nil
	})
	return key
}

// TestAQuotaHoldsAcrossEdges: a per-minute quota of N, called through two edges at
// about 500 calls a second (each edge half of them) until well past N, admits
// between N and N+1% (by design exactly N: see gateway.WithQuotas); every call
// refused is a 429 quota_exceeded naming the rule and when its minute resets. A run
// that straddles the turn of a minute (which resets the count) is run again.
func TestAQuotaHoldsAcrossEdges(t *testing.T) {
	const n, rate, calls = 1000, 500, 1500
	a, b := twoEdges(t)
	for attempt := 1; ; attempt++ {
		id := "acme-" + strconv.Itoa(attempt)
		key := quotaAccount(t, a, b, id, "echo", registry.Quota{Scope: registry.QuotaAccount, Tool: "echo", PerMinute: n})
		began := time.Now()
		ok, refused, took := callAtRate(t, []*env{a, b}, key, rate, calls)
		if !began.UTC().Truncate(time.Minute).Equal(time.Now().UTC().Truncate(time.Minute)) {
			if attempt == 3 {
				t.Fatal("three runs in a row straddled the turn of a minute")
			}
			t.Logf("the run straddled the turn of a minute: again")
			continue
		}
		t.Logf("a quota of %d a minute admitted %d of %d calls through two edges (%d on a, %d on b) in %v (%.0f calls/s), refused %d",
			n, ok[0]+ok[1], calls, ok[0], ok[1], took.Round(time.Millisecond), float64(calls)/took.Seconds(), refused)
		if got := ok[0] + ok[1]; got < n || got > n+n/100 {
			t.Fatalf("admitted %d calls, want between %d and %d", got, n, n+n/100)
		}
		if ok[0] == 0 || ok[1] == 0 {
			t.Fatalf("one edge admitted nothing: %v", ok)
		}
		break
	}
}

// callAtRate calls echo with key through the edges in turn, rate calls a second,
// calls in all, and counts the answers: admitted per edge, and refused for a quota.
// Each refusal is checked as a caller sees it.
func callAtRate(t *testing.T, edges []*env, key string, rate, calls int) (ok [2]int64, refused int64, took time.Duration) {
	t.Helper()
	var (
		admitted [2]atomic.Int64
		over     atomic.Int64
		wg       sync.WaitGroup
		work     = make(chan int)
		// Connections kept open: at this rate, one opened per call would cost more
		// than the call.
		client = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	)
	defer client.CloseIdleConnections()
	for range 32 {
		wg.Go(func() {
			for i := range work {
				r, err := postCall(client, edges[i%len(edges)].url+"/tool-call/echo/echo", key)
				switch {
				case err != nil:
					t.Errorf("call: %v", err)
				case r.status == http.StatusOK:
					admitted[i%len(edges)].Add(1)
				case r.status == http.StatusTooManyRequests:
					over.Add(1)
					if msg := checkQuotaRefusal(r, "minute"); msg != "" {
						t.Error(msg)
					}
				default:
					t.Errorf("call: %d %s", r.status, r.body)
				}
			}
		})
	}
	start := time.Now()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range calls {
		<-tick.C
		work <- i
	}
	tick.Stop()
	close(work)
	wg.Wait()
	return [2]int64{admitted[0].Load(), admitted[1].Load()}, over.Load(), time.Since(start)
}

// checkQuotaRefusal says what is wrong with r as a refusal for a quota's window: a
// 429 quota_exceeded with Retry-After and a detail naming rule 0, the window, and
// (but for calls at once) when it resets, a whole window from now at most.
func checkQuotaRefusal(r result, window string) string {
	var env struct {
		Error struct {
			Code    string                `json:"code"`
			Message string                `json:"message"`
			Details []gateway.QuotaDetail `json:"details"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &env); err != nil || env.Error.Code != edge.CodeQuotaExceeded || len(env.Error.Details) != 1 {
		return fmt.Sprintf("refusal: %d %s", r.status, r.body)
	}
	d := env.Error.Details[0]
	after, err := strconv.Atoi(r.header.Get("Retry-After"))
	switch {
	case err != nil || after < 1:
		return fmt.Sprintf("refusal without Retry-After: %v", r.header)
	case d.Rule != 0 || d.Window != window || d.Limit < 1 || d.RetryAfterMs < 1:
		return fmt.Sprintf("refusal's detail %+v: want rule 0, window %s", d, window)
	case window == gateway.WindowConcurrent && (d.ResetsAt != nil || after != 1):
		return fmt.Sprintf("refusal for calls at once: resets at %v, Retry-After %d; want no reset, 1 s", d.ResetsAt, after)
	case window == "minute" && (d.ResetsAt == nil || d.ResetsAt.Second() != 0 || time.Until(*d.ResetsAt) > time.Minute || after > 60):
		return fmt.Sprintf("refusal for a minute: resets at %v, Retry-After %d", d.ResetsAt, after)
	}
	return ""
}

// TestCallsAtOnceAcrossEdges: a rule of 3 calls at once holds across two edges: of
// eight calls at once, four on each edge, 3 reach the tool and 5 are refused with
// quota_exceeded; once they end, their places are free on either edge.
func TestCallsAtOnceAcrossEdges(t *testing.T) {
	a, b := twoEdges(t)
	slow := registry.Tool{ID: "slow", Title: "Slow", Methods: []registry.Method{{Name: "wait"}}}
	arrived := make(chan *nats.Msg, 16)
	a.serve(slow, func(_ string, m *nats.Msg) { arrived <- m })
	key := quotaAccount(t, a, b, "acme", "slow", registry.Quota{Scope: registry.QuotaKey, Tool: "slow", Concurrent: 3})

	round := func(want int) {
		t.Helper()
		answered := make(chan result, 8)
		for i := range 8 {
			e := []*env{a, b}[i%2]
			go func() { answered <- <-e.callInBackground(key, "slow", "wait", `{}`) }()
		}
		var held []*nats.Msg
		refused := 0
		for len(held) < want || refused < 8-want {
			select {
			case m := <-arrived:
				held = append(held, m)
			case r := <-answered:
				if msg := checkQuotaRefusal(r, gateway.WindowConcurrent); msg != "" {
					t.Fatal(msg)
				}
				refused++
			case <-time.After(testenv.Patience):
				t.Fatalf("%d calls reached the tool and %d were refused; want %d and %d", len(held), refused, want, 8-want)
			}
		}
		select {
		case m := <-arrived:
			t.Fatalf("a call beyond the %d at once reached the tool: %s", want, m.Subject)
		case <-time.After(200 * time.Millisecond):
		}
		for _, m := range held {
			echo("wait", m)
		}
		for range want {
			if r := <-answered; r.status != http.StatusOK {
				t.Fatalf("a call held at once: %d %s", r.status, r.body)
			}
		}
	}
	round(3)
	round(3) // the places of the calls that ended are free again
}

// postCall makes one tool call with key on client.
func postCall(client *http.Client, url, key string) (result, error) {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{}`))
	if err != nil {
		return result{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("SERVICE_API_KEY", key)
	resp, err := client.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// TestAChangedQuotaReachesEveryEdge: a day's quota spent through both edges is
// raised through one edge's admin API and admits calls on both within 2 s (reported
// beyond it); lowered again through the other, it refuses on both within 2 s; cleared,
// it admits.
func TestAChangedQuotaReachesEveryEdge(t *testing.T) {
	a, b := twoEdges(t)
	rule := registry.Quota{Scope: registry.QuotaAccount, Tool: "echo", PerDay: 2}
	key := quotaAccount(t, a, b, "acme", "echo", rule)
	calls := func(e *env, n int) (ok, over int) {
		for range n {
			switch r := e.call(key, "echo", "echo", `{}`); r.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				if msg := checkQuotaRefusal(r, "day"); msg != "" {
					t.Fatal(msg)
				}
				over++
			default:
				t.Fatalf("call: %d %s", r.status, r.body)
			}
		}
		return ok, over
	}
	okA, _ := calls(a, 1)
	okB, _ := calls(b, 1)
	if okA != 1 || okB != 1 {
		t.Fatalf("a day's quota of 2 refused one of two calls: %d on a, %d on b", okA, okB)
	}
	if _, overA := calls(a, 1); overA != 1 {
		t.Fatal("a third call of a day's quota of 2 passed on edge a")
	}
	if _, overB := calls(b, 1); overB != 1 {
		t.Fatal("a third call of a day's quota of 2 passed on edge b")
	}

	patch := func(e *env, body string) {
		t.Helper()
		if r := e.admin(http.MethodPatch, "/accounts/acme", body); r.status != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", body, r.status, r.body)
		}
	}
	patch(a, `{"limits":{"quotas":[{"scope":"account","tool":"echo","per_day":1000}]}}`)
	took := testenv.Eventually(t, 2*time.Second, "both edges take the raised quota", func() bool {
		okA, _ := calls(a, 1)
		okB, _ := calls(b, 1)
		return okA == 1 && okB == 1
	})
	t.Logf("the raised quota held on both edges %v after the change", took.Round(time.Millisecond))

	patch(b, `{"limits":{"quotas":[{"scope":"account","tool":"echo","per_day":2}]}}`)
	took = testenv.Eventually(t, 2*time.Second, "both edges take the lowered quota", func() bool {
		_, overA := calls(a, 1)
		_, overB := calls(b, 1)
		return overA == 1 && overB == 1
	})
	t.Logf("the lowered quota held on both edges %v after the change", took.Round(time.Millisecond))

	patch(a, `{"limits":{"quotas":null}}`)
	testenv.Eventually(t, 2*time.Second, "both edges drop the cleared quota", func() bool {
		okA, _ := calls(a, 1)
		okB, _ := calls(b, 1)
		return okA == 1 && okB == 1
	})
}

// TestQuotasAdministered: quotas are set when an account is made and changed with
// PATCH; a bad rule is a 400 naming its field that changes nothing; GET
// /admin/usage shows each rule's use in its current windows, per key for a rule of
// each key.
func TestQuotasAdministered(t *testing.T) {
	e := newEnv(t)
	e.serve(echoTool, echo)
	r := e.admin(http.MethodPost, "/accounts", `{"id":"acme","limits":{"quotas":[{"scope":"account","tool":"echo","per_minute":50,"per_month":900,"concurrent":4}]}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, bad := range []struct{ method, path, body, pointer string }{
		{http.MethodPost, "/accounts", `{"id":"beta","limits":{"quotas":[{"scope":"team","per_day":1}]}}`, "/limits/quotas/0/scope"},
		{http.MethodPost, "/accounts", `{"id":"beta","limits":{"quotas":[{"scope":"account","per_day":-1}]}}`, "/limits/quotas/0/per_day"},
		{http.MethodPost, "/accounts", `{"id":"beta","limits":{"quotas":[{"scope":"account","per_day":1},{"scope":"account","tool":"echo","per_dya":1}]}}`, "/limits/quotas/1/per_dya"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"account","per_day":1},{"scope":"account","per_day":"many"}]}}`, "/limits/quotas/1/per_day"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"account","tool":"echo"}]}}`, "/limits/quotas/0"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"account","per_day":1},{"scope":"key","per_dya":1}]}}`, "/limits/quotas/1/per_dya"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"account","method":"echo","per_day":1}]}}`, "/limits/quotas/0/method"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"key","key_id":"nope!","per_day":1}]}}`, "/limits/quotas/0/key_id"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"key","per_day":1},{"scope":"key","per_minute":1}]}}`, "/limits/quotas/1"},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":{"scope":"key"}}}`, "/limits/quotas"},
	} {
		t.Run(bad.method+" "+bad.body+" is refused naming "+bad.pointer, func(t *testing.T) {
			got := e.admin(bad.method, bad.path, bad.body).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
			if !jsonContains(got.Details, `"pointer":"`+bad.pointer+`"`) {
				t.Fatalf("details %+v do not name %s", got.Details, bad.pointer)
			}
			if a := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); len(a.Limits.Quotas) != 1 || a.Limits.Quotas[0].PerMinute != 50 {
				t.Fatalf("a refused change changed the quotas: %+v", a.Limits.Quotas)
			}
		})
	}

	r = e.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"quotas":[{"scope":"account","tool":"echo","per_minute":50,"per_month":900,"concurrent":4},{"scope":"key","per_day":7}]}}`)
	if r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	key := e.key("acme", nil)
	e.connect("acme", "echo")
	testenv.WaitFor(t, "the edge sees both rules", func() bool {
		return len(e.view.Snapshot().Account("acme").Limits.Quotas) == 2
	})
	for range 3 {
		if r := e.call(key, "echo", "echo", `{}`); r.status != http.StatusOK {
			t.Fatalf("call: %d %s", r.status, r.body)
		}
	}
	u := decode[edge.Usage](t, e.admin(http.MethodGet, "/usage?account=acme", ""))
	if u.Account != "acme" || len(u.Rules) != 2 {
		t.Fatalf("usage: %+v", u)
	}
	account, perKey := u.Rules[0], u.Rules[1]
	if account.Subject != "account" || len(account.Windows) != 2 || account.Concurrent == nil ||
		account.Concurrent.Limit != 4 || account.Concurrent.Running != 0 {
		t.Fatalf("the account's rule: %+v", account)
	}
	minute, month := account.Windows[0], account.Windows[1]
	// A lease is counted as used once taken: at most a lease (1 of 50, 4 of 900)
	// beyond the calls. (Calls that straddle the turn of a minute count fewer in it.)
	if minute.Window != registry.WindowMinute || minute.Limit != 50 || minute.Used < 1 || minute.Used > 3 ||
		minute.Remaining != minute.Limit-minute.Used || minute.ResetsAt.Second() != 0 || time.Until(minute.ResetsAt) > time.Minute {
		t.Fatalf("the minute: %+v", minute)
	}
	if month.Window != registry.WindowMonth || month.Limit != 900 || month.Used < 3 || month.Used > 3+gateway.QuotaLease(900) ||
		month.ResetsAt.Day() != 1 || month.ResetsAt.Hour() != 0 {
		t.Fatalf("the month: %+v", month)
	}
	if perKey.Rule != 1 || !strings.HasPrefix(perKey.Subject, "key_") || len(perKey.Windows) != 1 ||
		perKey.Windows[0].Used < 3 || perKey.Windows[0].Used > 7 {
		t.Fatalf("the key's rule: %+v", perKey)
	}
	e.admin(http.MethodGet, "/usage", "").expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
	e.admin(http.MethodGet, "/usage?account=nobody", "").expect(t, http.StatusNotFound, edge.CodeNotFound)
}
