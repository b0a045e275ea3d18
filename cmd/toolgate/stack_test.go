package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
)

// startWorkerDemo runs `toolgate worker demo` on natsURL until the test ends.
func startWorkerDemo(t *testing.T, natsURL string) {
	t.Helper()
	startCommand(t, "worker", "demo", "--nats", natsURL)
}

// TestStackServesTheDemoTools runs the stack as an operator would, each role its own
// command on one NATS server: `toolgate edge`, `toolgate worker demo`, and the admin
// commands; then calls the demo tools over HTTP as the README's quickstart does.
func TestStackServesTheDemoTools(t *testing.T) {
	srv := testenv.Server(t)
	url, _ := startEdge(t, srv.ClientURL())
	startWorkerDemo(t, srv.ClientURL())

	admin(t, url, "accounts", "create", "acme")
	admin(t, url, "tools", "connect", "acme", "email")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, url, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	call := func(method, path, body string) (int, string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("SERVICE_API_KEY", key.Secret)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}

	var tools edge.ToolList
	testenv.WaitFor(t, "get-tools shows the email tool online", func() bool {
		status, _, body := call(http.MethodGet, "/get-tools", "")
		tools = edge.ToolList{}
		_ = json.Unmarshal(body, &tools)
		return status == http.StatusOK && len(tools.Tools) == 1 && tools.Tools[0].Status == edge.StatusOnline
	})
	email := tools.Tools[0]
	// Without --base-url, links point at the address the edge listens on.
	if email.ID != "email" || len(email.Methods) == 0 || !strings.HasPrefix(email.SSEURL, url+"/mcp/tgl_") {
		t.Fatalf("email tool %+v", email)
	}

	status, ctype, body := call(http.MethodPost, "/tool-call/email/send_email", `{"to":"ada@example.com","subject":"Hello","body":"From toolgate."}`)
	if status != http.StatusOK || !strings.HasPrefix(ctype, "application/json") || !json.Valid(body) {
		t.Fatalf("send_email: %d %s %s", status, ctype, body)
	}
	status, ctype, _ = call(http.MethodGet, "/dashboard/signin", "")
	if status != http.StatusOK || !strings.HasPrefix(ctype, "text/html") {
		t.Fatalf("the dashboard's sign-in page: %d %s", status, ctype)
	}
	status, _, body = call(http.MethodPost, "/tools/email/send_email", `{"to":"not an address","subject":"Hello","body":"x"}`)
	var env edge.Envelope
	if status != http.StatusBadRequest || json.Unmarshal(body, &env) != nil || env.Error.Code != edge.CodeInvalidParams ||
		!strings.Contains(string(body), `"pointer":"/to"`) {
		t.Fatalf("a malformed address: %d %s", status, body)
	}
}
