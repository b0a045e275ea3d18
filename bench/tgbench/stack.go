package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stack is the gateway as separate processes on 127.0.0.1: a NATS node, the demo
// worker, an edge, and the bare HTTP server the gateway is compared against.
type stack struct {
	dir       string
	natsURL   string
	edgeURL   string
	bareURL   string
	adminKey  string
	edge      *exec.Cmd
	nats      *exec.Cmd
	startEdge func() (*exec.Cmd, error) // starts the edge as start did
	procs     []*exec.Cmd
	roles     []string // what each of procs is: nats, worker, edge, bare
	// Where the edge and the worker serve their Go profiles; empty unless asked for.
	edgePprof, workerPprof string
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *stack) start(ctx context.Context, bin, self string, log io.Writer, profile bool) error {
	var err error
	if s.dir, err = os.MkdirTemp("", "tgbench-"); err != nil {
		return err
	}
	ports := make([]int, 5)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return err
		}
	}
	s.natsURL = fmt.Sprintf("nats://127.0.0.1:%d", ports[0])
	s.edgeURL = fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	s.bareURL = fmt.Sprintf("http://127.0.0.1:%d", ports[2])
	if profile {
		s.edgePprof = fmt.Sprintf("127.0.0.1:%d", ports[3])
		s.workerPprof = fmt.Sprintf("127.0.0.1:%d", ports[4])
	}
	s.adminKey = "tg_benchadmin" + strconv.FormatInt(time.Now().UnixNano(), 36)
	secretFile := filepath.Join(s.dir, "link-secret")
	adminFile := filepath.Join(s.dir, "admin-key")
	if err := os.WriteFile(secretFile, []byte(strings.Repeat("b", 64)), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(adminFile, []byte(s.adminKey), 0o600); err != nil {
		return err
	}

	if s.nats, err = s.run(ctx, log, nil, "nats", bin, "nats", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--store-dir", filepath.Join(s.dir, "nats")); err != nil {
		return err
	}
	if err := waitTCP(ctx, fmt.Sprintf("127.0.0.1:%d", ports[0])); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if _, err := s.run(ctx, log, pprofEnv(s.workerPprof), "worker", bin, "worker", "demo", "--nats", s.natsURL); err != nil {
		return err
	}
	s.startEdge = func() (*exec.Cmd, error) {
		return s.run(ctx, log, pprofEnv(s.edgePprof), "edge", bin, "edge", "--nats", s.natsURL,
			"--listen", fmt.Sprintf("127.0.0.1:%d", ports[1]), "--base-url", s.edgeURL,
			"--link-secret-file", secretFile, "--admin-key-file", adminFile)
	}
	if s.edge, err = s.startEdge(); err != nil {
		return err
	}
	if _, err := s.run(ctx, log, nil, "bare", self, "bare", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[2])); err != nil {
		return err
	}
	// The tool of the 10 MiB replies (large.go), a worker process of its own.
	if _, err := s.run(ctx, log, nil, "blob", self, "blob", "--nats", s.natsURL); err != nil {
		return err
	}
	if err := waitHTTP(ctx, s.edgeURL+"/readyz"); err != nil {
		return fmt.Errorf("edge: %w", err)
	}
	return waitHTTP(ctx, s.bareURL+"/healthz")
}

// pprofEnv is the environment that has a toolgate process serve its profiles on addr.
func pprofEnv(addr string) []string {
	if addr == "" {
		return nil
	}
	return []string{"TOOLGATE_PPROF=" + addr}
}

func (s *stack) run(ctx context.Context, log io.Writer, env []string, role, name string, args ...string) (*exec.Cmd, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the bench
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s %s: %w", filepath.Base(name), args[0], err)
	}
	s.procs = append(s.procs, cmd)
	s.roles = append(s.roles, role)
	return cmd, nil
}

// restartEdge stops the edge and starts a fresh one on the same address, so that a
// measurement of its memory starts from a process no earlier one has grown.
func (s *stack) restartEdge(ctx context.Context) error {
	for i, p := range s.procs {
		if p == s.edge {
			stopProc(p)
			s.procs = append(s.procs[:i:i], s.procs[i+1:]...)
			s.roles = append(s.roles[:i:i], s.roles[i+1:]...)
			break
		}
	}
	var err error
	if s.edge, err = s.startEdge(); err != nil {
		return err
	}
	return waitHTTP(ctx, s.edgeURL+"/readyz")
}

// stopProc asks p to stop, kills it if it has not within 5 seconds (an edge drains
// for that long), and returns once it has exited, so that its ports are free.
func stopProc(p *exec.Cmd) {
	p.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.Process.Kill()
		<-done
	}
}

func (s *stack) stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		stopProc(s.procs[i])
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}

// edgeRSS is the edge process's resident memory in bytes.
func (s *stack) edgeRSS() (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", s.edge.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS for the edge")
}

func waitTCP(ctx context.Context, addr string) error {
	return poll(ctx, func() bool {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func waitHTTP(ctx context.Context, url string) error {
	return poll(ctx, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func poll(ctx context.Context, ok func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// cpuRoles are the processes whose CPU time a measurement reads, in the report's order:
// the load generator (this process) first.
var cpuRoles = []string{"load generator", "bare", "nats", "worker", "edge"}

// cpu is the CPU time (user and system) each process has used so far, by role.
func (s *stack) cpu() (map[string]time.Duration, error) {
	out := make(map[string]time.Duration, len(s.procs)+1)
	self, err := procCPU("self")
	if err != nil {
		return nil, err
	}
	out["load generator"] = self
	for i, p := range s.procs {
		d, err := procCPU(strconv.Itoa(p.Process.Pid))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.roles[i], err)
		}
		out[s.roles[i]] = d
	}
	return out, nil
}

// clockTick is the unit of /proc/<pid>/stat's times: USER_HZ, 100 on every Linux
// architecture Go runs on.
const clockTick = 10 * time.Millisecond

// procCPU reads utime and stime, fields 14 and 15 of /proc/<pid>/stat.
func procCPU(pid string) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%s/stat: utime %q, stime %q", pid, f[11], f[12])
	}
	return time.Duration(utime+stime) * clockTick, nil
}

// procStat is /proc/<pid>/stat's fields from the third on (f[0] is field 3, the state).
func procStat(pid string) ([]string, error) {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	// The command name, field 2, is in parentheses and may hold spaces: count fields
	// after its closing one.
	rest := string(data)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	return strings.Fields(rest), nil
}
