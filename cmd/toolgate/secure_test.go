package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
)

// startCommand runs one toolgate command line until the test ends, when it must stop
// without an error, and returns what it prints on standard output.
func startCommand(t *testing.T, args ...string) *testenv.Buffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := &testenv.Buffer{}
	done := make(chan error, 1)
	go func() {
		root := newRootCmd()
		root.SetOut(out)
		root.SetErr(io.Discard)
		root.SetArgs(args)
		done <- root.ExecuteContext(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("toolgate %s: %v", args[0], err)
		}
	})
	return out
}

// TestEdgeRunsOnItsOwnCredentials runs a whole edge with the edge role's credentials
// over TLS on a server that admits only the deployment's users: it makes the
// registry, serves get-tools, a tool call, one that outlives its request, and MCP
// sessions on both transports, and the server refuses it nothing. The demo workers run as a deployment runs them: on
// their tools' credentials (creds init --demo), the email tool's state made by the
// admin (state create).
func TestEdgeRunsOnItsOwnCredentials(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	serverLog := testenv.RecordServerLog(srv, false)
	ca := filepath.Join(sec.CertDir, busauth.CAFile)
	url, _ := startEdge(t, srv.ClientURL(), "--nats-creds", sec.Deployment.CredsFile(busauth.RoleEdge), "--nats-tls-ca", ca)

	ctx := testenv.Context(t)
	if out, err := run(t, ctx, "creds", "init", "--demo", "--dir", sec.Deployment.Dir()); err != nil || !strings.Contains(out, "demo.creds") {
		t.Fatalf("creds init --demo: %v\n%s", err, out)
	}
	if out, err := run(t, ctx, "creds", "init", "--demo", "--dir", sec.Deployment.Dir()); err != nil || !strings.Contains(out, "nothing made") {
		t.Fatalf("creds init --demo again: %v\n%s", err, out)
	}
	demoCreds := sec.Deployment.CredsFile("demo")
	worker := []string{"worker", "demo", "--nats", srv.ClientURL(), "--nats-creds", demoCreds, "--nats-tls-ca", ca}
	t.Run("without the email tool's state the demo worker stops saying who makes it", func(t *testing.T) {
		out, err := run(t, ctx, append(worker, "--wait", "0")...)
		if err == nil || !strings.Contains(err.Error(), "toolgate state create email") {
			t.Fatalf("got %v\n%s", err, out)
		}
	})
	if out, err := run(t, ctx, "state", "create", "email", "--nats", srv.ClientURL(), "--nats-creds", sec.Deployment.CredsFile(busauth.RoleAdmin), "--nats-tls-ca", ca); err != nil ||
		!strings.Contains(out, "state: made tg-state-email") {
		t.Fatalf("state create: %v\n%s", err, out)
	}
	startCommand(t, worker...)

	admin(t, url, "accounts", "create", "acme")
	admin(t, url, "tools", "connect", "acme", "echo")
	admin(t, url, "tools", "connect", "acme", "email")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, url, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	var tools edge.ToolList
	testenv.WaitFor(t, "get-tools shows echo and email online", func() bool {
		status, body := call(t, http.MethodGet, url+"/get-tools", key.Secret, "")
		tools = edge.ToolList{}
		return status == http.StatusOK && json.Unmarshal([]byte(body), &tools) == nil &&
			len(tools.Tools) == 2 && tools.Tools[0].Status == edge.StatusOnline && tools.Tools[1].Status == edge.StatusOnline
	})
	slices.SortFunc(tools.Tools, func(a, b edge.ToolInfo) int { return strings.Compare(a.ID, b.ID) }) // echo, then email
	if status, body := call(t, http.MethodPost, url+"/tool-call/echo/echo", key.Secret, `{"hello":"world"}`); status != http.StatusOK || !strings.Contains(body, `"hello":"world"`) {
		t.Fatalf("tool call: %d %s", status, body)
	}
	if status, body := call(t, http.MethodPost, url+"/tool-call/email/send_email", key.Secret, `{"to":"ada@example.com","subject":"s","body":"b"}`); status != http.StatusOK {
		t.Fatalf("send_email: %d %s", status, body)
	}
	if status, body := call(t, http.MethodPost, url+"/tool-call/email/list_sent", key.Secret, `{}`); status != http.StatusOK || !strings.Contains(body, `"to":"ada@example.com"`) {
		t.Fatalf("list_sent: %d %s", status, body)
	}
	t.Run("a call that outlives its request, kept in tg-calls", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodPost, url+"/tool-call/echo/echo", strings.NewReader(`{"later":true}`))
		req.Header.Set("SERVICE_API_KEY", key.Secret)
		req.Header.Set("Prefer", "respond-async")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || loc == "" {
			t.Fatalf("status %d, Location %q", resp.StatusCode, loc)
		}
		testenv.WaitFor(t, "the call's answer", func() bool {
			status, body := call(t, http.MethodGet, url+loc, key.Secret, "")
			return status == http.StatusOK && strings.Contains(body, `"later":true`)
		})
	})

	for _, tr := range []struct {
		name      string
		transport func() mcp.Transport
	}{
		{"Streamable HTTP", func() mcp.Transport { return &mcp.StreamableClientTransport{Endpoint: tools.Tools[0].MCPURL} }},
		{"legacy HTTP+SSE", func() mcp.Transport { return &mcp.SSEClientTransport{Endpoint: tools.Tools[0].SSEURL} }},
	} {
		t.Run("an MCP session over "+tr.name, func(t *testing.T) {
			cctx, ccancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer ccancel()
			client := mcp.NewClient(&mcp.Implementation{Name: "secure-test", Version: "1"}, nil)
			session, err := client.Connect(cctx, tr.transport(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer session.Close()
			res, err := session.CallTool(cctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"hi": "there"}})
			if err != nil || res.IsError {
				t.Fatalf("tools/call: %+v %v", res, err)
			}
			if got, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(got), `"hi":"there"`) {
				t.Fatalf("structured content %s", got)
			}
		})
	}
	if v := serverLog.Violations(); len(v) > 0 {
		t.Fatalf("the server refused the stack:\n%s", strings.Join(v, "\n"))
	}
}

// TestDevOnASecuredNATS runs the dev stack on a NATS system of its own rather than
// the embedded server, with the admin role's credentials over TLS; without them it
// stops saying what it lacks.
func TestDevOnASecuredNATS(t *testing.T) {
	sec := testenv.NewSecurity(t)
	srv := testenv.SecureServer(t, sec, true)
	serverLog := testenv.RecordServerLog(srv, false)
	ca := filepath.Join(sec.CertDir, busauth.CAFile)

	out, err := run(t, testenv.Context(t), "dev", "--nats", srv.ClientURL(), "--nats-tls-ca", ca, "--data", t.TempDir(), "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(err.Error(), "dev: bus: connect") || !strings.Contains(err.Error(), "--nats-creds") {
		t.Fatalf("without credentials: %v\n%s", err, out)
	}

	banner := startCommand(t, "dev", "--nats", srv.ClientURL(), "--nats-creds", sec.Deployment.CredsFile(busauth.RoleAdmin), "--nats-tls-ca", ca,
		"--data", t.TempDir(), "--listen", "127.0.0.1:0")
	testenv.WaitFor(t, "the dev stack prints its banner", func() bool { return bannerKey.MatchString(banner.String()) })
	url, key := bannerEdge.FindStringSubmatch(banner.String())[1], bannerKey.FindStringSubmatch(banner.String())[1]
	if !strings.Contains(banner.String(), srv.ClientURL()) {
		t.Errorf("the banner does not name the NATS system:\n%s", banner)
	}
	testenv.WaitFor(t, "the demo tools are online", func() bool {
		status, body := call(t, http.MethodGet, url+"/get-tools", key, "")
		return status == http.StatusOK && strings.Count(body, `"status":"online"`) == 3
	})
	if status, body := call(t, http.MethodPost, url+"/tool-call/echo/echo", key, `{"a":1}`); status != http.StatusOK {
		t.Fatalf("echo: %d %s", status, body)
	}
	if v := serverLog.Violations(); len(v) > 0 {
		t.Fatalf("the server refused the dev stack:\n%s", strings.Join(v, "\n"))
	}
}
