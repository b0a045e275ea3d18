package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// securedNATS makes a deployment's certificates and credentials with the commands an
// operator runs, and starts `toolgate nats` with them until the test ends. It
// returns the server's URL, the creds directory and the CA file.
func securedNATS(t *testing.T) (url, credsDir, ca string) {
	t.Helper()
	base := t.TempDir()
	credsDir, certs := filepath.Join(base, "auth"), filepath.Join(base, "tls")
	if out, err := run(t, context.Background(), "certs", "--dir", certs, "--only-hosts", "--host", "127.0.0.1"); err != nil {
		t.Fatalf("certs: %v\n%s", err, out)
	}
	if out, err := run(t, context.Background(), "creds", "init", "--dir", credsDir); err != nil || !strings.Contains(out, "made "+filepath.Join(credsDir, "creds/edge.creds")) {
		t.Fatalf("creds init: %v\n%s", err, out)
	}
	out := startCommand(t, "nats", "--listen", "127.0.0.1:0", "--store-dir", filepath.Join(base, "store"),
		"--auth", filepath.Join(credsDir, "server"),
		"--nats-tls-ca", filepath.Join(certs, busauth.CAFile),
		"--nats-tls-cert", filepath.Join(certs, busauth.ServerCertFile), "--nats-tls-key", filepath.Join(certs, busauth.ServerKeyFile))
	listening := regexp.MustCompile(`listening on ((?:nats|tls)://127\.0\.0\.1:\d+) .*auth: true, TLS: true`)
	testenv.WaitFor(t, "toolgate nats listens", func() bool {
		m := listening.FindStringSubmatch(out.String())
		if m != nil {
			url = m[1]
		}
		return m != nil
	})
	return url, credsDir, filepath.Join(certs, busauth.CAFile)
}

// TestCredsCommands runs a tool team's credentials through their life with the
// commands: issued scoped to its tool, listed, used, revoked on the running server.
func TestCredsCommands(t *testing.T) {
	url, dir, ca := securedNATS(t)
	creds := filepath.Join(t.TempDir(), "alpha.creds")

	out, err := run(t, context.Background(), "creds", "issue", "alpha", "-o", creds, "--dir", dir)
	if err != nil {
		t.Fatalf("issue: %v\n%s", err, out)
	}
	user := regexp.MustCompile(`user (U[A-Z0-9]{55})`).FindStringSubmatch(out)
	if st, err := os.Stat(creds); err != nil || st.Mode().Perm() != 0o600 || user == nil {
		t.Fatalf("the credentials file: %v %v\n%s", st, err, out)
	}
	t.Run("a file that exists is not overwritten", func(t *testing.T) {
		if out, err := run(t, context.Background(), "creds", "issue", "alpha", "-o", creds, "--dir", dir); err == nil || !strings.Contains(err.Error(), "exists") {
			t.Fatalf("got %v\n%s", err, out)
		}
	})

	errs := make(chan error, 8)
	worker, err := bus.Connect(url, "alpha", testenv.Logger(t), append(bus.ClientAuth{Creds: creds, CA: ca}.Options(),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { errs <- err }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer worker.Close()
	watched, stop := bus.Watch(context.Background(), worker)
	defer stop()
	t.Run("the credentials serve their tool and nothing else", func(t *testing.T) {
		if _, err := worker.QueueSubscribeSync("tg.call.alpha.>", "tg.alpha"); err != nil {
			t.Fatal(err)
		}
		if _, err := worker.QueueSubscribeSync("tg.call.beta.>", "tg.beta"); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-errs:
			if !strings.Contains(err.Error(), `Subscription to "tg.call.beta.>"`) {
				t.Fatalf("got %v", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatal("another tool's calls were not refused")
		}
	})

	t.Run("the list shows the roles and the tool's user", func(t *testing.T) {
		out, err := run(t, context.Background(), "creds", "list", "--json", "--dir", dir)
		var gs []busauth.Grant
		if err != nil || json.Unmarshal([]byte(out), &gs) != nil || len(gs) != 3 || gs[2].User != user[1] || gs[2].Tools[0] != "alpha" || gs[2].RevokedAt != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		out, err = run(t, context.Background(), "creds", "list", "--dir", dir)
		if err != nil || !strings.Contains(out, "worker") || !strings.Contains(out, user[1]) {
			t.Fatalf("%v\n%s", err, out)
		}
	})

	t.Run("revoking the tool disconnects its worker on the running server", func(t *testing.T) {
		out, err := run(t, context.Background(), "creds", "revoke", "alpha", "--dir", dir, "--nats", url, "--nats-tls-ca", ca)
		if err != nil || !strings.Contains(out, "revoked worker user "+user[1]) || !strings.Contains(out, "applied it") {
			t.Fatalf("revoke: %v\n%s", err, out)
		}
		select {
		case <-watched.Done():
		case <-time.After(testenv.Patience):
			t.Fatalf("the worker is still connected (%v)", worker.Status())
		}
		_, err = bus.Connect(url, "alpha", testenv.Logger(t), bus.ClientAuth{Creds: creds, CA: ca}.Options()...)
		if err == nil || !strings.Contains(err.Error(), bus.ErrCredentialsRefused.Error()) {
			t.Fatalf("reconnecting: %v", err)
		}
		out, _ = run(t, context.Background(), "creds", "list", "--json", "--dir", dir)
		var gs []busauth.Grant
		if json.Unmarshal([]byte(out), &gs) != nil || gs[2].RevokedAt == nil {
			t.Fatalf("the record:\n%s", out)
		}
	})
	t.Run("a revocation the servers cannot be told of says so", func(t *testing.T) {
		out, err := run(t, context.Background(), "creds", "revoke", "alpha", "--dir", dir, "--nats", "nats://127.0.0.1:1", "--timeout", "2s")
		if err == nil || !strings.Contains(err.Error(), "servers were not told") {
			t.Fatalf("got %v\n%s", err, out)
		}
	})
	t.Run("revoke takes a tool or a user, not both", func(t *testing.T) {
		if _, err := run(t, context.Background(), "creds", "revoke", "alpha", "--user", user[1], "--dir", dir); err == nil {
			t.Fatal("accepted both")
		}
	})
}

// TestRolesExitNamingWhyNATSRefusedThem: a role started without its credentials
// stops at once saying what to give it; an edge whose credentials are revoked while
// it runs stops with an error that says so, instead of reconnecting forever.
func TestRolesExitNamingWhyNATSRefusedThem(t *testing.T) {
	url, dir, ca := securedNATS(t)

	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"a worker without credentials", []string{"worker", "demo", "--nats", url, "--nats-tls-ca", ca},
			[]string{"worker: bus: connect", bus.ErrNoCredentials.Error(), "--nats-creds"}},
		{"an edge that does not trust the server's certificate", []string{"edge", "--nats", url, "--link-secret-file", os.Args[0],
			"--nats-creds", filepath.Join(dir, "creds/edge.creds")},
			[]string{"edge: bus: connect", bus.ErrServerNotTrusted.Error(), "--nats-tls-ca"}},
		{"a worker whose credentials file is missing", []string{"worker", "mcp", "--tool", "x", "--nats", url, "--nats-creds", filepath.Join(dir, "none.creds"), "--", "true"},
			[]string{"worker: nats-creds: open"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testenv.Patience)
			defer cancel()
			out, err := run(t, ctx, tt.args...)
			if err == nil {
				t.Fatalf("it ran\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q does not say %q", err, w)
				}
			}
		})
	}

	t.Run("an edge whose credentials are revoked while it runs", func(t *testing.T) {
		linkSecret := filepath.Join(t.TempDir(), "link-secret")
		if err := os.WriteFile(linkSecret, []byte(strings.Repeat("s", 40)), 0o600); err != nil {
			t.Fatal(err)
		}
		d, err := busauth.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		gs, _ := d.Grants()
		var edgeUser string
		for _, g := range gs {
			if g.Role == busauth.RoleEdge {
				edgeUser = g.User
			}
		}
		out := &testenv.Buffer{}
		done := make(chan error, 1)
		go func() {
			root := newRootCmd()
			root.SetOut(out)
			root.SetArgs([]string{"edge", "--nats", url, "--listen", "127.0.0.1:0", "--link-secret-file", linkSecret,
				"--nats-creds", filepath.Join(dir, "creds/edge.creds"), "--nats-tls-ca", ca})
			done <- root.ExecuteContext(context.Background())
		}()
		testenv.WaitFor(t, "the edge listens", func() bool { return strings.Contains(out.String(), "listening on") })
		if got, err := run(t, context.Background(), "creds", "revoke", "--user", edgeUser, "--dir", dir, "--nats", url, "--nats-tls-ca", ca); err != nil {
			t.Fatalf("revoke: %v\n%s", err, got)
		}
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), bus.ErrConnectionLost.Error()) || !strings.Contains(err.Error(), bus.ErrCredentialsRefused.Error()) {
				t.Fatalf("the edge ended with %v", err)
			}
		case <-time.After(testenv.Patience):
			t.Fatalf("the edge still runs %v after its credentials were revoked", testenv.Patience)
		}
	})
}

// TestCredsInitWithCertsIsOneStep: a stack's init makes the credentials, the CA and
// the certificates, and exports the CA's certificate, in one command; a second run
// makes nothing.
func TestCredsInitWithCertsIsOneStep(t *testing.T) {
	base := t.TempDir()
	args := []string{"creds", "init", "--dir", filepath.Join(base, "auth"), "--certs", filepath.Join(base, "tls"),
		"--host", "nats-9.example", "--export", filepath.Join(base, "export")}
	out, err := run(t, context.Background(), args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, f := range []string{"auth/creds/edge.creds", "tls/ca.pem", "tls/server-key.pem", "export/ca.pem"} {
		if !strings.Contains(out, "made "+filepath.Join(base, f)) {
			t.Errorf("%s not made:\n%s", f, out)
		}
	}
	ca, _ := os.ReadFile(filepath.Join(base, "tls", busauth.CAFile))
	exported, err := os.ReadFile(filepath.Join(base, "export", busauth.CAFile))
	if err != nil || string(exported) != string(ca) {
		t.Fatalf("the exported CA differs: %v", err)
	}
	cert, _ := os.ReadFile(filepath.Join(base, "tls", busauth.ServerCertFile))
	block, _ := pem.Decode(cert)
	if c, err := x509.ParseCertificate(block.Bytes); err != nil || c.VerifyHostname("nats-9.example") != nil || c.VerifyHostname("nats-1") != nil {
		t.Fatalf("the servers' certificate does not cover the hosts: %v", err)
	}
	if out, err := run(t, context.Background(), args...); err != nil || strings.Contains(out, "made ") {
		t.Fatalf("a second run: %v\n%s", err, out)
	}
}
