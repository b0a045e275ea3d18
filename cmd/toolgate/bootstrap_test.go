package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBootstrap sets a deployment up twice, as a second `compose up` does: the first
// run makes the keys and the account, the second keeps them; the keys reach the
// export directory with mode 0600 and never the output.
func TestBootstrap(t *testing.T) {
	srv := testenv.Server(t)
	data, export := t.TempDir(), filepath.Join(t.TempDir(), "keys")
	bootstrap := func() string {
		t.Helper()
		out, err := run(t, context.Background(), "bootstrap", "--nats", srv.ClientURL(), "--data", data, "--export", export)
		if err != nil {
			t.Fatalf("toolgate bootstrap: %v\n%s", err, out)
		}
		return out
	}
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, want 0600", path, fi.Mode().Perm())
		}
		return strings.TrimSpace(string(b))
	}

	out := bootstrap()
	key, adminKey := read(filepath.Join(export, "dev-key")), read(filepath.Join(export, "admin-key"))
	if key != read(filepath.Join(data, "dev-key")) || adminKey != read(filepath.Join(data, "admin-key")) {
		t.Fatal("the exported keys differ from the deployment's")
	}
	read(filepath.Join(data, "link-secret"))
	if !strings.Contains(out, "(new)") || strings.Contains(out, key) || strings.Contains(out, adminKey) {
		t.Fatalf("first run's output:\n%s", out)
	}

	// The edges read what the bootstrap wrote; the dev key calls the demo tools.
	t.Setenv("TOOLGATE_ADMIN_KEY_FILE", filepath.Join(data, "admin-key"))
	url := startEdgeWith(t, "--nats", srv.ClientURL(), "--link-secret-file", filepath.Join(data, "link-secret"))
	if got := admin(t, url, "tools", "list", "dev"); !strings.Contains(got, `"tool": "echo"`) {
		t.Fatalf("the dev account's tools:\n%s", got)
	}

	if err := os.Remove(filepath.Join(export, "dev-key")); err != nil {
		t.Fatal(err)
	}
	out = bootstrap()
	if !strings.Contains(out, "(kept)") || strings.Contains(out, key) {
		t.Fatalf("second run's output:\n%s", out)
	}
	if read(filepath.Join(export, "dev-key")) != key || read(filepath.Join(export, "admin-key")) != adminKey {
		t.Fatal("the second run changed the keys")
	}
	// The key is still the account's (no worker runs, so no tool shows).
	if status, body := call(t, http.MethodGet, url+"/get-tools", key, ""); status != http.StatusOK || body != `{"tools":[]}` {
		t.Fatalf("get-tools with the kept key: %d %s", status, body)
	}
}

// startEdgeWith runs `toolgate edge` with flags on a free port until the test ends,
// and returns its URL once it is ready.
func startEdgeWith(t *testing.T, flags ...string) string {
	t.Helper()
	return edgeReady(t, launchEdge(t, flags...))
}

// launchEdge starts `toolgate edge` with flags on a free port until the test ends,
// and returns what it prints, without waiting for it.
func launchEdge(t *testing.T, flags ...string) *testenv.Buffer {
	t.Helper()
	// No balancer to wait for: the test's edges stop at once.
	return startCommand(t, append([]string{"edge", "--listen", "127.0.0.1:0", "--drain-delay", "0"}, flags...)...)
}

// edgeReady waits until the edge printing out listens and is ready, and returns its
// URL.
func edgeReady(t *testing.T, out *testenv.Buffer) string {
	t.Helper()
	var url string
	listening := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)
	testenv.WaitFor(t, "toolgate edge listens", func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	testenv.WaitFor(t, "the edge is ready", func() bool {
		return checkHealth(context.Background(), url+"/readyz", time.Second) == nil
	})
	return url
}

func freePort(t *testing.T) int { return testenv.FreePorts(t, 1)[0] }

// TestEdgeWaits starts an edge before NATS and before its secret files exist, as in a
// compose stack where nothing orders the start: with --wait it serves once both
// come; without, it fails at once, naming what is missing.
func TestEdgeWaits(t *testing.T) {
	dir := t.TempDir()
	secret, adminKey := filepath.Join(dir, "link-secret"), filepath.Join(dir, "admin-key")
	port := freePort(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", port)

	t.Run("without --wait a missing file is an error that names it", func(t *testing.T) {
		_, err := run(t, context.Background(), "edge", "--nats", natsURL, "--listen", "127.0.0.1:0", "--link-secret-file", secret)
		if err == nil || !strings.Contains(err.Error(), "link-secret-file") {
			t.Fatalf("edge without its link secret: %v", err)
		}
	})
	t.Run("without --wait no NATS is an error", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "other"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := run(t, context.Background(), "edge", "--nats", natsURL, "--listen", "127.0.0.1:0", "--link-secret-file", mustSecretFile(t))
		if err == nil || !strings.Contains(err.Error(), "no servers") {
			t.Fatalf("edge without NATS: %v", err)
		}
	})
	t.Run("with --wait it serves once NATS and the files come", func(t *testing.T) {
		t.Setenv("TOOLGATE_ADMIN_KEY_FILE", adminKey)
		out := launchEdge(t, "--nats", natsURL, "--link-secret-file", secret, "--wait", "60s")
		// The scenario: NATS, then the files, come late; on the test's goroutine, so
		// that a failure to start them stops the test.
		time.Sleep(2 * time.Second)
		testenv.ServerWith(t, func(c *bus.ServerConfig) { c.Port = port })
		time.Sleep(time.Second)
		if out, err := run(t, context.Background(), "bootstrap", "--nats", natsURL, "--data", dir); err != nil {
			t.Fatalf("toolgate bootstrap: %v\n%s", err, out)
		}
		url := edgeReady(t, out)
		if err := checkHealth(context.Background(), url+"/readyz", testenv.Patience); err != nil {
			t.Fatal(err)
		}
	})
}

func mustSecretFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if _, _, err := loadOrCreateSecret(path, func() string { return strings.Repeat("s", 40) }); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestHealth(t *testing.T) {
	healthy := time.Now().Add(2 * time.Second)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/later" && time.Now().Before(healthy) || r.URL.Path == "/down" {
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	for _, c := range []struct {
		args []string
		fail string // "" for success
	}{
		{[]string{srv.URL + "/up"}, ""},
		{[]string{srv.URL + "/up", srv.URL + "/down"}, "503 not yet"},
		{[]string{"127.0.0.1:8080/readyz"}, "must be an http(s) URL"},
		{[]string{"http://127.0.0.1:1/readyz"}, "connection refused"},
		{[]string{"--wait", "30s", srv.URL + "/up", srv.URL + "/later"}, ""},
		{[]string{"--wait", "1s", srv.URL + "/down"}, "waited 1s"},
	} {
		_, err := run(t, context.Background(), append([]string{"health"}, c.args...)...)
		if c.fail == "" && err != nil || c.fail != "" && (err == nil || !strings.Contains(err.Error(), c.fail)) {
			t.Errorf("toolgate health %v: %v, want %q", c.args, err, c.fail)
		}
	}
}

// TestWorkerHealth: a worker's /healthz answers 200 while its NATS connection is up
// and 503 once it is lost.
func TestWorkerHealth(t *testing.T) {
	srv := testenv.Server(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := run(t, ctx, "worker", "demo", "--nats", srv.ClientURL(), "--health-listen", addr)
		done <- err
	}()
	defer func() {
		cancel()
		<-done
	}()
	testenv.WaitFor(t, "the worker is healthy", func() bool {
		return checkHealth(context.Background(), "http://"+addr+"/healthz", time.Second) == nil
	})
	srv.Shutdown()
	testenv.WaitFor(t, "the worker is unhealthy without NATS", func() bool {
		err := checkHealth(context.Background(), "http://"+addr+"/healthz", time.Second)
		return err != nil && strings.Contains(err.Error(), "503")
	})
}
