package busauth_test

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
	"github.com/toolgate/toolgate/internal/testenv"
)

// files maps every file under dir to its content.
func files(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, dir+"/")] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestInitMakesTheDeploymentOnceAndKeepsIt(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	d, made, err := busauth.Init(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := files(t, dir)
	for _, f := range []string{"keys/operator.nk", "keys/SYS.nk", "keys/toolgate.nk", "creds/edge.creds", "creds/admin.creds", "creds/system.creds",
		"server/operator.jwt", "server/accounts/SYS.jwt", "server/accounts/toolgate.jwt", "server/auth.conf", "server/nats-server.conf", "issued.json"} {
		if _, ok := before[f]; !ok {
			t.Errorf("no %s", f)
		}
	}
	if len(made) != 11 {
		t.Errorf("made %v", made)
	}

	t.Run("secrets are files of mode 0600, in directories of 0700", func(t *testing.T) {
		for f := range before {
			st, _ := os.Stat(filepath.Join(dir, f))
			secret := strings.HasPrefix(f, "keys/") || strings.HasPrefix(f, "creds/") || f == "issued.json"
			if secret && st.Mode().Perm() != 0o600 {
				t.Errorf("%s has mode %v", f, st.Mode().Perm())
			}
		}
		for _, sub := range []string{"", "keys", "creds"} {
			st, _ := os.Stat(filepath.Join(dir, sub))
			if st.Mode().Perm() != 0o700 {
				t.Errorf("%s/ has mode %v", sub, st.Mode().Perm())
			}
		}
	})
	t.Run("a second run makes nothing and changes nothing", func(t *testing.T) {
		_, made, err := busauth.Init(dir)
		if err != nil || len(made) != 0 {
			t.Fatalf("made %v, %v", made, err)
		}
		after := files(t, dir)
		for f, b := range before {
			if after[f] != b {
				t.Errorf("%s changed", f)
			}
		}
	})
	t.Run("a missing role file is made again, and only it", func(t *testing.T) {
		if err := os.Remove(d.CredsFile(busauth.RoleEdge)); err != nil {
			t.Fatal(err)
		}
		_, made, err := busauth.Init(dir)
		if err != nil || len(made) != 1 || made[0] != "creds/edge.creds" {
			t.Fatalf("made %v, %v", made, err)
		}
	})
	t.Run("the account has JetStream, the system account has not, and the operator names it", func(t *testing.T) {
		op, _ := jwt.DecodeOperatorClaims(strings.TrimSpace(before["server/operator.jwt"]))
		sys, _ := jwt.DecodeAccountClaims(strings.TrimSpace(before["server/accounts/SYS.jwt"]))
		acc, _ := jwt.DecodeAccountClaims(strings.TrimSpace(before["server/accounts/toolgate.jwt"]))
		if op == nil || sys == nil || acc == nil || op.SystemAccount != sys.Subject || sys.Limits.IsJSEnabled() || !acc.Limits.IsJSEnabled() {
			t.Fatalf("operator %+v\nsystem %+v\naccount %+v", op, sys, acc)
		}
		auth, conf := before["server/auth.conf"], before["server/nats-server.conf"]
		if !strings.Contains(auth, "system_account: "+sys.Subject) || !strings.Contains(auth, acc.Subject+": ") ||
			!strings.Contains(conf, "include ./auth.conf") || !strings.Contains(conf, "type: full") {
			t.Fatalf("auth.conf:\n%s\nnats-server.conf:\n%s", auth, conf)
		}
	})
	t.Run("the record holds the roles' users and never a seed", func(t *testing.T) {
		creds, _, err := d.IssueWorker([]string{"email"}, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		kp, err := jwt.ParseDecoratedUserNKey(creds)
		if err != nil {
			t.Fatal(err)
		}
		seed, _ := kp.Seed()
		gs, err := d.Grants()
		if err != nil || len(gs) != 4 || gs[3].Role != busauth.RoleWorker || gs[3].Tools[0] != "email" || gs[3].Name != "worker-email" {
			t.Fatalf("%+v %v", gs, err)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "issued.json"))
		if strings.Contains(string(b), string(seed)) {
			t.Fatalf("a seed in the record:\n%s", b)
		}
	})
	t.Run("a tool id that is not one is refused", func(t *testing.T) {
		for _, bad := range []string{"", "Email", "a.b", "a>", "*"} {
			if _, _, err := d.IssueWorker([]string{bad}, "", 0); err == nil {
				t.Errorf("%q issued", bad)
			}
		}
	})
	t.Run("another operator's JWT in the directory stops it", func(t *testing.T) {
		other := t.TempDir()
		if _, _, err := busauth.Init(other); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(filepath.Join(other, "server/operator.jwt"))
		if err := os.WriteFile(filepath.Join(dir, "server/operator.jwt"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, _, err := busauth.Init(dir); err == nil || !strings.Contains(err.Error(), "operator.jwt") {
			t.Fatalf("got %v", err)
		}
		if _, err := busauth.Open(dir); err == nil {
			t.Fatal("opened")
		}
	})
}

func TestCertificatesAreMadeOnceAndCoverTheHosts(t *testing.T) {
	dir := t.TempDir()
	made, err := busauth.Certificates(dir, []string{"nats-1", "127.0.0.1"})
	if err != nil || len(made) != 6 {
		t.Fatalf("made %v, %v", made, err)
	}
	for _, f := range made {
		st, _ := os.Stat(filepath.Join(dir, f))
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s has mode %v", f, st.Mode().Perm())
		}
	}
	cert := func(name string) *x509.Certificate {
		b, _ := os.ReadFile(filepath.Join(dir, name))
		block, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ca := cert(busauth.CAFile)
	srv := cert(busauth.ServerCertFile)
	if err := srv.CheckSignatureFrom(ca); err != nil || srv.VerifyHostname("nats-1") != nil || srv.VerifyHostname("127.0.0.1") != nil {
		t.Fatalf("server certificate: %v %v", srv.DNSNames, srv.IPAddresses)
	}
	if again, err := busauth.Certificates(dir, []string{"nats-1", "127.0.0.1"}); err != nil || len(again) != 0 {
		t.Fatalf("a second run made %v, %v", again, err)
	}
	more, err := busauth.Certificates(dir, []string{"nats-1", "127.0.0.1", "nats-4"})
	if err != nil || len(more) != 2 || more[0] != busauth.ServerCertFile {
		t.Fatalf("a new host: made %v, %v", more, err)
	}
	if cert(busauth.CAFile).SerialNumber.Cmp(ca.SerialNumber) != 0 || cert(busauth.ServerCertFile).VerifyHostname("nats-4") != nil {
		t.Fatal("the CA changed, or the new certificate misses the new host")
	}
}

// TestNATSServerConfIsWhatTheOfficialServerTakes starts a server from a
// configuration that includes nats-server.conf, as an operator of the official
// nats-server would, and connects to it as the edge role.
func TestNATSServerConfIsWhatTheOfficialServerTakes(t *testing.T) {
	sec := testenv.NewSecurity(t)
	dir := t.TempDir()
	conf := filepath.Join(dir, "nats.conf")
	include, err := filepath.Rel(dir, filepath.Join(sec.Deployment.ServerDir(), "nats-server.conf")) // includes are relative to the file
	if err != nil {
		t.Fatal(err)
	}
	body := fmt.Sprintf("listen: 127.0.0.1:-1\njetstream: {store_dir: %q}\ninclude %q\n", filepath.Join(dir, "js"), include)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir) // the resolver's directory is relative: the server's working directory
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.TrustedOperators) != 1 || opts.SystemAccount == "" || opts.MaxControlLine != bus.MaxControlLine {
		t.Fatalf("operators %d, system account %q, max_control_line %d", len(opts.TrustedOperators), opts.SystemAccount, opts.MaxControlLine)
	}
	opts.NoSigs, opts.NoLog = true, true
	s, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	nc := testenv.SecureConn(t, s.ClientURL(), sec.Client(sec.Deployment.CredsFile(busauth.RoleEdge), false))
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateKeyValue(testenv.Context(t), jetstream.KeyValueConfig{Bucket: "tg-keys"}); err != nil {
		t.Fatalf("the edge makes a bucket: %v", err)
	}
}
