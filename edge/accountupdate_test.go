package edge_test

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestUpdateAccount: PATCH /admin/accounts/{id} merges the fields it names into the
// account and leaves the others; a bad body is a 400 naming the field, and changes
// nothing.
func TestUpdateAccount(t *testing.T) {
	e := newEnv(t)
	r := e.admin(http.MethodPost, "/accounts", `{"id":"acme","name":"Acme","limits":{"rate":20,"burst":5,"sessions":2}}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := decode[registry.Account](t, r)

	for _, bad := range []struct{ body, pointer string }{
		{`{"limits":{"rate":-1}}`, "/limits/rate"},
		{`{"limits":{"burst":-2}}`, "/limits/burst"},
		{`{"limits":{"sessions":-1}}`, "/limits/sessions"},
		{`{"limits":{"burst":1.5}}`, "/limits/burst"},
		{`{"limits":{"rate":"fast"}}`, "/limits/rate"},
		{`{"limits":{"rates":1}}`, "/limits/rates"},
		{`{"limits":7}`, "/limits"},
		{`{"name":3}`, "/name"},
		{`{"id":"other"}`, "/id"},
		{`{"name":"Acme Corp","limits":{"rate":-1}}`, "/limits/rate"},
	} {
		t.Run("a body of "+bad.body+" is refused naming "+bad.pointer, func(t *testing.T) {
			got := e.admin(http.MethodPatch, "/accounts/acme", bad.body).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
			if !jsonContains(got.Details, `"pointer":"`+bad.pointer+`"`) {
				t.Fatalf("details %+v do not name %s", got.Details, bad.pointer)
			}
			if a := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); !reflect.DeepEqual(a, created) {
				t.Fatalf("a refused update changed the account: %+v, was %+v", a, created)
			}
		})
	}
	e.admin(http.MethodPatch, "/accounts/acme", `not json`).expect(t, http.StatusBadRequest, edge.CodeInvalidJSON)
	e.admin(http.MethodPatch, "/accounts/nobody", `{"name":"x"}`).expect(t, http.StatusNotFound, edge.CodeNotFound)
	e.admin(http.MethodPatch, "/accounts/Not_An_ID", `{"name":"x"}`).expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)

	for _, step := range []struct {
		body string
		want registry.Account
	}{
		{`{}`, created},
		{`{"limits":{"rate":7.5}}`, with(created, "Acme", registry.Limits{Rate: 7.5, Burst: 5, Sessions: 2})},
		{`{"name":"Acme Corp","limits":{"burst":9}}`, with(created, "Acme Corp", registry.Limits{Rate: 7.5, Burst: 9, Sessions: 2})},
		{`{"limits":{"sessions":null}}`, with(created, "Acme Corp", registry.Limits{Rate: 7.5, Burst: 9})},
		{`{"name":null,"limits":null}`, with(created, "", registry.Limits{})},
	} {
		r := e.admin(http.MethodPatch, "/accounts/acme", step.body)
		if r.status != http.StatusOK {
			t.Fatalf("PATCH %s: %d %s", step.body, r.status, r.body)
		}
		if got := decode[registry.Account](t, r); !reflect.DeepEqual(got, step.want) {
			t.Fatalf("PATCH %s answered %+v, want %+v", step.body, got, step.want)
		}
		if got := decode[registry.Account](t, e.admin(http.MethodGet, "/accounts/acme", "")); !reflect.DeepEqual(got, step.want) {
			t.Fatalf("after PATCH %s the account is %+v, want %+v", step.body, got, step.want)
		}
	}
}

func with(a registry.Account, name string, l registry.Limits) registry.Account {
	a.Name, a.Limits = name, l
	return a
}

// TestAChangedLimitReachesEveryEdge: two edges on one NATS server; a rate changed
// through one edge's admin API holds on both within 2 s (reported beyond it), raised
// and lowered again.
func TestAChangedLimitReachesEveryEdge(t *testing.T) {
	a := newEnv(t)
	b := newEnv(t, onServer(a.srv.ClientURL()))
	a.serve(echoTool, echo)
	key := a.account("acme", registry.Limits{Rate: 0.2, Burst: 1})
	a.connect("acme", "echo")
	testenv.WaitFor(t, "edge b sees the key and the tool", func() bool {
		_, err := b.view.Snapshot().AuthenticateKey(key, time.Now())
		return err == nil && b.view.Snapshot().Instances("echo") > 0
	})
	// burst calls in a row: all answered, or one refused for the rate.
	burst := func(e *env, n int) (ok, limited int) {
		for range n {
			switch r := e.call(key, "echo", "echo", `{}`); r.status {
			case http.StatusOK:
				ok++
			case http.StatusTooManyRequests:
				limited++
			default:
				t.Fatalf("call: %d %s", r.status, r.body)
			}
		}
		return ok, limited
	}
	if _, limited := burst(a, 3); limited == 0 {
		t.Fatal("three calls at once passed a rate of one call in five seconds")
	}

	if r := a.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"rate":1000,"burst":1000,"sessions":3}}`); r.status != http.StatusOK {
		t.Fatalf("raise: %d %s", r.status, r.body)
	}
	took := testenv.Eventually(t, 2*time.Second, "both edges take the raised rate", func() bool {
		okA, _ := burst(a, 20)
		okB, _ := burst(b, 20)
		return okA == 20 && okB == 20 && b.view.Snapshot().Account("acme").Limits.Sessions == 3
	})
	t.Logf("the raised rate held on both edges %v after the change", took.Round(time.Millisecond))

	if r := b.admin(http.MethodPatch, "/accounts/acme", `{"limits":{"rate":0.2,"burst":1}}`); r.status != http.StatusOK {
		t.Fatalf("lower: %d %s", r.status, r.body)
	}
	took = testenv.Eventually(t, 2*time.Second, "both edges take the lowered rate", func() bool {
		_, limitedA := burst(a, 3)
		_, limitedB := burst(b, 3)
		return limitedA > 0 && limitedB > 0
	})
	t.Logf("the lowered rate held on both edges %v after the change", took.Round(time.Millisecond))
}
