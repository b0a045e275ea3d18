package edge_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// auditPage reads the trail through e's admin API.
func (e *env) auditPage(query url.Values) audit.Page {
	e.t.Helper()
	r := e.admin(http.MethodGet, "/audit?"+query.Encode(), "")
	if r.status != http.StatusOK {
		e.t.Fatalf("GET /admin/audit?%s: %d %s", query.Encode(), r.status, r.body)
	}
	return decode[audit.Page](e.t, r)
}

// awaitRecords waits until the trail holds n records query picks, and then a moment
// longer, to see that no more come: exactly n.
func (e *env) awaitRecords(query url.Values, n int) []audit.Record {
	e.t.Helper()
	query.Set("limit", fmt.Sprint(audit.MaxLimit))
	var got []audit.Record
	testenv.WaitFor(e.t, fmt.Sprintf("%d records of %s in the trail", n, query.Encode()), func() bool {
		got = e.auditPage(query).Records
		return len(got) >= n
	})
	time.Sleep(300 * time.Millisecond)
	if got = e.auditPage(query).Records; len(got) != n {
		e.t.Fatalf("%d records of %s in the trail, want exactly %d: %+v", len(got), query.Encode(), n, got)
	}
	return got
}

func keyID(t *testing.T, e *env, secret string) string {
	t.Helper()
	p, err := e.view.Snapshot().AuthenticateKey(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p.Key.ID
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// twoAuditedEdges are two edges serving MCP on one NATS server, each writing the
// audit trail, with the e-mail tool (whose "fail" subject the tool refuses) connected
// to account acme.
func twoAuditedEdges(t *testing.T) (a, b *env, key, link string) {
	t.Helper()
	a = newEnv(t, withAudit(), withMCP())
	b = newEnv(t, onServer(a.srv.ClientURL()), withAudit(), withMCP())
	a.serve(emailTool, func(method string, m *nats.Msg) {
		if bytes.Contains(m.Data, []byte(`"subject":"fail"`)) {
			respondError(m, "bounced", "the mail bounced")
			return
		}
		echo(method, m)
	})
	key = a.account("acme", registry.Limits{Rate: 1e6, Burst: 1 << 20})
	conn := a.connect("acme", "email")
	link = a.signer.Token("acme", "email", conn.LinkNonce)
	testenv.WaitFor(t, "edge b sees the key, the link and the tool", func() bool {
		snap := b.view.Snapshot()
		_, kerr := snap.AuthenticateKey(key, time.Now())
		_, lerr := snap.AuthenticateLink(link)
		return kerr == nil && lerr == nil && snap.Instances("email") > 0
	})
	return a, b, key, link
}

// TestAuditRecordsEveryCallOnce: calls through two edges, by REST, the direct tool
// API and the three MCP transports, answered or refused on the way, leave exactly one
// record each in the trail, with who called what, how and how it ended.
func TestAuditRecordsEveryCallOnce(t *testing.T) {
	a, b, key, link := twoAuditedEdges(t)
	id := keyID(t, a, key)
	type want struct {
		edge                 *env
		transport, method    string
		body, outcome        string
		status, responseSize int
	}
	wants := map[string]want{} // by request id
	call := func(e *env, path, method, body, outcome string, status int, headers ...string) {
		t.Helper()
		r := e.do(http.MethodPost, path+"email/"+method, body, append([]string{"SERVICE_API_KEY", key}, headers...)...)
		if r.status != status {
			t.Fatalf("%s%s: %d %s, want %d", path, method, r.status, r.body, status)
		}
		transport, size := audit.TransportREST, 0
		if path == "/tools/" {
			transport = audit.TransportDirect
		}
		if status == http.StatusOK {
			size = len(r.body)
		}
		wants[r.header.Get("X-Request-Id")] = want{e, transport, method, body, outcome, status, size}
	}
	const answered = 20
	for i := range answered {
		e, path := []*env{a, b}[i%2], []string{"/tool-call/", "/tools/"}[i/2%2]
		call(e, path, "send_email", fmt.Sprintf(`{"to":"ada@example.com","subject":"s%d","body":"hello"}`, i), audit.OutcomeOK, http.StatusOK)
	}
	call(a, "/tool-call/", "send_email", `{"to":"ada@example.com"}`, edge.CodeInvalidParams, http.StatusBadRequest)
	call(b, "/tools/", "send_email", `{"to":"ada@example.com","subject":"fail","body":"x"}`, edge.CodeToolError, http.StatusBadGateway)
	call(a, "/tools/", "unsend", `{}`, edge.CodeMethodNotFound, http.StatusNotFound)
	call(b, "/tool-call/", "send_email", goodEmail, edge.CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Content-Type", "text/plain")

	args := `{"to":"ada@example.com","subject":"mcp","body":"hello"}`
	mcpCall := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_email","arguments":` + args + `}}`
	streamableCall(t, b.url+"/mcp/"+link, mcpCall)
	legacyCall(t, a.url+"/mcp/"+link, mcpCall)
	statelessCall(t, b.url+"/mcp/"+link, "send_email", args)

	records := a.awaitRecords(url.Values{"account": {"acme"}, "kind": {audit.KindCall}}, len(wants)+3)
	mcp := map[string]int{}
	for _, r := range records {
		if r.Time.IsZero() || r.Seq == 0 || r.Tool != "email" || r.LatencyUS < 0 {
			t.Errorf("record %+v: want a time, a seq, the tool and a latency", r)
		}
		if strings.HasPrefix(r.Transport, audit.TransportMCP) {
			mcp[r.Transport]++
			if !r.Link || r.Key != "" || r.Method != "send_email" || r.Outcome != audit.OutcomeOK || r.Status != 0 ||
				r.ArgsSHA256 != sha(args) || r.RequestBytes != len(args) || r.ResponseBytes != len(args) || r.Worker != "" {
				t.Errorf("MCP record %+v", r)
			}
			continue
		}
		w, ok := wants[r.RequestID]
		if !ok {
			t.Errorf("a record of no call made: %+v", r)
			continue
		}
		delete(wants, r.RequestID)
		if r.Edge != w.edge.name || r.Transport != w.transport || r.Method != w.method || r.Key != id || r.Link ||
			r.Outcome != w.outcome || r.Status != w.status || r.ResponseBytes != w.responseSize {
			t.Errorf("record %+v, want %+v", r, w)
		}
		if w.outcome != edge.CodeMethodNotFound && w.outcome != edge.CodeUnsupportedMediaType &&
			(r.ArgsSHA256 != sha(w.body) || r.RequestBytes != len(w.body)) {
			t.Errorf("record %+v: the arguments' digest or size is not of %s", r, w.body)
		}
	}
	if mcp[audit.TransportMCPStreamable] != 1 || mcp[audit.TransportMCPLegacy] != 1 || mcp[audit.TransportMCP2026] != 1 || len(wants) != 0 {
		t.Fatalf("MCP records by transport %v, want one of each; calls without a record: %+v", mcp, wants)
	}
}

// TestAuditFiltersAndCursor: GET /admin/audit picks records by tool, method, outcome,
// kind and time, and pages through them by the cursor, each once, in order.
func TestAuditFiltersAndCursor(t *testing.T) {
	e := newEnv(t, withAudit())
	e.serve(emailTool, echo)
	e.serve(echoTool, echo)
	key := e.account("acme", registry.Limits{Rate: 1e6, Burst: 1 << 20})
	e.connect("acme", "email")
	e.connect("acme", "echo")
	for i := range 5 {
		e.call(key, "email", "send_email", goodEmail).expectOK(t)
		if i < 3 {
			e.call(key, "email", "send_email", `{}`).expect(t, http.StatusBadRequest, edge.CodeInvalidParams)
		}
	}
	e.awaitRecords(url.Values{"account": {"acme"}}, 8)
	between := time.Now()
	for range 4 {
		e.call(key, "echo", "echo", `{"n":1}`).expectOK(t)
	}
	if r := e.admin(http.MethodPatch, "/accounts/acme", `{"name":"Acme"}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.body)
	}
	all := e.awaitRecords(url.Values{"account": {"acme"}}, 13)

	for _, tc := range []struct {
		query url.Values
		want  int
	}{
		{url.Values{"tool": {"echo"}}, 4},
		{url.Values{"method": {"send_email"}, "outcome": {edge.CodeInvalidParams}}, 3},
		{url.Values{"tool": {"email"}, "outcome": {audit.OutcomeOK}}, 5},
		{url.Values{"kind": {audit.KindAdmin}}, 1},
		{url.Values{"account": {"other"}}, 0},
		{url.Values{"until": {between.Format(time.RFC3339Nano)}}, 8},
		{url.Values{"since": {between.Format(time.RFC3339Nano)}}, 5},
		{url.Values{"since": {"1h"}, "kind": {audit.KindCall}}, 12},
	} {
		t.Run(tc.query.Encode()+" picks "+fmt.Sprint(tc.want), func(t *testing.T) {
			tc.query.Set("limit", "100")
			if got := e.auditPage(tc.query).Records; len(got) != tc.want {
				t.Fatalf("%d records, want %d: %+v", len(got), tc.want, got)
			}
		})
	}

	t.Run("the cursor pages through every record once, in order", func(t *testing.T) {
		var paged []audit.Record
		q := url.Values{"account": {"acme"}, "limit": {"3"}}
		for {
			page := e.auditPage(q)
			paged = append(paged, page.Records...)
			if !page.More {
				break
			}
			if len(page.Records) != 3 {
				t.Fatalf("a page of %d records with more to come, want 3", len(page.Records))
			}
			q.Set("after", fmt.Sprint(page.Next))
		}
		if len(paged) != len(all) {
			t.Fatalf("paged %d records, want %d", len(paged), len(all))
		}
		for i := range all {
			if !reflect.DeepEqual(paged[i], all[i]) || (i > 0 && paged[i].Seq <= paged[i-1].Seq) {
				t.Fatalf("record %d: paged %+v, want %+v", i, paged[i], all[i])
			}
		}
	})

	for _, bad := range []struct{ query, pointer string }{
		{"limit=0", "/limit"},
		{"limit=1001", "/limit"},
		{"limit=many", "/limit"},
		{"after=-1", "/after"},
		{"since=yesterday", "/since"},
		{"until=-5m", "/until"},
		{"outcome=meh", "/outcome"},
		{"kind=other", "/kind"},
		{"account=Not_An_ID", "/account"},
		{"tool=a.b", "/tool"},
	} {
		t.Run(bad.query+" is refused naming "+bad.pointer, func(t *testing.T) {
			got := e.admin(http.MethodGet, "/audit?"+bad.query, "").expect(t, http.StatusBadRequest, edge.CodeInvalidRequest)
			if !jsonContains(got.Details, `"pointer":"`+bad.pointer+`"`) {
				t.Fatalf("details %+v do not name %s", got.Details, bad.pointer)
			}
		})
	}
}

func (r result) expectOK(t *testing.T) {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
}

// TestAuditRecordsAdminChanges: each change of the admin API leaves a record of what
// it did to which account, key and tool.
func TestAuditRecordsAdminChanges(t *testing.T) {
	e := newEnv(t, withAudit())
	e.deploy(echoTool)
	var keyID string
	for _, step := range []struct {
		method, path, body string
		status             int
	}{
		{http.MethodPost, "/accounts", `{"id":"acme"}`, http.StatusCreated},
		{http.MethodPatch, "/accounts/acme", `{"limits":{"rate":5}}`, http.StatusOK},
		{http.MethodPost, "/keys", `{"account":"acme"}`, http.StatusCreated},
		{http.MethodPost, "/connections", `{"account":"acme","tool":"echo"}`, http.StatusCreated},
		{http.MethodPost, "/links/acme/echo/rotate", "", http.StatusOK},
		{http.MethodDelete, "/keys/{key}", "", http.StatusOK},
		{http.MethodDelete, "/connections/acme/echo", "", http.StatusNoContent},
		{http.MethodDelete, "/accounts/acme", "", http.StatusNoContent},
	} {
		r := e.admin(step.method, strings.ReplaceAll(step.path, "{key}", keyID), step.body)
		if r.status != step.status {
			t.Fatalf("%s %s: %d %s", step.method, step.path, r.status, r.body)
		}
		if step.path == "/keys" {
			keyID = decode[edge.NewKey](t, r).ID
		}
	}
	e.admin(http.MethodPatch, "/accounts/acme", `{"name":"gone"}`).expect(t, http.StatusNotFound, edge.CodeNotFound)

	got := e.awaitRecords(url.Values{"kind": {audit.KindAdmin}}, 8)
	want := []audit.Record{
		{Method: audit.ActionCreateAccount, Status: http.StatusCreated},
		{Method: audit.ActionUpdateAccount, Status: http.StatusOK},
		{Method: audit.ActionCreateKey, Key: keyID, Status: http.StatusCreated},
		{Method: audit.ActionConnect, Tool: "echo", Status: http.StatusCreated},
		{Method: audit.ActionRotateLink, Tool: "echo", Status: http.StatusOK},
		{Method: audit.ActionRevokeKey, Key: keyID, Status: http.StatusOK},
		{Method: audit.ActionDisconnect, Tool: "echo", Status: http.StatusNoContent},
		{Method: audit.ActionDeleteAccount, Status: http.StatusNoContent},
	}
	for i, r := range got {
		w := want[i]
		if r.Kind != audit.KindAdmin || r.Account != "acme" || r.Method != w.Method || r.Key != w.Key || r.Tool != w.Tool ||
			r.Status != w.Status || r.Outcome != audit.OutcomeOK || r.Transport != audit.TransportAdmin || r.Edge != e.name || r.RequestID == "" {
			t.Errorf("record %d: %+v, want %+v", i, r, w)
		}
	}
}

// TestAuditKeepsNoArguments: a call's arguments never reach the trail, neither the
// messages of its stream nor the files the server keeps it in; their digest does.
func TestAuditKeepsNoArguments(t *testing.T) {
	a, b, key, link := twoAuditedEdges(t)
	canary := "canary-" + registry.NewKey()[4:20]
	args := `{"to":"ada@example.com","subject":"` + canary + `","body":"` + canary + `"}`
	ids := []string{
		a.call(key, "email", "send_email", args).header.Get("X-Request-Id"),
		b.do(http.MethodPost, "/tools/email/send_email", args, "SERVICE_API_KEY", key).header.Get("X-Request-Id"),
	}
	streamableCall(t, a.url+"/mcp/"+link, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"send_email","arguments":`+args+`}}`)
	statelessCall(t, b.url+"/mcp/"+link, "send_email", args)
	for _, r := range a.awaitRecords(url.Values{"account": {"acme"}}, 4) {
		if r.ArgsSHA256 != sha(args) {
			t.Errorf("record %+v: digest %s, want %s", r, r.ArgsSHA256, sha(args))
		}
	}

	// The server's own files of the stream: the records are there (their request
	// ids), the arguments are not.
	testenv.WaitFor(t, "the trail's files hold the records", func() bool {
		files := trailFiles(t, a.srv.StoreDir())
		return bytes.Contains(files, []byte(ids[0])) && bytes.Contains(files, []byte(ids[1]))
	})
	assertTrailLacks(t, a, canary)
}

// trailFiles is every file of the audit stream under the server's store dir, joined.
func trailFiles(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(path, wire.DefaultSubjects.AuditStream()) {
			return err
		}
		b, err := os.ReadFile(path)
		all = append(all, b...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestAuditLostIsCounted: with the trail's stream gone, the calls of an account that
// does not require audit are answered as ever, and the records that could not be
// written are counted in /metrics.
func TestAuditLostIsCounted(t *testing.T) {
	e := newEnv(t, withAudit())
	e.serve(echoTool, echo)
	key := e.account("acme", registry.Limits{})
	e.connect("acme", "echo")
	if r := e.do(http.MethodGet, "/metrics", ""); !strings.Contains(string(r.body), "toolgate_audit_write_failures_total 0") {
		t.Fatalf("/metrics without toolgate_audit_write_failures_total 0:\n%s", r.body)
	}
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	if err := js.DeleteStream(testenv.Context(t), wire.DefaultSubjects.AuditStream()); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		e.call(key, "echo", "echo", `{}`).expectOK(t)
	}
	testenv.WaitFor(t, "the failed records are counted", func() bool {
		r := e.do(http.MethodGet, "/metrics", "")
		return strings.Contains(string(r.body), "toolgate_audit_write_failures_total 3")
	})
}
