package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/edge"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestAuditCommand: `toolgate audit` prints the records of an account's calls that
// `toolgate edge` wrote, as lines or JSON lines, and with --follow the next one as it
// comes.
func TestAuditCommand(t *testing.T) {
	srv := testenv.Server(t)
	url, _ := startEdge(t, srv.ClientURL())
	admin(t, url, "accounts", "create", "acme")
	var key edge.NewKey
	if err := json.Unmarshal([]byte(admin(t, url, "keys", "create", "acme")), &key); err != nil {
		t.Fatal(err)
	}
	// A tool nobody deployed: each call is refused, and recorded.
	call := func() string {
		t.Helper()
		var id string
		testenv.WaitFor(t, "the edge takes the key", func() bool {
			req, _ := http.NewRequest(http.MethodPost, url+"/tool-call/nosuch/run", strings.NewReader(`{"secret":"s3cr3t-value"}`))
			req.Header.Set("SERVICE_API_KEY", key.Secret)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			id = resp.Header.Get("X-Request-Id")
			return resp.StatusCode == http.StatusNotFound
		})
		return id
	}
	ids := []string{call(), call()}

	var lines []string
	testenv.WaitFor(t, "toolgate audit --json prints both calls", func() bool {
		lines = strings.Split(strings.TrimSpace(admin(t, url, "audit", "--account", "acme", "--kind", "call", "--since", "5m", "--json")), "\n")
		return len(lines) >= len(ids)
	})
	for i, line := range lines {
		var r audit.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("line %d is not a record: %v\n%s", i, err, line)
		}
		if r.RequestID != ids[i] || r.Account != "acme" || r.Key != key.ID || r.Tool != "nosuch" || r.Method != "run" ||
			r.Outcome != edge.CodeToolNotFound || r.Status != http.StatusNotFound || r.Transport != audit.TransportREST {
			t.Errorf("line %d: %+v", i, r)
		}
	}
	if len(lines) != len(ids) {
		t.Fatalf("%d records, want %d:\n%s", len(lines), len(ids), strings.Join(lines, "\n"))
	}
	got := admin(t, url, "audit", "--account", "acme", "--since", "5m")
	for _, want := range []string{"admin acme create-account", "admin acme create-key", "call acme nosuch/run rest tool_not_found 404", "request=" + ids[1]} {
		if !strings.Contains(got, want) {
			t.Errorf("toolgate audit does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "s3cr3t-value") {
		t.Fatalf("toolgate audit prints the arguments:\n%s", got)
	}

	t.Run("--follow prints a call made after it started, until interrupted", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		out := &testenv.Buffer{}
		root := newRootCmd()
		root.SetOut(out)
		root.SetArgs([]string{"audit", "--account", "acme", "--kind", "call", "--follow", "--url", url})
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()
		testenv.WaitFor(t, "it prints the calls made before", func() bool { return strings.Contains(out.String(), ids[1]) })
		next := call()
		testenv.WaitFor(t, "it prints the next call", func() bool { return strings.Contains(out.String(), next) })
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("interrupted: %v", err)
		}
		n := 0
		for sc := bufio.NewScanner(strings.NewReader(out.String())); sc.Scan(); n++ {
		}
		if n != 3 {
			t.Fatalf("%d lines, want 3 (each call once):\n%s", n, out)
		}
	})
}
