package mcpbridge_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/workers"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// TestTemplatesMakeConnectionFields: every {field} of --env and --header is a secret
// field of the tool's connection, and the shared sessions' processes run without the
// variables that name one.
func TestTemplatesMakeConnectionFields(t *testing.T) {
	cfg := mcpbridge.DefaultConfig()
	cfg.Tool, cfg.Command = "gh", []string{"server"}
	cfg.Env = []string{"GITHUB_TOKEN={token}", "GITHUB_HOST=api.example.com", "PAIR={user}:{token}"}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	fields := cfg.ConnectionFields()
	if len(fields) != 2 || fields[0].Name != "token" || !fields[0].Secret || fields[1].Name != "user" ||
		!strings.Contains(fields[0].Description, "$GITHUB_TOKEN and $PAIR") {
		t.Fatalf("fields %+v", fields)
	}
	for _, bad := range [][]string{{"1X=a"}, {"A"}, {"A=1", "A=2"}} {
		cfg.Env = bad
		if err := cfg.Validate(); err == nil {
			t.Errorf("env %q: no error", bad)
		}
	}
	cfg.Command, cfg.URL, cfg.Env = nil, "https://mcp.example.com/mcp", []string{"A=b"}
	if err := cfg.Validate(); err == nil {
		t.Error("env with a --url server: no error")
	}
}

// TestAccountSessions: a server that acts per account runs each account's calls on a
// process started with that account's values, at most AccountSessions at once, each
// ended once idle for AccountIdle; a call that brings no values runs on the shared
// sessions, whose process has no token.
func TestAccountSessions(t *testing.T) {
	e := newEnv(t)
	cfg := stdioConfig("peracct", 1)
	cfg.Env = []string{mcpfixture.EnvTokenVar + "={token}"}
	cfg.AccountSessions, cfg.AccountIdle = 2, 2*time.Second // longer than the asks below take on a loaded machine
	sealKey, _ := nkeys.CreateCurveKeys()
	b := e.startWith(cfg, workers.WithSealKey(sealKey))
	pub, _ := sealKey.PublicKey()
	rec := e.view.Snapshot().RawTool("peracct").Tool
	if rec.Connection == nil || rec.Connection.SealKey != pub || len(rec.Connection.Fields) != 1 || rec.Connection.Fields[0].Name != "token" {
		t.Fatalf("the tool's connection %+v", rec.Connection)
	}

	ask := func(account, token string) (mcpfixture.Identity, error) {
		t.Helper()
		return e.identity(t, "peracct", pub, account, token)
	}
	one, err := ask("a1", "token-one")
	if err != nil || one.Identity != mcpfixture.IdentityOf("token-one", 0).Identity {
		t.Fatalf("a1: %+v %v", one, err)
	}
	two, err := ask("a2", "token-two")
	if err != nil || two.Identity != mcpfixture.IdentityOf("token-two", 0).Identity || two.PID == one.PID {
		t.Fatalf("a2: %+v %v, a1's %+v", two, err, one)
	}
	if again, _ := ask("a1", "token-one"); again.PID != one.PID {
		t.Fatalf("a1 again ran in process %d, not its own %d", again.PID, one.PID)
	}
	if _, err := ask("a3", "token-three"); err == nil || !strings.Contains(err.Error(), mcpbridge.CodeSessionLimit) {
		t.Fatalf("a third account past account-sessions 2: %v", err)
	}
	shared, err := ask("a4", "")
	if err != nil || shared.Identity != "" || slices.Contains([]int{one.PID, two.PID}, shared.PID) {
		t.Fatalf("a call without values: %+v %v", shared, err)
	}
	testenv.WaitFor(t, "the idle account sessions end", func() bool { return b.AccountSessions() == 0 })

	// A client session's server acts with its account's values, and starts again
	// when they change.
	first, err := e.identityIn(t, "peracct", pub, "a1", "token-one", "sess-1")
	if err != nil || first.Identity != mcpfixture.IdentityOf("token-one", 0).Identity {
		t.Fatalf("a1 in a session: %+v %v", first, err)
	}
	changed, err := e.identityIn(t, "peracct", pub, "a1", "token-new", "sess-1")
	if err != nil || changed.Identity != mcpfixture.IdentityOf("token-new", 0).Identity || changed.PID == first.PID {
		t.Fatalf("a1 in the session after a new token: %+v %v, before %+v", changed, err, first)
	}
	if three, err := ask("a3", "token-three"); err != nil || three.Identity != mcpfixture.IdentityOf("token-three", 0).Identity {
		t.Fatalf("a3 once the others ended: %+v %v", three, err)
	}
}

// identity calls env_identity of tool as account, with token sealed to pub as the
// edge would send it ("" for none), straight on the bus.
func (e *env) identity(t *testing.T, tool, pub, account, token string) (mcpfixture.Identity, error) {
	t.Helper()
	return e.identityIn(t, tool, pub, account, token, "")
}

// identityIn is identity in the MCP session session ("" for none).
func (e *env) identityIn(t *testing.T, tool, pub, account, token, session string) (mcpfixture.Identity, error) {
	t.Helper()
	req := &wire.Request{Tool: tool, Method: mcpfixture.EnvHashToolName, CallID: account + "-" + nuid.Next(), Account: account, Data: []byte("{}")}
	req.Session = session
	if token != "" {
		edgeKey, _ := nkeys.CreateCurveKeys()
		sealed, err := wire.SealCredentials(edgeKey, pub, account, tool, map[string]string{"token": token})
		if err != nil {
			t.Fatal(err)
		}
		req.MCPContext.Header = nats.Header{wire.HeaderCredentials: {sealed}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
	defer cancel()
	reply, err := bus.Do(ctx, e.nc, wire.DefaultSubjects, req)
	if err != nil {
		return mcpfixture.Identity{}, err
	}
	var res struct {
		StructuredContent mcpfixture.Identity `json:"structuredContent"`
	}
	if err := json.Unmarshal(reply.Data, &res); err != nil {
		t.Fatalf("%s: %v", reply.Data, err)
	}
	return res.StructuredContent, nil
}

// TestAccountHeaders: a remote server behind --header 'Authorization: Bearer {token}'
// is sent each account's token on that account's calls, and none on a call without
// values.
func TestAccountHeaders(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		name := map[bool]string{false: "remote", true: "remote-stateless"}[stateless]
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server {
				return mcpfixture.New(mcpfixture.Options{})
			}, &mcp.StreamableHTTPOptions{Stateless: stateless}))
			t.Cleanup(srv.Close) // after the bridge's end, which closes its streams
			e := newEnv(t)
			cfg := mcpbridge.DefaultConfig()
			cfg.Tool, cfg.URL, cfg.Sessions = name, srv.URL, 1
			cfg.Header = http.Header{"Authorization": {"Bearer {token}"}}
			sealKey, _ := nkeys.CreateCurveKeys()
			e.startWith(cfg, workers.WithSealKey(sealKey))
			pub, _ := sealKey.PublicKey()
			for _, tc := range []struct{ account, token string }{{"a1", "token-one"}, {"a2", "token-two"}, {"a3", ""}} {
				got, err := e.identity(t, name, pub, tc.account, tc.token)
				want := mcpfixture.IdentityOf(tc.token, 0).Identity
				if err != nil || got.Identity != want {
					t.Errorf("%s: %+v %v, want identity %q", tc.account, got, err, want)
				}
			}
		})
	}
}
