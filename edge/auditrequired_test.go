package edge_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// TestAuditRequiredFailsClosed: an account that requires audit (set with PATCH
// /admin/accounts) has its calls refused with 503 audit_unavailable while the
// trail's stream is gone: the first, whose record fails after the tool ran, without
// the tool's answer; the next ones before they reach the tool. Another account's calls
// are served meanwhile and their records counted lost. An MCP client of the
// account's link gets the refusal as the tool's result. Once the stream is back, the
// account's calls are served again, each with its record.
func TestAuditRequiredFailsClosed(t *testing.T) {
	e := newEnv(t, withAudit(), withMCP())
	var ran atomic.Int64
	e.serve(echoTool, func(method string, m *nats.Msg) {
		ran.Add(1)
		echo(method, m)
	})
	strict := e.account("strict", registry.Limits{})
	lax := e.account("lax", registry.Limits{})
	link := e.signer.Token("strict", "echo", e.connect("strict", "echo").LinkNonce)
	e.connect("lax", "echo")

	for _, bad := range []string{`{"audit":{"required":"yes"}}`, `{"audit":{"max_data_size":-1}}`, `{"audit":{"max_data_size":262145}}`, `{"audit":{"include_args":true}}`, `{"audit":[]}`} {
		e.admin(http.MethodPatch, "/accounts/strict", bad).expect(t, http.StatusBadRequest, gateway.CodeInvalidRequest)
	}
	e.admin(http.MethodPatch, "/accounts/strict", `{"audit":{"max_data_size":262144}}`).expectOK(t)
	r := e.admin(http.MethodPatch, "/accounts/strict", `{"audit":{"required":true,"max_data_size":null}}`)
	if a := decode[registry.Account](t, r); r.status != http.StatusOK || !a.Audit.Required || a.Audit.IncludeArguments || a.Audit.MaxDataSize != 0 {
		t.Fatalf("PATCH audit.required: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "the edge sees the account require audit", func() bool {
		a := e.view.Snapshot().Account("strict")
		return a != nil && a.Audit.Required
	})
	e.call(strict, "echo", "echo", `{"n":1}`).expectOK(t)
	e.awaitRecords(url.Values{"account": {"strict"}, "kind": {audit.KindCall}}, 1)

	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(testenv.Context(t), wire.DefaultSubjects.AuditStream()); err != nil {
		t.Fatal(err)
	}
	before := ran.Load()
	e.call(strict, "echo", "echo", `{"n":2}`).expect(t, http.StatusServiceUnavailable, gateway.CodeAuditUnavailable)
	if ran.Load() != before+1 {
		t.Fatalf("the first call after the stream went: the tool ran %d times, want once", ran.Load()-before)
	}
	for range 3 {
		r := e.call(strict, "echo", "echo", `{"n":3}`)
		r.expect(t, http.StatusServiceUnavailable, gateway.CodeAuditUnavailable)
		if r.header.Get("Retry-After") == "" {
			t.Errorf("audit_unavailable without Retry-After: %v", r.header)
		}
	}
	// An MCP client of the account's link reads the refusal in the tool's result.
	answer := streamableCall(t, e.url+"/mcp/"+link, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"n":3}}}`)
	if !strings.Contains(string(answer), `"isError":true`) || !strings.Contains(string(answer), "audit trail cannot be written") {
		t.Errorf("MCP tools/call while the trail fails: %s", answer)
	}
	if ran.Load() != before+1 {
		t.Fatalf("calls refused while the trail fails reached the tool: %d runs", ran.Load()-before)
	}
	e.call(lax, "echo", "echo", `{"n":4}`).expectOK(t)
	testenv.WaitFor(t, "the lost records are counted", func() bool {
		m := string(e.do(http.MethodGet, "/metrics", "").body)
		return !strings.Contains(m, "toolgate_audit_write_failures_total 0\n") && strings.Contains(m, "toolgate_audit_write_failures_total ")
	})

	// The stream is made again (as an edge starting would); the next call's refusal is
	// written, and the calls after it are served.
	if _, err := audit.Open(testenv.Context(t), e.nc, audit.Options{}, testenv.Logger(t)); err != nil {
		t.Fatal(err)
	}
	testenv.WaitFor(t, "the account's calls are served again", func() bool {
		return e.call(strict, "echo", "echo", `{"n":5}`).status == http.StatusOK
	})
	recs := e.awaitRecords(url.Values{"account": {"strict"}, "kind": {audit.KindCall}, "outcome": {audit.OutcomeOK}}, 1)
	if recs[0].ID == "" || recs[0].ArgsSHA256 != sha(`{"n":5}`) {
		t.Fatalf("the record of the call served again: %+v", recs[0])
	}
	r = e.admin(http.MethodPatch, "/accounts/strict", `{"audit":null}`)
	if a := decode[registry.Account](t, r); r.status != http.StatusOK || a.Audit != (registry.AuditSettings{}) {
		t.Fatalf(`PATCH {"audit":null}: %d %s`, r.status, r.body)
	}
}

// TestAuditRequiredWithoutTrail: an edge that keeps no trail (--no-audit) refuses
// every call of an account that requires audit before it reaches the tool, and serves
// another account's.
func TestAuditRequiredWithoutTrail(t *testing.T) {
	e := newEnv(t)
	var ran atomic.Int64
	e.serve(echoTool, func(method string, m *nats.Msg) {
		ran.Add(1)
		echo(method, m)
	})
	strict := e.account("strict", registry.Limits{})
	lax := e.account("lax", registry.Limits{})
	e.connect("strict", "echo")
	e.connect("lax", "echo")
	e.admin(http.MethodPatch, "/accounts/strict", `{"audit":{"required":true}}`).expectOK(t)
	testenv.WaitFor(t, "the edge sees the account require audit", func() bool { return e.view.Snapshot().Account("strict").Audit.Required })
	e.call(strict, "echo", "echo", `{}`).expect(t, http.StatusServiceUnavailable, gateway.CodeAuditUnavailable)
	e.call(lax, "echo", "echo", `{}`).expectOK(t)
	if ran.Load() != 1 {
		t.Fatalf("the tool ran %d times, want once (the other account's call)", ran.Load())
	}
}
