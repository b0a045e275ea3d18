package payloads_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
)

// stack is toolgate run as an operator runs it, each role a process of the binary
// built from this tree: `toolgate nats`, `toolgate edge` and `toolgate worker demo`.
// The edge being a process of its own, its memory can be read from /proc.
type stack struct {
	t     *testing.T
	url   string // the edge's
	admin string // the admin key
	edge  *exec.Cmd
	logs  map[string]string

	bin, dir, nats string
}

// run starts bin with args until the test ends, its output in dir/name.log.
func (s *stack) run(bin, dir, name string, args ...string) *exec.Cmd {
	s.t.Helper()
	log := filepath.Join(dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	s.logs[name] = log
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	s.t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return cmd
}

func startStack(t *testing.T, edgeFlags ...string) *stack {
	t.Helper()
	bin, dir := testenv.Toolgate(t), t.TempDir()
	s := &stack{t: t, logs: map[string]string{}, admin: registry.NewKey()}
	t.Cleanup(func() {
		if t.Failed() {
			for name, log := range s.logs {
				b, _ := os.ReadFile(log)
				var warned []string
				for line := range strings.SplitSeq(string(b), "\n") {
					if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
						warned = append(warned, line)
					}
				}
				if len(b) > 3000 {
					b = b[len(b)-3000:]
				}
				t.Logf("--- %s: warnings and errors:\n%s\n--- %s (end):\n%s", name, strings.Join(warned, "\n"), name, b)
			}
		}
	})
	ports := testenv.FreePorts(t, 2)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	s.run(bin, dir, "nats", "nats", "--listen", strings.TrimPrefix(natsURL, "nats://"), "--store-dir", filepath.Join(dir, "nats"))
	linkSecret, adminKey := filepath.Join(dir, "link-secret"), filepath.Join(dir, "admin-key")
	if err := os.WriteFile(linkSecret, []byte(registry.NewLinkSecret()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminKey, []byte(s.admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.url = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.edge = s.run(bin, dir, "edge", append([]string{"edge", "--nats", natsURL, "--listen", strings.TrimPrefix(s.url, "http://"),
		"--link-secret-file", linkSecret, "--admin-key-file", adminKey, "--drain-delay", "0", "--wait", "60s"}, edgeFlags...)...)
	testenv.WaitFor(t, "the edge is ready", func() bool {
		resp, err := http.Get(s.url + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	s.bin, s.dir, s.nats = bin, dir, natsURL
	s.runWorker("worker", "worker", "demo")
	return s
}

// runWorker runs a worker command (args, without --nats) on the stack's NATS.
func (s *stack) runWorker(name string, args ...string) {
	s.t.Helper()
	s.run(s.bin, s.dir, name, append(args, "--nats", s.nats)...)
}

// adminCall sends an admin request and returns the answer's body.
func (s *stack) adminCall(method, path, body string) []byte {
	s.t.Helper()
	return testenv.Admin(s.t, s.url, s.admin, method, "/admin"+path, body)
}

// memory reads a field of the edge's /proc/<pid>/status, in bytes (VmRSS, VmHWM).
func (s *stack) memory(field string) int64 {
	s.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.edge.Process.Pid))
	if err != nil {
		s.t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				s.t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	s.t.Fatalf("no %s in /proc/<pid>/status", field)
	return 0
}

// resetPeak makes the edge's VmHWM its VmRSS of now (Linux: clear_refs 5).
func (s *stack) resetPeak() {
	s.t.Helper()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", s.edge.Process.Pid), []byte("5"), 0o600); err != nil {
		s.t.Fatalf("resetting the edge's peak RSS: %v", err)
	}
}

// boundPeak runs relay, which relays what, and fails the test when the edge's peak RSS
// grew by 16 MiB or more meanwhile (the bound for a 50 MiB reply).
func (s *stack) boundPeak(t *testing.T, what string, relay func()) {
	t.Helper()
	s.boundPeakBy(t, what, 16<<20, relay)
}

// boundPeakBy is boundPeak with a bound of its own.
func (s *stack) boundPeakBy(t *testing.T, what string, bound int64, relay func()) {
	t.Helper()
	s.resetPeak()
	before := s.memory("VmRSS")
	relay()
	peak := s.memory("VmHWM")
	t.Logf("relaying %s: edge RSS %.1f MiB before, peak %.1f MiB, grown %.1f MiB", what, mib(before), mib(peak), mib(peak-before))
	if peak-before >= bound {
		t.Errorf("the edge's peak RSS grew by %.1f MiB relaying %s, want less than %.0f", mib(peak-before), what, mib(bound))
	}
}
