package compose

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// probe runs `toolgate worker mcp` for a tool named probe with flags, in a new
// container of the demo service (its network, volumes and environment), and returns
// what it printed, and the error of a run that could not be made.
func (s *stack) probe(flags ...string) (string, error) {
	args := append([]string{"-p", s.project, "run", "--rm", "--no-deps", "demo-1", "worker", "mcp", "--tool", "probe", "--wait", "0s"}, flags...)
	return s.try(2*time.Minute, "podman-compose", append(args, "--", "true")...)
}

// busSecured checks, on the running stack, that its NATS nodes admit only the
// deployment's users over TLS, and that a tool team's credentials are issued and
// revoked through bus-init, and its state bucket made by the bootstrap, as the
// README says.
func (s *stack) busSecured(t *testing.T) {
	// A probe from inside the stack's network: a worker that would serve tool probe,
	// in a container of its own. (Run by `podman exec` in a running worker's
	// container, its name lookups once timed out for a whole minute while new
	// containers resolved the same names.) One whose lookup failed reached no
	// server and checked nothing: it is made again, a few times, a few seconds apart.
	unresolved := regexp.MustCompile(`dial tcp: lookup nats-\d+( on \S+)?: (i/o timeout|server misbehaving|no such host)`)
	probe := func(flags ...string) (out string, err error) {
		for try := range 5 {
			if out, err = s.probe(flags...); !unresolved.MatchString(out) {
				return out, err
			}
			t.Logf("the probe's name lookup failed (try %d); again: %s", try+1, strings.TrimSpace(out))
			time.Sleep(3 * time.Second)
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
		// The refusal is the probe's own message: podman-compose 1.0.3's run prints
		// a command's exit code but exits 0 itself.
		if out, err := probe(c.flags...); !strings.Contains(out, c.want) {
			failed.errorf(t, "a connection %s: %v\n%s", c.name, err, out)
		}
	}

	out := s.compose("run", "--rm", "bus-init", "creds", "issue", "probe", "-o", "/export/probe.creds")
	user := regexp.MustCompile(`user (U[A-Z0-9]{55})`).FindStringSubmatch(out)
	creds := filepath.Join(s.keys, "probe.creds")
	if fi, err := os.Stat(creds); err != nil || fi.Mode().Perm() != 0o600 || user == nil {
		failed.fatalf(t, "creds issue: %v %v\n%s", fi, err, out)
	}
	if fi, err := os.Stat(filepath.Join(s.keys, "ca.pem")); err != nil || fi.Mode().Perm() != 0o600 {
		failed.errorf(t, "the CA's certificate is not in %s: %v", s.keys, err)
	}
	// A tool whose workers keep state gets its state bucket from the bootstrap's
	// admin credentials, as the README says.
	if out := s.compose("run", "--rm", "bootstrap", "state", "create", "probe"); !strings.Contains(out, "state: made tg-state-probe") {
		failed.errorf(t, "state create: want the probe tool's state bucket made:\n%s", out)
	}
	out = s.compose("run", "--rm", "bus-init", "creds", "revoke", "probe")
	if !strings.Contains(out, "revoked worker user "+user[1]) || strings.Count(out, "applied it") != 3 {
		failed.errorf(t, "creds revoke: want the revocation applied by the 3 nodes:\n%s", out)
	}
}
