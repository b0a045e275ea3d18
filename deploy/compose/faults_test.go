package compose

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The pace of the loads: each loop sends one call, then waits this long. Together they
// stay under the dev key's rate (the edges' default, 50 calls a second, shared by
// every edge), so that no call is refused for its rate.
const (
	callEvery  = 60 * time.Millisecond
	mcpEvery   = 100 * time.Millisecond
	adminEvery = 300 * time.Millisecond
	// maxFailing is how long calls may fail while a NATS node dies or drops off.
	maxFailing = 2 * time.Second
)

// load is the traffic of one scenario: a call loop through each edge, an MCP session,
// and, where asked, keys created and revoked.
type load struct {
	calls []*callLoad
	mcp   *mcpSession
	admin *adminLoad
	stop  chan struct{}
	wg    sync.WaitGroup
	err   error
}

type loadOptions struct {
	retry    bool // the call loops resend calls that met a connection error
	admin    bool
	streamOn int                // the edge the MCP stream opens on
	post     func(i int) string // the edge the MCP session POSTs request i to
}

func (s *stack) startLoad(o loadOptions) *load {
	l := &load{stop: make(chan struct{})}
	for i, e := range s.edges {
		c := &callLoad{edge: e, key: s.devKey}
		if o.retry {
			c.retry = s.edges[(i+1)%len(s.edges)]
		}
		l.calls = append(l.calls, c)
	}
	if o.post == nil {
		o.post = func(i int) string { return s.edges[i%len(s.edges)] }
	}
	l.mcp = newMCPSession(s.echoLink(), s.edges, o.streamOn, o.post)
	l.mcp.retry = o.retry
	if o.admin {
		l.admin = &adminLoad{edges: s.edges, adminKey: s.admin}
	}
	for _, c := range l.calls {
		l.wg.Go(func() { c.run(l.stop, callEvery) })
	}
	l.wg.Go(func() { l.err = l.mcp.run(l.stop, mcpEvery) })
	if l.admin != nil {
		l.wg.Go(func() { l.admin.run(l.stop, adminEvery) })
	}
	return l
}

// from tells the failures from t on: when each failed, printed by finish.
func (l *load) from(t time.Time) {
	for _, c := range append([]*tally{&l.mcp.tally}, tallies(l.calls)...) {
		c.add(func(c *tally) { c.origin = t })
	}
	if l.admin != nil {
		l.admin.add(func(c *tally) { c.origin = t })
	}
}

// finish stops the load, waits for the answers still due, and prints the figures.
func (l *load) finish(t *testing.T) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	for i, c := range l.calls {
		t.Logf("calls through edge-%d: %s", i+1, c)
	}
	t.Logf("MCP session: %s", l.mcp)
	if l.admin != nil {
		t.Logf("keys created and revoked: %s", &l.admin.tally)
	}
	if l.err != nil {
		failed.errorf(t, "%v", l.err)
	}
}

// noHung fails the test on any call nobody answered within hungAfter.
func (l *load) noHung(t *testing.T) {
	t.Helper()
	for i, c := range l.calls {
		if c.hung > 0 {
			failed.errorf(t, "edge-%d: %d calls hung (no answer within %s)", i+1, c.hung, hungAfter)
		}
	}
	if l.mcp.hung > 0 {
		failed.errorf(t, "MCP session: %d requests hung", l.mcp.hung)
	}
}

// noLoss fails the test on any failed, wrong or hung call through either edge or
// over the MCP session.
func (l *load) noLoss(t *testing.T) {
	t.Helper()
	for i, c := range l.calls {
		if n := c.failures(); n > 0 {
			failed.errorf(t, "edge-%d: %d calls failed or hung: %s", i+1, n, c)
		}
	}
	for _, p := range l.mcp.problems() {
		failed.errorf(t, "MCP session: %s", p)
	}
}

// failingAtMost fails the test when the calls (through the edges, over the MCP
// session) that failed or hung were sent over more than d, and when keys could not
// be created and revoked.
func (l *load) failingAtMost(t *testing.T, d time.Duration) {
	t.Helper()
	var all tally
	for _, c := range append([]*tally{&l.mcp.tally}, tallies(l.calls)...) {
		c.mu.Lock()
		if !c.first.IsZero() {
			if all.first.IsZero() || c.first.Before(all.first) {
				all.first = c.first
			}
			if c.last.After(all.last) {
				all.last = c.last
			}
		}
		c.mu.Unlock()
	}
	t.Logf("calls failed for %s in all", all.window().Round(time.Millisecond))
	if w := all.window(); w > d {
		failed.errorf(t, "calls failed for %s, more than %s", w.Round(time.Millisecond), d)
	}
	for _, p := range l.mcp.problems() {
		if !strings.Contains(p, "requests failed") { // failures are measured above
			failed.errorf(t, "MCP session: %s", p)
		}
	}
	if l.admin != nil && l.admin.failures() > 0 {
		failed.errorf(t, "keys could not be created and revoked throughout: %s", &l.admin.tally)
	}
}

func tallies(calls []*callLoad) []*tally {
	var ts []*tally
	for _, c := range calls {
		ts = append(ts, &c.tally)
	}
	return ts
}

// echoLink is the path of the dev account's link to the echo tool (HTTP+SSE).
func (s *stack) echoLink() string {
	s.t.Helper()
	_, body := get(s.edges[0]+"/get-tools", s.devKey)
	var tools struct {
		Tools []struct {
			ID     string `json:"id"`
			SSEURL string `json:"sse_url"`
		} `json:"tools"`
	}
	if err := json.Unmarshal([]byte(body), &tools); err != nil {
		failed.fatalf(s.t, "get-tools: %v: %s", err, body)
	}
	for _, tool := range tools.Tools {
		if tool.ID == "echo" {
			u, err := url.Parse(tool.SSEURL)
			if err != nil {
				failed.fatalf(s.t, "%v", err)
			}
			return u.Path
		}
	}
	failed.fatalf(s.t, "no echo tool: %s", body)
	return ""
}

// natsHealthy waits until the NATS node's /healthz answers 200 inside its container.
func (s *stack) natsHealthy(node string, within time.Duration) {
	s.t.Helper()
	name := s.container(node)
	eventually(s.t, within, node+" is healthy again", func() bool {
		_, err := s.try(10*time.Second, "podman", "exec", name, "/usr/local/bin/toolgate", "health", "http://127.0.0.1:8222/healthz")
		return err == nil
	})
}

// natsFault puts a NATS node through a fault under load: the podman command fault
// (with the node's container last), down for the given time, then heal; and checks
// that calls failed for at most maxFailing, none hung, and keys were made and revoked
// throughout.
func (s *stack) natsFault(t *testing.T, node string, down time.Duration, fault, heal []string) {
	l := s.startLoad(loadOptions{admin: true})
	time.Sleep(3 * time.Second)
	name := s.container(node)
	l.from(time.Now())
	s.podman(append(fault, name)...)
	time.Sleep(down)
	healed := time.Now()
	s.podman(append(heal, name)...)
	t.Logf("%s healed %.1fs after the fault", node, healed.Sub(l.calls[0].origin).Seconds())
	s.natsHealthy(node, 2*time.Minute)
	time.Sleep(3 * time.Second)
	l.finish(t)
	s.saveLogs(t)
	l.noHung(t)
	l.failingAtMost(t, maxFailing)
}

// natsNodeOf names the NATS node (nats-1, nats-2 or nats-3) a service's connection
// went to last, from the "nats connected" and "nats reconnected" lines of its log;
// a node the client learned by address is named by its address on the network.
func (s *stack) natsNodeOf(service string) string {
	s.t.Helper()
	var url string
	for _, line := range strings.Split(s.podman("logs", s.container(service)), "\n") {
		if m := natsURL.FindStringSubmatch(line); m != nil {
			url = m[1]
		}
	}
	for _, node := range []string{"nats-1", "nats-2", "nats-3"} {
		ip := strings.TrimSpace(s.podman("inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", s.container(node)))
		if url == node || (ip != "" && url == ip) {
			s.t.Logf("%s is on %s", service, node)
			return node
		}
	}
	failed.fatalf(s.t, "%s's log names no NATS node it is on (last: %q)", service, url)
	return ""
}

var natsURL = regexp.MustCompile(`"msg":"nats (?:re)?connected","url":"tls://([^":]+):4222"`)

// saveLogs keeps every container's log in the directory TOOLGATE_COMPOSE_LOGS names,
// if set, under the test's name: what a fault looked like from inside.
func (s *stack) saveLogs(t *testing.T) {
	dir := os.Getenv("TOOLGATE_COMPOSE_LOGS")
	if dir == "" {
		return
	}
	for _, svc := range []string{"nats-1", "nats-2", "nats-3", "edge-1", "edge-2", "demo-1", "demo-2"} {
		out, _ := s.try(time.Minute, "podman", "logs", "-t", s.container(svc))
		name := strings.NewReplacer(" ", "_", "/", "_", ":", "_", ",", "").Replace(t.Name()) + "." + svc + ".log"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(out), 0o644); err != nil {
			t.Log(err)
		}
	}
}

// TestStack brings the compose stack up once and puts it through each fault in turn,
// with load through both edges; each scenario leaves the stack whole again.
func TestStack(t *testing.T) {
	needPodman(t)
	began := time.Now()
	s := startStack(t)
	defer func() { t.Logf("container tests took %s", time.Since(began).Round(time.Second)) }()

	t.Run("the bus admits only the deployment's users, over TLS; a tool team's credentials are issued and revoked", func(t *testing.T) {
		s.t = t
		s.busSecured(t)
	})

	t.Run("an edge killed: calls through the other edge never fail, and the MCP session resumes there", func(t *testing.T) {
		s.t = t
		l := s.startLoad(loadOptions{streamOn: 0, post: func(int) string { return s.edges[1] }})
		time.Sleep(3 * time.Second)
		edge1 := s.container("edge-1")
		s.podman("kill", edge1)
		time.Sleep(5 * time.Second)
		s.podman("start", edge1)
		s.waitReady(2 * time.Minute)
		time.Sleep(2 * time.Second)
		l.finish(t)
		// A call in flight on the killed edge gets no answer at all: its container's
		// network is gone, so the client learns nothing until its own timeout.
		if n := l.calls[1].failures(); n > 0 {
			failed.errorf(t, "calls through edge-2 failed: %s", l.calls[1])
		}
		for _, p := range l.mcp.problems() {
			failed.errorf(t, "MCP session: %s", p)
		}
		if !strings.Contains(strings.Join(l.mcp.streams, " "), s.edges[1]+` after "`) || l.mcp.lastID == "" {
			failed.errorf(t, "the MCP stream did not resume on edge-2: %v", l.mcp.streams)
		}
	})

	t.Run("a worker stopped under load while another runs: no call lost", func(t *testing.T) {
		s.t = t
		l := s.startLoad(loadOptions{})
		time.Sleep(3 * time.Second)
		worker := s.container("demo-1")
		s.podman("stop", "-t", "40", worker)
		time.Sleep(3 * time.Second)
		s.podman("start", worker)
		for _, e := range s.edges {
			eventually(t, time.Minute, "echo has 2 instances again", func() bool {
				_, body := get(e+"/get-tools", s.devKey)
				return strings.Contains(body, `"id":"echo"`) && strings.Contains(body, `"instances":2`)
			})
		}
		time.Sleep(2 * time.Second)
		l.finish(t)
		l.noLoss(t)
	})

	t.Run("a rolling restart of both edges: no call fails for a client that resends on connection errors", func(t *testing.T) {
		s.t = t
		l := s.startLoad(loadOptions{retry: true})
		time.Sleep(3 * time.Second)
		for _, edge := range []string{"edge-1", "edge-2"} {
			s.podman("restart", "-t", "20", s.container(edge))
			s.waitReady(2 * time.Minute)
			time.Sleep(2 * time.Second)
		}
		l.finish(t)
		l.noLoss(t)
	})

	t.Run("a NATS node killed and started again: calls fail for at most 2s, none hangs, keys are made and revoked throughout", func(t *testing.T) {
		s.t = t
		s.natsFault(t, "nats-1", 5*time.Second, []string{"kill"}, []string{"start"})
	})

	t.Run("a NATS node cut off the network and reconnected: calls fail for at most 2s, none hangs, keys are made and revoked throughout", func(t *testing.T) {
		s.t = t
		// The node the echo tool's first worker is on: its workers must move to
		// another node within the bound, the case a random pick would meet only now
		// and then.
		node := s.natsNodeOf("demo-1")
		s.natsFault(t, node, 8*time.Second, []string{"network", "disconnect", s.network()},
			[]string{"network", "connect", "--alias", node, s.network()})
	})

	t.Run("a second up on the same volumes keeps keys, accounts and sessions", func(t *testing.T) {
		s.t = t
		devKey, adminKey := s.devKey, s.admin
		session := s.openSession(t)
		s.compose("down")
		s.up() // and waits for the bootstrap's second run to end: its log is whole
		if s.devKey != devKey || s.admin != adminKey {
			failed.fatalf(t, "%v", "the keys changed")
		}
		if out := s.podman("logs", s.container("bootstrap")); !strings.Contains(out, "(kept)") || strings.Contains(out, devKey) || strings.Contains(out, adminKey) {
			failed.errorf(t, "the bootstrap's second run said:\n%s", out)
		}
		if status := s.listTools(session); status != http.StatusOK {
			failed.errorf(t, "the MCP session %s after the second up: tools/list answered %d", session, status)
		}
	})
}

// mcpURL is the Streamable HTTP link of the echo tool on edge-1.
func (s *stack) mcpURL() string {
	return s.edges[0] + strings.TrimSuffix(s.echoLink(), "/sse")
}

// openSession opens a Streamable HTTP session on edge-1 and returns its id.
func (s *stack) openSession(t *testing.T) string {
	t.Helper()
	resp, err := s.rpc("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"compose-test","version":"1"}}}`)
	if err != nil {
		failed.fatalf(t, "%v", err)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		failed.fatalf(t, "initialize: %d, session %q", resp.StatusCode, id)
	}
	if resp, err := s.rpc(id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil || resp.StatusCode != http.StatusAccepted {
		failed.fatalf(t, "initialized: %v %v", resp, err)
	}
	if status := s.listTools(id); status != http.StatusOK {
		failed.fatalf(t, "tools/list: %d", status)
	}
	return id
}

func (s *stack) listTools(session string) int {
	resp, err := s.rpc(session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if err != nil {
		return 0
	}
	return resp.StatusCode
}

// rpc POSTs one JSON-RPC message to the Streamable HTTP link and reads the answer.
func (s *stack) rpc(session, body string) (*http.Response, error) {
	req, err := http.NewRequest(http.MethodPost, s.mcpURL(), strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	resp, err := quick.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusOK && bytes.Contains(b, []byte(`"error"`)) {
		return nil, fmt.Errorf("%s", b)
	}
	return resp, nil
}
