package compose

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// toolgate runs the toolgate binary in service's running container with args, and
// returns what it printed and whether it failed.
func (s *stack) toolgate(service string, args ...string) (string, error) {
	return s.try(2*time.Minute, "podman", append([]string{"exec", s.container(service), "/usr/local/bin/toolgate"}, args...)...)
}

// busSecured checks, on the running stack, that its NATS nodes admit only the
// deployment's users over TLS, and that a tool team's credentials are issued and
// revoked through bus-init, and its state bucket made by the bootstrap, as the
// README says.
func (s *stack) busSecured(t *testing.T) {
	// A probe from inside the stack's network: a worker that would serve tool probe.
	// One whose name lookup failed (the network's DNS is Podman's, and it has
	// timed out once in a while) reached no server and checked nothing: it is made
	// again, a few times.
	unresolved := regexp.MustCompile(`dial tcp: lookup nats-\d+( on \S+)?: (i/o timeout|server misbehaving|no such host)`)
	probe := func(flags ...string) (out string, err error) {
		for range 3 {
			out, err = s.toolgate("demo-1", append(append([]string{"worker", "mcp", "--tool", "probe", "--wait", "0s"}, flags...), "--", "true")...)
			if !unresolved.MatchString(out) {
				return out, err
			}
			t.Logf("the probe's name lookup failed; again: %s", strings.TrimSpace(out))
		}
		return out, err
	}
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"without credentials", []string{"--nats", "tls://nats-1:4222", "--nats-creds", ""}, "the server requires credentials and none were given"},
		{"without the CA, over TLS", []string{"--nats", "tls://nats-2:4222", "--nats-tls-ca", ""}, "not signed by a trusted CA"},
		{"in plaintext", []string{"--nats", "nats://nats-3:4222", "--nats-tls-ca", ""}, "not signed by a trusted CA"},
	} {
		out, err := probe(c.flags...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("a connection %s: %v\n%s", c.name, err, out)
		}
	}

	out := s.compose("run", "--rm", "bus-init", "creds", "issue", "probe", "-o", "/export/probe.creds")
	user := regexp.MustCompile(`user (U[A-Z0-9]{55})`).FindStringSubmatch(out)
	creds := filepath.Join(s.keys, "probe.creds")
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 || user == nil {
		t.Fatalf("creds issue: %v %v\n%s", fi, err, out)
	}
	if fi, err := os.Stat(filepath.Join(s.keys, "ca.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the CA's certificate is not in %s: %v", s.keys, err)
	}
	// A tool whose workers keep state gets its state bucket from the bootstrap's
	// admin credentials, as the README says.
	if out := s.compose("run", "--rm", "bootstrap", "state", "create", "probe"); !strings.Contains(out, "state: made tg-state-probe") {
		t.Errorf("state create: want the probe tool's state bucket made:\n%s", out)
	}
	out = s.compose("run", "--rm", "bus-init", "creds", "revoke", "probe")
	if !strings.Contains(out, "revoked worker user "+user[1]) || strings.Count(out, "applied it") != 3 {
		t.Errorf("creds revoke: want the revocation applied by the 3 nodes:\n%s", out)
	}
}
