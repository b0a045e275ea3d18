package edge_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// vaultTool's login takes a password (writeOnly), a profile whose api_key is secret
// (x-secret) and tokens whose values are (through $ref), and answers a session
// (writeOnly in its output schema) with the user's name.
var vaultTool = registry.Tool{ID: "vault", Title: "Vault", Version: "1.0.0", Methods: []registry.Method{{
	Name: "login",
	InputSchema: json.RawMessage(`{"type":"object","properties":{
		"user":{"type":"string"},
		"password":{"type":"string","writeOnly":true},
		"profile":{"type":"object","properties":{"name":{"type":"string"},"api_key":{"type":"string","x-secret":true}}},
		"tokens":{"type":"array","items":{"$ref":"#/$defs/token"}}},
		"$defs":{"token":{"type":"object","properties":{"label":{"type":"string"},"value":{"type":"string","x-secret":true}}}}}`),
	OutputSchema: json.RawMessage(`{"type":"object","properties":{"session":{"type":"string","writeOnly":true},"user":{"type":"string"}}}`),
}}}

// TestAuditKeepsArgumentsWithoutSecrets: an account that asks for its calls'
// arguments and results (PATCH /admin/accounts) has them in its records, by REST, the
// direct tool API, a call that outlives its request and the three MCP transports,
// through two edges; the values the tool's schemas mark secret are in no record, no
// message of the trail and no file of the stream, and the records say where they
// were left out. Past the account's size, the arguments are cut, and the record says
// so.
func TestAuditKeepsArgumentsWithoutSecrets(t *testing.T) {
	a := newEnv(t, withAudit(), withMCP())
	b := newEnv(t, onServer(a.srv.ClientURL()), withAudit(), withMCP())
	canary := "canary-" + registry.NewKey()[4:20]
	a.serve(vaultTool, func(_ string, m *nats.Msg) {
		respond(m, 0, "application/json", []byte(`{"session":"`+canary+`-session","user":"ada"}`))
	})
	key := a.account("acme", registry.Limits{Rate: 1e6, Burst: 1 << 20})
	link := a.signer.Token("acme", "vault", a.connect("acme", "vault").LinkNonce)
	r := a.admin(http.MethodPatch, "/accounts/acme", `{"audit":{"include_arguments":true,"include_result":true,"max_data_size":4096}}`)
	if got := decode[registry.Account](t, r); r.status != http.StatusOK || !got.Audit.IncludeArguments || !got.Audit.IncludeResult || got.Audit.MaxDataSize != 4096 {
		t.Fatalf("PATCH audit: %d %s", r.status, r.body)
	}
	testenv.WaitFor(t, "both edges see the key, the link, the tool and the settings", func() bool {
		for _, e := range []*env{a, b} {
			snap := e.view.Snapshot()
			_, kerr := snap.AuthenticateKey(key, time.Now())
			_, lerr := snap.AuthenticateLink(link)
			if acc := snap.Account("acme"); kerr != nil || lerr != nil || snap.Instances("vault") == 0 || acc == nil || !acc.Audit.IncludeResult {
				return false
			}
		}
		return true
	})

	args := `{"user":"ada","password":"` + canary + `-pw","profile":{"name":"Ada","api_key":"` + canary + `-key"},` +
		`"tokens":[{"label":"t1","value":"` + canary + `-t1"}]}`
	a.call(key, "vault", "login", args).expectOK(t)
	b.do(http.MethodPost, "/tools/vault/login", args, "SERVICE_API_KEY", key).expectOK(t)
	started := a.call(key, "vault", "login", args, "Prefer", "respond-async")
	if started.status != http.StatusAccepted {
		t.Fatalf("respond-async: %d %s", started.status, started.body)
	}
	testenv.WaitFor(t, "the call that outlives its request ends", func() bool {
		r := a.do(http.MethodGet, started.header.Get("Location"), "", "SERVICE_API_KEY", key)
		return r.header.Get("Tg-Call-Status") == string(calls.Completed) || r.status == http.StatusOK
	})
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"login","arguments":` + args + `}}`
	streamableCall(t, b.url+"/mcp/"+link, call)
	legacyCall(t, a.url+"/mcp/"+link, call)
	statelessCall(t, b.url+"/mcp/"+link, "login", args)

	records := a.awaitRecords(url.Values{"account": {"acme"}, "kind": {audit.KindCall}}, 6)
	transports := map[string]bool{}
	for _, rec := range records {
		transports[rec.Transport] = true
		raw, _ := json.Marshal(rec)
		if strings.Contains(string(raw), canary) {
			t.Errorf("a record holds a secret: %s", raw)
		}
		if !strings.Contains(string(rec.Arguments), `"label":"t1"`) || !strings.Contains(string(rec.Arguments), `"name":"Ada"`) ||
			!strings.Contains(string(rec.Result), `"ada"`) || rec.ArgumentsCut || rec.ResultCut || rec.ArgsSHA256 != sha(args) {
			t.Errorf("%s record: arguments %s, result %s", rec.Transport, rec.Arguments, rec.Result)
		}
		for _, p := range []string{"/arguments/password", "/arguments/profile/api_key", "/arguments/tokens/0/value"} {
			if !slices.Contains(rec.Secret, p) {
				t.Errorf("%s record: secret %v, want %s among them", rec.Transport, rec.Secret, p)
			}
		}
	}
	for _, tr := range []string{audit.TransportREST, audit.TransportDirect, audit.TransportMCPStreamable, audit.TransportMCPLegacy, audit.TransportMCP2026} {
		if !transports[tr] {
			t.Errorf("no record by %s: %v", tr, transports)
		}
	}
	assertTrailLacks(t, a, canary)

	// Past the size, cut, and said so.
	a.admin(http.MethodPatch, "/accounts/acme", `{"audit":{"max_data_size":40}}`).expectOK(t)
	testenv.WaitFor(t, "the edge sees the size", func() bool { return a.view.Snapshot().Account("acme").Audit.MaxDataSize == 40 })
	id := a.call(key, "vault", "login", args).header.Get("X-Request-Id")
	for _, rec := range a.awaitRecords(url.Values{"account": {"acme"}, "kind": {audit.KindCall}}, 7) {
		if rec.RequestID != id {
			continue
		}
		var s string
		if err := json.Unmarshal(rec.Arguments, &s); err != nil || !rec.ArgumentsCut || len(s) > 40 || strings.Contains(s, canary) {
			t.Fatalf("cut record: %s (%v), cut %v", rec.Arguments, err, rec.ArgumentsCut)
		}
	}
}

// assertTrailLacks checks that no message of the trail, and no file the server keeps
// the stream in, holds s.
func assertTrailLacks(t *testing.T, e *env, s string) {
	t.Helper()
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testenv.Context(t)
	stream, err := js.Stream(ctx, wire.DefaultSubjects.AuditStream())
	if err != nil {
		t.Fatal(err)
	}
	for seq := uint64(1); seq <= stream.CachedInfo().State.LastSeq; seq++ {
		msg, err := stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		if raw := fmt.Sprint(msg.Subject, msg.Header, string(msg.Data)); strings.Contains(raw, s) {
			t.Fatalf("message %d of the trail holds %s: %s", seq, s, raw)
		}
	}
	if bytes.Contains(trailFiles(t, e.srv.StoreDir()), []byte(s)) {
		t.Fatalf("the trail's files hold %s", s)
	}
}
