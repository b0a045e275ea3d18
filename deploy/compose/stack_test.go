// Package compose tests docker-compose.yml: the file as Compose loads it, and the
// stack it describes running in real containers (Podman and podman-compose), under
// load through both edges while containers are killed, cut off and restarted.
package compose

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// stack is the compose stack brought up once for the container tests: its own
// project name, ports and key directory, so that it never meets a stack of the
// user's.
type stack struct {
	t       *testing.T
	project string
	env     []string // for podman-compose: image, ports, key directory
	edges   []string // base URLs of edge-1 and edge-2
	keys    string   // the key directory
	devKey  string
	admin   string
}

// runID names what this run of the tests makes in the container engine (the image,
// the compose project, and so its containers, network and volumes): the process id
// keeps runs at the same time apart, and the random part keeps a run apart from what
// an earlier one, stopped before its cleanup, left under the same process id.
var runID = fmt.Sprintf("%d%06x", os.Getpid(), rand.IntN(1<<24))

// image is the tag the tests build and run: apart from the user's toolgate:latest,
// and of this run alone, so that runs of two trees on one machine never start each
// other's binary.
var image = "toolgate:compose-test-" + runID

// repoRoot is the repository's root, where the Makefile and docker-compose.yml are.
var repoRoot, _ = filepath.Abs("../..")

// needPodman skips the test, saying why, when Podman cannot run the stack here: the
// Makefile's test-deps installs podman, podman-compose and runc where apt-get can.
func needPodman(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the compose stack's container tests take minutes; not with -short")
	}
	for _, bin := range []string{"podman", "podman-compose", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed (make test-deps installs podman, podman-compose and runc where apt-get can): the compose stack's container tests do not run", bin)
		}
	}
	if os.Getenv("CONTAINERS_CONF") == "" {
		t.Setenv("CONTAINERS_CONF", filepath.Join(repoRoot, "deploy", "containers.conf"))
	}
}

// command runs name with args (and the stack's environment) and returns its output;
// a failure fails the test.
func (s *stack) command(timeout time.Duration, name string, args ...string) string {
	s.t.Helper()
	out, err := s.try(timeout, name, args...)
	if err != nil {
		failed.fatalf(s.t, "%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return out
}

func (s *stack) try(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), s.env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func (s *stack) compose(args ...string) string {
	s.t.Helper()
	return s.command(5*time.Minute, "podman-compose", append([]string{"-p", s.project}, args...)...)
}

// container names a service's container, found by the labels Compose gives it.
func (s *stack) container(service string) string {
	s.t.Helper()
	out := strings.Fields(s.command(time.Minute, "podman", "ps", "-a",
		"--filter", "label=com.docker.compose.project="+s.project,
		"--filter", "label=com.docker.compose.service="+service, "--format", "{{.Names}}"))
	if len(out) != 1 {
		failed.fatalf(s.t, "service %s has containers %v", service, out)
	}
	return out[0]
}

func (s *stack) podman(args ...string) string {
	s.t.Helper()
	return s.command(2*time.Minute, "podman", args...)
}

// network is the stack's network, as Compose names it.
func (s *stack) network() string { return s.project + "_default" }

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		failed.fatalf(t, "%v", err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// startStack builds the image from this tree and brings the stack up, as `make
// compose-up` does; it is brought down, volumes and all, when the test ends.
func startStack(t *testing.T) *stack {
	t.Helper()
	port1, port2 := freePort(t), freePort(t)
	s := &stack{
		t:       t,
		project: "tgtest" + runID,
		keys:    t.TempDir(),
		edges:   []string{"http://127.0.0.1:" + port1, "http://127.0.0.1:" + port2},
	}
	s.env = []string{"TOOLGATE_IMAGE=" + image, "TOOLGATE_PORT=" + port1, "TOOLGATE_PORT_2=" + port2, "TOOLGATE_COMPOSE_DIR=" + s.keys}
	began := time.Now()
	s.command(10*time.Minute, "make", "image", "ENGINE=podman", "IMAGE="+image)
	t.Logf("image built in %s", time.Since(began).Round(time.Second))
	t.Cleanup(func() {
		if t.Failed() {
			s.logs()
			t.Logf("what failed, again:\n%s", &failed)
		}
		if out, err := s.try(5*time.Minute, "podman-compose", "-p", s.project, "down", "-v"); err != nil {
			failed.errorf(t, "podman-compose down: %v\n%s", err, out)
		}
		if out, err := s.try(time.Minute, "podman", "rmi", image); err != nil {
			failed.errorf(t, "podman rmi %s: %v\n%s", image, err, out)
		}
	})
	s.up()
	t.Logf("stack up and serving in %s", time.Since(began).Round(time.Second))
	return s
}

// up starts the stack and waits until its one-shot services (bus-init, bootstrap)
// have run to their end and both edges serve the demo tools, with both workers'
// instances, to the dev key. An edge can be ready before the bootstrap ends (a second
// up finds the secrets it reads already there), so only the bootstrap's exit says
// that the keys are written and its log is whole.
func (s *stack) up() {
	s.t.Helper()
	s.compose("up", "-d")
	for _, oneShot := range []string{"bus-init", "bootstrap"} {
		s.finished(oneShot, 3*time.Minute)
	}
	s.waitReady(3 * time.Minute)
	s.devKey, s.admin = s.readKey("dev-key"), s.readKey("admin-key")
	for _, e := range s.edges {
		eventually(s.t, 2*time.Minute, e+" shows echo online with 2 instances", func() bool {
			status, body := get(e+"/get-tools", s.devKey)
			return status == http.StatusOK && strings.Contains(body, `"id":"echo"`) && strings.Contains(body, `"status":"online","instances":2`)
		})
	}
}

// waitReady waits until both edges answer /readyz.
func (s *stack) waitReady(within time.Duration) {
	s.t.Helper()
	for _, e := range s.edges {
		eventually(s.t, within, e+" is ready", func() bool {
			status, _ := get(e+"/readyz", "")
			return status == http.StatusOK
		})
	}
}

// finished waits until the one-shot service's container has run to its end, as
// Podman tells it (podman wait, then the state it inspects), and fails the test unless
// it exited 0 within the time given. Its restart policy (on-failure) starts a failed
// run again: a code other than 0 is waited past, until the run that succeeds.
func (s *stack) finished(service string, within time.Duration) {
	s.t.Helper()
	name := s.container(service)
	deadline := time.Now().Add(within)
	for {
		if out, err := s.try(max(time.Until(deadline), time.Second), "podman", "wait", name); err != nil {
			s.t.Logf("podman wait %s: %v: %s", name, err, strings.TrimSpace(out))
		}
		state := strings.TrimSpace(s.podman("inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name))
		if state == "exited 0" {
			return
		}
		if time.Now().After(deadline) {
			log, _ := s.try(time.Minute, "podman", "logs", "--tail", "30", name)
			failed.fatalf(s.t, "%s has not run to a successful end within %s (%s):\n%s", service, within, state, log)
		}
		time.Sleep(time.Second)
	}
}

// readKey reads a key the bootstrap wrote; up has waited for it to end.
func (s *stack) readKey(name string) string {
	s.t.Helper()
	path := filepath.Join(s.keys, name)
	b, err := os.ReadFile(path)
	if err != nil || len(bytes.TrimSpace(b)) == 0 {
		failed.fatalf(s.t, "the bootstrap ended without writing %s: %v", name, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		failed.fatalf(s.t, "%s: %v, mode %v: want 0600", path, err, fi.Mode().Perm())
	}
	return string(bytes.TrimSpace(b))
}

// logs prints the last lines of every container's log other than the access log's,
// to say why a test failed, and keeps each whole log in a file whose path it prints.
// The lines printed stay few: a failing check's message, printed before them, must
// still be near the end of the output that CI shows.
func (s *stack) logs() {
	out, _ := s.try(time.Minute, "podman", "ps", "-a", "--filter", "label=com.docker.compose.project="+s.project, "--format", "{{.Names}} {{.Status}}")
	s.t.Logf("containers:\n%s", out)
	dir, err := os.MkdirTemp("", "toolgate-compose-logs-")
	if err != nil {
		s.t.Log(err)
	}
	for _, name := range strings.Fields(out) {
		if !strings.HasPrefix(name, s.project) {
			continue
		}
		l, _ := s.try(time.Minute, "podman", "logs", "-t", name)
		if dir != "" {
			_ = os.WriteFile(filepath.Join(dir, name+".log"), []byte(l), 0o644)
		}
		var last []string
		for _, line := range strings.Split(strings.TrimSpace(l), "\n") {
			if !strings.Contains(line, `"msg":"http request"`) {
				last = append(last, line)
			}
		}
		s.t.Logf("%s:\n%s", name, strings.Join(last[max(0, len(last)-4):], "\n"))
	}
	if dir != "" {
		s.t.Logf("the containers' whole logs: %s", dir)
	}
}

func get(url, key string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, err.Error()
	}
	if key != "" {
		req.Header.Set("SERVICE_API_KEY", key)
	}
	resp, err := quick.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// quick is a client for probes: a stuck answer is no answer.
var quick = &http.Client{Timeout: 5 * time.Second}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			failed.fatalf(t, "not within %s: %s", within, what)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
