package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/busauth"
)

// Security is a deployment's bus security made for one test: the operator and
// accounts (busauth.Init in a temporary directory) and a CA with certificates for
// 127.0.0.1 and localhost.
type Security struct {
	Deployment *busauth.Deployment
	CertDir    string // ca.pem, server.pem, client.pem and their keys
}

// NewSecurity makes a deployment's security in temporary directories.
func NewSecurity(t testing.TB) *Security {
	t.Helper()
	d, _, err := busauth.Init(t.TempDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	certs := t.TempDir()
	if _, err := busauth.Certificates(certs, []string{"localhost", "127.0.0.1"}); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return &Security{Deployment: d, CertDir: certs}
}

// Apply turns on the deployment's JWT authentication in cfg and, with withTLS, TLS
// for clients and routes.
func (s *Security) Apply(t testing.TB, cfg *bus.ServerConfig, withTLS bool) {
	t.Helper()
	a, err := busauth.ServerAuth(s.Deployment.ServerDir())
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	cfg.Auth = a
	if withTLS {
		cfg.TLS = bus.ServerTLS{
			CA:   filepath.Join(s.CertDir, busauth.CAFile),
			Cert: filepath.Join(s.CertDir, busauth.ServerCertFile),
			Key:  filepath.Join(s.CertDir, busauth.ServerKeyFile),
		}
	}
}

// Client is what a role of the deployment connects with: its credentials file and,
// when the servers serve TLS, the CA.
func (s *Security) Client(creds string, withTLS bool) bus.ClientAuth {
	a := bus.ClientAuth{Creds: creds}
	if withTLS {
		a.CA = filepath.Join(s.CertDir, busauth.CAFile)
	}
	return a
}

// WorkerCreds issues credentials for the workers of tools and returns their file.
func (s *Security) WorkerCreds(t testing.TB, tools ...string) (path string, user string) {
	t.Helper()
	creds, g, err := s.Deployment.IssueWorker(tools, "", 0)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	path = filepath.Join(t.TempDir(), "worker.creds")
	if err := os.WriteFile(path, creds, 0o600); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return path, g.User
}

// SecureServer starts a single JetStream node that admits only the deployment's
// users, over TLS when withTLS.
func SecureServer(t testing.TB, s *Security, withTLS bool) *server.Server {
	t.Helper()
	return ServerWith(t, func(cfg *bus.ServerConfig) { s.Apply(t, cfg, withTLS) })
}

// NewSecureCluster starts a 3-node JetStream cluster that admits only the
// deployment's users, its routes and clients over TLS.
func NewSecureCluster(t testing.TB, s *Security) *Cluster {
	t.Helper()
	return newCluster(t, func(cfg *bus.ServerConfig) { s.Apply(t, cfg, true) })
}

// SecureConn connects to url as a role of the deployment and fails the test if the
// server refuses.
func SecureConn(t testing.TB, url string, auth bus.ClientAuth, extra ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := bus.Connect(url, "test", Logger(t), append(auth.Options(), extra...)...)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// ServerLog is what a server logs from RecordServerLog on: with a real role running
// on it, a test reads from it whether the server refused that role anything.
type ServerLog struct {
	mu    sync.Mutex
	lines []string
}

// RecordServerLog makes srv log its notices, warnings and errors (and with trace, its
// protocol traffic) to the ServerLog it returns.
func RecordServerLog(srv *server.Server, trace bool) *ServerLog {
	l := &ServerLog{}
	srv.SetLogger(l, false, trace)
	return l
}

// Violations are the permission violations logged, each with the client's name.
func (l *ServerLog) Violations() []string {
	return l.Matching("Violation")
}

// Matching are the lines logged that contain s.
func (l *ServerLog) Matching(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

func (l *ServerLog) log(format string, v ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, v...))
}

func (l *ServerLog) Noticef(format string, v ...any) { l.log(format, v...) }
func (l *ServerLog) Warnf(format string, v ...any)   { l.log(format, v...) }
func (l *ServerLog) Fatalf(format string, v ...any)  { l.log(format, v...) }
func (l *ServerLog) Errorf(format string, v ...any)  { l.log(format, v...) }
func (l *ServerLog) Debugf(format string, v ...any)  { l.log(format, v...) }
func (l *ServerLog) Tracef(format string, v ...any)  { l.log(format, v...) }
