package chaos_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
)

// process is one toolgate process of the stack, started from the built binary.
type process struct {
	t    *testing.T
	name string
	bin  string
	args []string
	log  string // where its stderr and stdout go

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

func (p *process) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		f.Close()
		p.t.Fatalf("%s: start: %v", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		f.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
}

// kill ends the process as a crash would: SIGKILL, nothing drained or said.
func (p *process) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// stop ends the process as an operator would: SIGTERM, then SIGKILL if it lingers.
func (p *process) stop() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// tail is the end of the process's log, for a failing test's output.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// stack is toolgate deployed as separate processes on 127.0.0.1.
type stack struct {
	t       *testing.T
	nats    []*process
	natsURL string // every node, comma-separated
	edges   []*process
	urls    []string // each edge's base URL
	workers []*process
	key     string // an API key of the chaos account
	admin   string // the admin key
}

func (s *stack) all() []*process {
	return append(append(append([]*process{}, s.nats...), s.edges...), s.workers...)
}

// randomKey is a secret of the stack: 32 random bytes in hex.
func randomKey(t *testing.T) string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// startStack starts three NATS nodes as a cluster, two edges with the registry in
// three replicas, two demo workers, and an account with a key and the echo and clock
// tools; it returns once both edges show both tools online with two instances.
func startStack(t *testing.T, bin string) *stack {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 8) // NATS clients, NATS routes, edges
	s := &stack{t: t}
	var urls []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
	}
	s.natsURL = strings.Join(urls, ",")
	for i := range 3 {
		var routes []string
		for j := range 3 {
			if j != i {
				routes = append(routes, fmt.Sprintf("nats-route://127.0.0.1:%d", ports[3+j]))
			}
		}
		s.nats = append(s.nats, &process{t: t, name: fmt.Sprintf("nats-%d", i+1), bin: bin, log: filepath.Join(dir, fmt.Sprintf("nats-%d.log", i+1)),
			args: []string{"nats", "--name", fmt.Sprintf("n%d", i+1), "--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]),
				"--store-dir", filepath.Join(dir, fmt.Sprintf("nats-%d", i+1)), "--cluster", "tg-chaos",
				"--cluster-listen", fmt.Sprintf("127.0.0.1:%d", ports[3+i]), "--routes", strings.Join(routes, ",")}})
	}
	t.Cleanup(func() {
		for _, p := range s.all() {
			p.stop()
		}
		if t.Failed() {
			for _, p := range s.all() {
				t.Logf("--- %s log (end):\n%s", p.name, p.tail())
			}
		}
	})
	for _, p := range s.nats {
		p.start()
	}
	s.waitJetStream(60 * time.Second)

	s.admin = randomKey(t)
	linkSecret, adminKey := filepath.Join(dir, "link-secret"), filepath.Join(dir, "admin-key")
	if err := os.WriteFile(linkSecret, []byte(randomKey(t)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(adminKey, []byte(s.admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		url := fmt.Sprintf("http://127.0.0.1:%d", ports[6+i])
		p := &process{t: t, name: fmt.Sprintf("edge-%d", i+1), bin: bin, log: filepath.Join(dir, fmt.Sprintf("edge-%d.log", i+1)),
			args: []string{"edge", "--nats", s.natsURL, "--listen", strings.TrimPrefix(url, "http://"), "--base-url", url,
				"--link-secret-file", linkSecret, "--admin-key-file", adminKey, "--replicas", "3", "--dashboard=false", "--drain-delay", "0"}}
		s.edges, s.urls = append(s.edges, p), append(s.urls, url)
		p.start()
		s.waitReady(url, 60*time.Second) // the first makes the registry; the second finds it
	}
	for i := range 2 {
		p := &process{t: t, name: fmt.Sprintf("worker-%d", i+1), bin: bin, log: filepath.Join(dir, fmt.Sprintf("worker-%d.log", i+1)),
			args: []string{"worker", "demo", "--nats", s.natsURL, "--replicas", "3"}}
		s.workers = append(s.workers, p)
		p.start()
	}

	s.adminCall(http.MethodPost, "/admin/accounts", `{"id":"chaos","limits":{"rate":100000,"burst":100000}}`)
	var key struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(s.adminCall(http.MethodPost, "/admin/keys", `{"account":"chaos","name":"load"}`), &key); err != nil {
		t.Fatal(err)
	}
	s.key = key.Key
	for _, tool := range []string{"echo", "clock"} {
		s.adminCall(http.MethodPost, "/admin/connections", `{"account":"chaos","tool":"`+tool+`"}`)
	}
	s.waitHealthy(60 * time.Second)
	return s
}

// waitJetStream waits until the cluster has a JetStream meta leader.
func (s *stack) waitJetStream(within time.Duration) {
	s.t.Helper()
	// The nodes may not listen yet: the client keeps trying.
	nc, err := nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		s.t.Fatalf("nats: %v", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := js.AccountInfo(ctx)
		cancel()
		if err == nil {
			// The first edge makes the registry's R3 buckets, and exits if the cluster
			// cannot place them yet.
			testenv.WaitPlacement(s.t, nc)
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("JetStream not ready within %v: %v", within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// presenceLeader returns when the presence bucket's stream had a leader again, or
// until, whichever comes first.
func (s *stack) presenceLeader(until time.Time) time.Time {
	nc, err := nats.Connect(s.natsURL, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		return until
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return until
	}
	for time.Now().Before(until) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := js.Stream(ctx, "KV_tg-presence")
		cancel()
		if err == nil && st.CachedInfo().Cluster != nil && st.CachedInfo().Cluster.Leader != "" {
			return time.Now()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return until
}

// waitReady waits until the edge at url answers /readyz with 200.
func (s *stack) waitReady(url string, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("edge %s not ready within %v (%v)", url, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// showInstances reports whether every edge shows both tools with n instances.
func (s *stack) showInstances(n int) bool {
	for _, url := range s.urls {
		for _, tool := range []string{"echo", "clock"} {
			req, _ := http.NewRequest(http.MethodGet, url+"/tools/"+tool, nil)
			req.Header.Set("SERVICE_API_KEY", s.key)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false
			}
			var info struct {
				Instances int `json:"instances"`
			}
			err = json.NewDecoder(resp.Body).Decode(&info)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK || info.Instances != n {
				return false
			}
		}
	}
	return true
}

// waitHealthy waits until every edge is ready and shows both tools with two instances.
func (s *stack) waitHealthy(within time.Duration) { s.waitInstances(2, within) }

// waitInstances waits until every edge shows both tools with n instances.
func (s *stack) waitInstances(n int, within time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(within)
	for !s.showInstances(n) {
		if time.Now().After(deadline) {
			s.t.Fatalf("the edges did not show both tools with %d instances within %v", n, within)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// busiestNode is the NATS node the most edges and workers are connected to, as their
// logs last said (an edge counts twice: losing its node is the harder fault), with the
// names of those.
func (s *stack) busiestNode() (int, []string) {
	counts := make([]int, len(s.nats))
	on := make([][]string, len(s.nats))
	for i, p := range append(append([]*process{}, s.edges...), s.workers...) {
		weight := 1
		if i < len(s.edges) {
			weight = 2
		}
		b, _ := os.ReadFile(p.log)
		url := ""
		for line := range strings.SplitSeq(string(b), "\n") {
			var entry struct {
				Msg, URL string
			}
			if json.Unmarshal([]byte(line), &entry) == nil && (entry.Msg == "nats connected" || entry.Msg == "nats reconnected") {
				url = entry.URL
			}
		}
		for n, node := range strings.Split(s.natsURL, ",") {
			if url == node {
				counts[n] += weight
				on[n] = append(on[n], p.name)
			}
		}
	}
	busiest := 0
	for n, c := range counts {
		if c > counts[busiest] {
			busiest = n
		}
	}
	return busiest, on[busiest]
}

// reconnected is how long after at each of the named processes logged that it was on
// another NATS node; a process that has not says so.
func (s *stack) reconnected(names []string, at time.Time) string {
	var out []string
	for _, p := range s.all() {
		if !slices.Contains(names, p.name) {
			continue
		}
		b, _ := os.ReadFile(p.log)
		took := "not yet"
		for line := range strings.SplitSeq(string(b), "\n") {
			var entry struct {
				Time time.Time
				Msg  string
			}
			if json.Unmarshal([]byte(line), &entry) == nil && entry.Msg == "nats reconnected" && entry.Time.After(at) {
				took = entry.Time.Sub(at).Round(time.Millisecond).String()
				break
			}
		}
		out = append(out, p.name+" "+took)
	}
	return strings.Join(out, ", ")
}

// adminCall calls the admin API of the first edge and returns the answer's body.
func (s *stack) adminCall(method, path, body string) []byte {
	s.t.Helper()
	return testenv.Admin(s.t, s.urls[0], s.admin, method, path, body)
}
