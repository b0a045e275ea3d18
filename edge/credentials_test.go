package edge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

func testKeyring(t testing.TB, lines ...string) *credentials.Keyring {
	t.Helper()
	if len(lines) == 0 {
		lines = []string{credentials.NewKeyLine()}
	}
	k, err := credentials.ParseKeyring(strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// mailTool needs a secret token and a user name for each account, sealed to key.
func mailTool(key nkeys.KeyPair) registry.Tool {
	pub, _ := key.PublicKey()
	return registry.Tool{ID: "mailbox", Methods: []registry.Method{{Name: "whoami"}},
		Connection: &wire.Connection{SealKey: pub, Fields: []wire.Field{
			{Name: "token", Secret: true, Description: "the mail service's API token"},
			{Name: "user", Description: "the account's user name there"},
		}}}
}

// TestConnectionCredentials: a tool's connection declares its fields; an account
// sets them through the admin API (write-only), calls of an account that lacks one
// are refused with connection_required naming it, and a call of one that has them
// reaches the tool's workers with the values sealed to the tool's key.
func TestConnectionCredentials(t *testing.T) {
	const canary = "canary-7f3a9c-secret-value"
	spans() // the edge's spans are kept, to be searched for the value
	e := newEnv(t, withCredentials(testKeyring(t)))
	toolKey, _ := nkeys.CreateCurveKeys()
	tool := mailTool(toolKey)
	var mu sync.Mutex
	var seen []nats.Header
	e.serve(tool, func(_ string, m *nats.Msg) {
		mu.Lock()
		seen = append(seen, m.Header)
		mu.Unlock()
		values, err := wire.OpenCredentials(toolKey, m.Header.Get(wire.HeaderCredentials), m.Header.Get(wire.HeaderAccount), "mailbox")
		if err != nil {
			respondError(m, "no_credentials", err.Error())
			return
		}
		b, _ := json.Marshal(map[string]bool{"token_ok": values["token"] == canary, "user_" + values["user"]: true})
		respond(m, 0, "application/json", b)
	})
	key := e.accountKey("acme", registry.Limits{}, nil)
	e.connect("acme", "mailbox")

	tools := decode[edge.ToolList](t, e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", key))
	if got := tools.Tools[0].Connection; got == nil || got.State != edge.ConnectionNeedsCredentials || !slices.Equal(got.Missing, []string{"token", "user"}) ||
		len(got.Fields) != 2 || !got.Fields[0].Secret || got.Fields[1].Description == "" {
		t.Fatalf("get-tools connection %+v, want needs_credentials missing token and user", got)
	}
	refused := e.call(key, "mailbox", "whoami", "{}").expect(t, http.StatusConflict, "connection_required")
	if !strings.Contains(refused.Message, "token, user") || len(refused.Details) != 1 {
		t.Fatalf("connection_required %+v: want the missing fields named, in the message and a detail", refused)
	}

	path := "/connections/acme/mailbox/credentials"
	bad := e.admin(http.MethodPut, path, `{"token":"x","colour":"`+canary+`"}`).expect(t, http.StatusBadRequest, "invalid_request")
	if !strings.Contains(bad.Message, "colour") || strings.Contains(bad.Message, canary) {
		t.Fatalf("unknown field: %q; want it named, and no value", bad.Message)
	}
	e.admin(http.MethodPut, path, `{"token":`+canary).expect(t, http.StatusBadRequest, "invalid_json")
	set := e.admin(http.MethodPut, path, `{"token":"`+canary+`","user":"ada"}`)
	if set.status != http.StatusOK || bytes.Contains(set.body, []byte(canary)) || bytes.Contains(set.body, []byte("ada\"")) {
		t.Fatalf("PUT: %d %s; want 200 without a value", set.status, set.body)
	}
	info := decode[edge.CredentialsInfo](t, e.admin(http.MethodGet, path, ""))
	if info.State.State != edge.ConnectionReady || len(info.Fields) != 2 || !info.Fields[0].Set || len(info.Fields[0].Fingerprint) != 12 {
		t.Fatalf("GET credentials: %+v", info)
	}

	answer := e.call(key, "mailbox", "whoami", "{}")
	if answer.status != http.StatusOK || string(answer.body) != `{"token_ok":true,"user_ada":true}` {
		t.Fatalf("call: %d %s; want the tool to have opened the account's values", answer.status, answer.body)
	}
	mu.Lock()
	for _, h := range seen {
		for k, vs := range h {
			if strings.Contains(strings.Join(vs, ","), canary) {
				t.Errorf("header %s on the bus holds the value in plaintext", k)
			}
		}
	}
	mu.Unlock()

	// PATCH removes a field with null; the connection needs it again.
	e.admin(http.MethodPatch, path, `{"user":null}`)
	tools = decode[edge.ToolList](t, e.do(http.MethodGet, "/get-tools", "", "SERVICE_API_KEY", key))
	if got := tools.Tools[0].Connection; got.State != edge.ConnectionNeedsCredentials || !slices.Equal(got.Missing, []string{"user"}) {
		t.Fatalf("after PATCH user null: %+v", got)
	}
	assertNoPlaintext(t, e, canary)
	if r := e.admin(http.MethodDelete, path, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	if info := decode[edge.CredentialsInfo](t, e.admin(http.MethodGet, path, "")); info.Fields[0].Set {
		t.Fatalf("after DELETE: %+v", info)
	}

	// An account deleted takes its connections' values with it.
	e.admin(http.MethodPut, path, `{"token":"`+canary+`","user":"ada"}`)
	if r := e.admin(http.MethodDelete, "/accounts/acme", ""); r.status != http.StatusNoContent {
		t.Fatalf("delete the account: %d %s", r.status, r.body)
	}
	if _, _, err := e.vault.Read(testenv.Context(t), "acme", "mailbox"); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("the deleted account's values: %v, want none", err)
	}
}

// assertNoPlaintext searches every stream on the bus, the edge's log and the spans
// ended so far (the test calls spans() before its edges start) for value.
func assertNoPlaintext(t *testing.T, e *env, value string) {
	t.Helper()
	if read := testenv.SearchStreams(t, e.nc, value); read["KV_"+credentials.Bucket] == 0 {
		t.Fatalf("the credentials bucket holds no message to search (read %v)", read)
	}
	if strings.Contains(e.logs.String(), value) {
		t.Error("the edge's log holds the value")
	}
	ended, err := json.Marshal(spans().GetSpans())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ended, []byte("/tool-call/:tool/:method")) {
		t.Fatal("no span of a tool call to search")
	}
	if bytes.Contains(ended, []byte(value)) {
		t.Error("a span holds the value")
	}
}

// TestCredentialsKeyRotation: records written under one key are wrapped again under
// a new one, and then open with the new key alone.
func TestCredentialsKeyRotation(t *testing.T) {
	oldLine, newLine := credentials.NewKeyLine(), strings.Replace(credentials.NewKeyLine(), "k", "n", 1)
	e := newEnv(t, withCredentials(testKeyring(t, oldLine)))
	toolKey, _ := nkeys.CreateCurveKeys()
	tool := mailTool(toolKey)
	e.deploy(tool)
	e.account("acme", registry.Limits{})
	e.connect("acme", "mailbox")
	e.admin(http.MethodPut, "/connections/acme/mailbox/credentials", `{"token":"t0k","user":"ada"}`)

	ctx := testenv.Context(t)
	both, err := credentials.Open(ctx, e.store, testKeyring(t, newLine, oldLine), false)
	if err != nil {
		t.Fatal(err)
	}
	n, total, err := both.Rotate(ctx)
	if err != nil || n != 1 || total != 1 {
		t.Fatalf("rotate: %d of %d, %v; want 1 of 1", n, total, err)
	}
	if n, _, _ := both.Rotate(ctx); n != 0 {
		t.Fatalf("a second rotation wrapped %d again, want 0", n)
	}
	onlyNew, err := credentials.Open(ctx, e.store, testKeyring(t, newLine), false)
	if err != nil {
		t.Fatal(err)
	}
	header, missing, err := onlyNew.Seal(context.Background(), "acme", &tool)
	if err != nil || len(missing) > 0 || header == "" {
		t.Fatalf("seal after rotation: %q %v %v", header, missing, err)
	}
	values, err := wire.OpenCredentials(toolKey, header, "acme", "mailbox")
	if err != nil || values["token"] != "t0k" {
		t.Fatalf("open: %v %v", values, err)
	}
	testenv.WaitFor(t, "an edge holding the old key alone no longer opens the record", func() bool {
		_, _, err := e.vault.Seal(ctx, "acme", &tool)
		return err != nil
	})
	// What a key no longer held wrapped can still be replaced whole (PUT), not patched.
	path := "/connections/acme/mailbox/credentials"
	if r := e.admin(http.MethodPatch, path, `{"user":"bob"}`); r.status != http.StatusInternalServerError {
		t.Fatalf("PATCH of a record this edge cannot open: %d %s", r.status, r.body)
	}
	if r := e.admin(http.MethodPut, path, `{"token":"t1","user":"bob"}`); r.status != http.StatusOK {
		t.Fatalf("PUT over a record this edge cannot open: %d %s", r.status, r.body)
	}
}
