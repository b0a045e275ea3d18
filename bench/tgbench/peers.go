package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bench/load"
)

// The peer comparison: one MCP client (the Go SDK's) calls the echo tool of one stdio
// MCP server, the fixture, reached straight over stdio (the baseline) and through each
// way of serving it over Streamable HTTP: a toolgate link (edge, NATS, the MCP
// bridge worker) and other MCP gateways and proxies. Every row has one client session
// and so one server process behind it; calls are made by 1 and then by N callers at
// once on that session, the rows taken in turns, several rounds, so that the machine's
// other load falls on all of them alike. The rows marked "N sessions" have N client
// sessions instead (N, the callers), as a gateway's clients do: the calls go
// round-robin over them; toolgate's in each mode of the bridge's upstream sessions.

// peerProtocol is the protocol version every row's client asks for: the sessionful
// revision that every proxy measured carries the same way (2026-07-28 is served per
// request, and differently, by each).
const peerProtocol = "2025-11-25"

// peerPaths is where the proxies are, as `make bench` installs them
// (scripts/bench-peers.sh); an empty path leaves the row out, saying so.
type peerPaths struct {
	fixture      string // the stdio MCP server (bin/mcpfixture)
	supergateway string // supergateway's dist/index.js
	mcpProxy     string // mcp-proxy's dist/bin/mcp-proxy.mjs
	tbxark       string // TBXark/mcp-proxy's binary
	rounds       int
	duration     time.Duration
}

// peer is one way to reach the fixture.
type peer struct {
	name    string
	skip    string // why the row is not measured
	session *mcp.ClientSession
	// more are the row's other client sessions: its calls go round-robin over
	// session and these.
	more     []*mcp.ClientSession
	endpoint string // a Streamable HTTP row's, where more are opened
	parts    []part // the processes whose CPU counts: the proxy's, then the server's
	results  [2][]load.Result
	cpu      [2]map[string]time.Duration // by part, over every round
}

// part is one of a row's processes, or a group of them, named for the report. The
// last part of every row is the server.
type part struct {
	name string
	pids func() []int
}

// sessionFor is the client session of the row's call number n.
func (p *peer) sessionFor(n int64) *mcp.ClientSession {
	if len(p.more) == 0 {
		return p.session
	}
	if i := n % int64(len(p.more)+1); i > 0 {
		return p.more[i-1]
	}
	return p.session
}

// sessions are all of the row's client sessions.
func (p *peer) sessions() []*mcp.ClientSession {
	if p.session == nil {
		return nil
	}
	return append([]*mcp.ClientSession{p.session}, p.more...)
}

// openMore opens n-1 more client sessions on p's endpoint, so that it has n.
func (p *peer) openMore(ctx context.Context, d peerDialer, n int) error {
	for range n - 1 {
		cs, err := d.streamable(ctx, p.endpoint)
		if err != nil {
			return fmt.Errorf("%s: client session %d: %w", p.name, len(p.more)+2, err)
		}
		p.more = append(p.more, cs)
	}
	return nil
}

func (p *peer) cpuNow() map[string]time.Duration {
	out := make(map[string]time.Duration, len(p.parts))
	for _, pt := range p.parts {
		out[pt.name] = treeCPU(pt.pids())
	}
	return out
}

func pids(pid int) func() []int { return func() []int { return []int{pid} } }

// below is every process under pid, and not pid itself.
func below(pid int) func() []int { return func() []int { return tree(pid)[1:] } }

type peerReport struct {
	callers  [2]int
	rounds   int
	duration time.Duration
	load0    string // /proc/loadavg before and after
	load1    string
	peers    []*peer
	started  time.Time
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// runPeers starts every row's way to the fixture, measures them in turns, and returns
// the report; its processes end with the stack.
func runPeers(ctx context.Context, s *stack, cfg config, acct *account, logs io.Writer) (*peerReport, error) {
	p := cfg.peers
	if p.fixture == "" {
		return nil, errors.New("-fixture: no stdio MCP server to measure the peers with")
	}
	fixture, err := filepath.Abs(p.fixture)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(fixture); err != nil {
		return nil, fmt.Errorf("-fixture: %w", err)
	}
	rep := &peerReport{callers: [2]int{1, cfg.callers}, rounds: p.rounds, duration: p.duration, started: time.Now()}
	d := peerDialer{client: mcp.NewClient(&mcp.Implementation{Name: "tgbench", Version: "1"}, nil),
		opts: &mcp.ClientSessionOptions{ProtocolVersion: peerProtocol}}
	direct, err := directPeer(ctx, d, fixture, logs)
	if err != nil {
		return nil, err
	}
	rep.peers = append(rep.peers, direct)
	tg, bridgePprof, err := toolgatePeer(ctx, d, s, cfg, acct, fixture, logs)
	if err != nil {
		return nil, err
	}
	rep.peers = append(rep.peers, tg)
	for _, o := range proxyRows(p, fixture, s.dir) {
		row, err := startProxy(ctx, d, s, o, logs)
		if err != nil {
			return nil, err
		}
		rep.peers = append(rep.peers, row)
	}
	many, err := manySessionRows(ctx, d, s, cfg, acct, fixture, logs)
	if err != nil {
		return nil, err
	}
	rep.peers = append(rep.peers, many...)

	var seq atomic.Int64
	if err := rep.measure(ctx, cfg, &seq); err != nil {
		return nil, err
	}
	if cfg.profile != "" {
		// The link's processes under the N callers' load, once more, outside the table.
		fn := func(ctx context.Context) error { return echo(ctx, tg.session, seq.Add(1)) }
		if err := profile(ctx, map[string]string{"edge": s.edgePprof, "bridge": bridgePprof}, cfg, "peers-toolgate", fn); err != nil {
			return nil, fmt.Errorf("profile the link: %w", err)
		}
	}
	for _, pr := range rep.peers {
		for _, cs := range pr.sessions() {
			cs.Close()
		}
	}
	return rep, nil
}

// peerDialer opens the rows' client sessions: one client, asking every row for
// peerProtocol.
type peerDialer struct {
	client *mcp.Client
	opts   *mcp.ClientSessionOptions
}

func (d peerDialer) connect(ctx context.Context, t mcp.Transport) (*mcp.ClientSession, error) {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return d.client.Connect(cctx, t, d.opts)
}

func (d peerDialer) streamable(ctx context.Context, endpoint string) (*mcp.ClientSession, error) {
	return d.connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: peerClient, MaxRetries: -1})
}

// directPeer is the baseline: straight over stdio, the client starts the server.
func directPeer(ctx context.Context, d peerDialer, fixture string, logs io.Writer) (*peer, error) {
	direct := &peer{name: "direct over stdio (baseline)"}
	cmd := exec.Command(fixture)
	cmd.Stderr = logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var err error
	if direct.session, err = d.connect(ctx, &mcp.CommandTransport{Command: cmd}); err != nil {
		return nil, fmt.Errorf("direct: %w", err)
	}
	direct.parts = []part{{"server", pids(cmd.Process.Pid)}}
	return direct, nil
}

// toolgatePeer is a toolgate link: the bridge worker runs the server; the bench
// account connects the tool and calls it through its link on the stack's edge. It
// also returns the bridge's pprof address when cfg asks for profiles.
func toolgatePeer(ctx context.Context, d peerDialer, s *stack, cfg config, acct *account, fixture string, logs io.Writer) (*peer, string, error) {
	tg := &peer{name: "toolgate link (edge, NATS, `worker mcp`)"}
	var bridgePprof string
	if cfg.profile != "" {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		bridgePprof = fmt.Sprintf("127.0.0.1:%d", port)
	}
	if err := bridgedRow(ctx, d, s, cfg, acct, logs, tg, pprofEnv(bridgePprof), "fixture", "--", fixture); err != nil {
		return nil, "", err
	}
	return tg, bridgePprof, nil
}

// bridgedRow runs `toolgate worker mcp --tool tool` with args (its flags, then -- and
// the server's command), connects the bench account to the tool, and opens row's
// client session on its link.
func bridgedRow(ctx context.Context, d peerDialer, s *stack, cfg config, acct *account, logs io.Writer, row *peer, env []string, tool string, args ...string) error {
	w, err := s.run(ctx, logs, env, "peer-worker", cfg.bin, append([]string{"worker", "mcp", "--nats", s.natsURL, "--tool", tool}, args...)...)
	if err != nil {
		return err
	}
	if row.endpoint, err = connectTool(ctx, s, acct, tool); err != nil {
		return err
	}
	if row.session, err = d.streamable(ctx, row.endpoint); err != nil {
		return fmt.Errorf("%s: %w", row.name, err)
	}
	row.parts = []part{{"edge", func() []int { return []int{s.edge.Process.Pid} }}, {"nats", pids(s.nats.Process.Pid)},
		{"worker", pids(w.Process.Pid)}, {"server", below(w.Process.Pid)}}
	return nil
}

// proxyRow is another MCP gateway or proxy, run on a port of its own with the server
// as its child.
type proxyRow struct {
	name, path, missing string
	args                func(port int) (name string, args []string, endpoint string, err error)
}

// proxyRows are the other proxies, as p says where they are installed; dir holds the
// configuration files they need.
func proxyRows(p peerPaths, fixture, dir string) []proxyRow {
	return []proxyRow{
		{"supergateway " + npmVersion(p.supergateway) + " (stdio → Streamable HTTP, stateful)", p.supergateway, "npm supergateway",
			func(port int) (string, []string, string, error) {
				return "node", []string{p.supergateway, "--stdio", shellQuote(fixture), "--outputTransport", "streamableHttp",
					"--stateful", "--port", strconv.Itoa(port), "--logLevel", "none"}, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), nil
			}},
		{"mcp-proxy " + npmVersion(p.mcpProxy) + ", punkpeye (stdio → Streamable HTTP)", p.mcpProxy, "npm mcp-proxy",
			func(port int) (string, []string, string, error) {
				return "node", []string{p.mcpProxy, "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--server", "stream",
					"--", fixture}, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), nil
			}},
		{"TBXark/mcp-proxy " + strings.TrimPrefix(filepath.Base(p.tbxark), "mcp-proxy-tbxark-") + " (stdio → Streamable HTTP)", p.tbxark, "TBXark/mcp-proxy",
			func(port int) (string, []string, string, error) {
				conf := map[string]any{
					"mcpProxy": map[string]any{"baseURL": fmt.Sprintf("http://127.0.0.1:%d", port), "addr": fmt.Sprintf("127.0.0.1:%d", port),
						"name": "tgbench", "version": "1", "type": "streamable-http",
						"options": map[string]any{"logEnabled": false, "panicIfInvalid": true}},
					"mcpServers": map[string]any{"fixture": map[string]any{"command": fixture}},
				}
				b, _ := json.Marshal(conf)
				file := filepath.Join(dir, "tbxark.json")
				if err := os.WriteFile(file, b, 0o600); err != nil {
					return "", nil, "", err
				}
				return p.tbxark, []string{"--config", file}, fmt.Sprintf("http://127.0.0.1:%d/fixture/", port), nil
			}},
	}
}

// startProxy starts o and connects to it. A row that cannot be measured is returned
// with the reason in its skip.
func startProxy(ctx context.Context, d peerDialer, s *stack, o proxyRow, logs io.Writer) (*peer, error) {
	row := &peer{name: o.name}
	if o.path == "" {
		row.skip = "not installed: " + o.missing + " (scripts/bench-peers.sh installs it)"
		return row, nil
	}
	if _, err := os.Stat(o.path); err != nil {
		row.skip = fmt.Sprintf("not installed: %v", err)
		return row, nil
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	name, args, endpoint, err := o.args(port)
	if err != nil {
		return nil, err
	}
	proc, err := s.run(ctx, logs, nil, "peer", name, args...)
	if err != nil {
		row.skip = err.Error()
		return row, nil
	}
	// Connect once the proxy listens and has its server: TBXark's serves the route
	// only after its own session with the server is up.
	err = poll(ctx, func() bool {
		var err error
		row.session, err = d.streamable(ctx, endpoint)
		return err == nil
	})
	if err != nil {
		row.skip = fmt.Sprintf("no MCP session at %s within 30s (run tgbench -v to see its log)", endpoint)
		return row, nil
	}
	row.parts = []part{{"proxy", pids(proc.Process.Pid)}, {"server", below(proc.Process.Pid)}}
	row.endpoint = endpoint
	return row, nil
}

// measure checks every row answers, then measures them in turns, round after round,
// each with 1 and then N callers, numbering the calls with seq.
func (rep *peerReport) measure(ctx context.Context, cfg config, seq *atomic.Int64) error {
	for _, pr := range rep.peers {
		for i, cs := range pr.sessions() { // each session's first call opens what it needs
			if err := echo(ctx, cs, 0); err != nil {
				return fmt.Errorf("%s: session %d: first call: %w", pr.name, i+1, err)
			}
		}
	}
	rep.load0 = loadavg()
	for round := range rep.rounds {
		for _, pr := range inRound(rep.peers, round) {
			if pr.session == nil {
				continue
			}
			fmt.Fprintf(os.Stderr, "round %d/%d: %s...\n", round+1, rep.rounds, pr.name)
			pr.measureRound(ctx, rep.callers, rep.duration, cfg.max, seq)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	rep.load1 = loadavg()
	return nil
}

// measureRound saturates the row for d with each number of callers, after a warm-up,
// and adds what it measured to the row's results and CPU times.
func (p *peer) measureRound(ctx context.Context, callers [2]int, d time.Duration, maxCalls int, seq *atomic.Int64) {
	fn := func(ctx context.Context) error {
		n := seq.Add(1)
		return echo(ctx, p.sessionFor(n), n)
	}
	for i, n := range callers {
		load.Saturate(ctx, n, d/5, maxCalls, fn) // warm
		before := p.cpuNow()
		r := load.Saturate(ctx, n, d, maxCalls, fn)
		if p.cpu[i] == nil {
			p.cpu[i] = map[string]time.Duration{}
		}
		for name, spent := range p.cpuNow() {
			p.cpu[i][name] += spent - before[name]
		}
		p.results[i] = append(p.results[i], r)
	}
}

// peerClient is the HTTP client of every Streamable HTTP row: enough idle
// connections kept for every caller's POST.
var peerClient = &http.Client{Transport: &http.Transport{MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute}}

// echo calls the fixture's echo tool with a text of its own and checks the text
// comes back.
func echo(ctx context.Context, cs *mcp.ClientSession, n int64) error {
	text := "hello, gateway " + strconv.FormatInt(n, 10)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("echo: tool error: %v", res.Content)
	}
	out, _ := res.StructuredContent.(map[string]any)
	if out["text"] != text {
		return fmt.Errorf("echo: sent %q, got %v", text, res.StructuredContent)
	}
	return nil
}

// connectTool connects the bench account to a tool and returns the tool's
// Streamable HTTP link once the tool is online.
func connectTool(ctx context.Context, s *stack, a *account, tool string) (string, error) {
	if err := adminDo(ctx, s, http.MethodPost, "/admin/connections", map[string]any{"account": "bench", "tool": tool}, nil); err != nil {
		return "", err
	}
	var rec struct {
		Status string `json:"status"`
		MCPURL string `json:"mcp_url"`
	}
	err := poll(ctx, func() bool {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.edgeURL+"/tools/"+tool, nil)
		req.Header.Set("SERVICE_API_KEY", a.key)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		return resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&rec) == nil &&
			rec.Status == "online" && rec.MCPURL != ""
	})
	if err != nil {
		return "", fmt.Errorf("tool %s never came online for the bench account: %w", tool, err)
	}
	return rec.MCPURL, nil
}

// npmVersion is the version in the package.json of the npm package that holds file.
func npmVersion(file string) string {
	for dir := filepath.Dir(file); file != "" && dir != filepath.Dir(dir); dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "package.json"))
		if err != nil {
			continue
		}
		var pkg struct {
			Version string `json:"version"`
		}
		if json.Unmarshal(data, &pkg) == nil && pkg.Version != "" {
			return pkg.Version
		}
	}
	return "(version unknown)"
}

// shellQuote quotes s for sh: supergateway runs its --stdio command through a shell.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// tree is pid and every process below it (a proxy's shell and server), from /proc.
func tree(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := procStat(e.Name()) // f[1] is field 4, the parent
		if err != nil || len(f) < 2 {
			continue
		}
		if parent, err := strconv.Atoi(f[1]); err == nil {
			children[parent] = append(children[parent], child)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// treeCPU is the CPU time the processes have used so far; one that has ended counts
// nothing.
func treeCPU(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := procCPU(strconv.Itoa(pid)); err == nil {
			sum += d
		}
	}
	return sum
}

func (rep *peerReport) render() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### MCP through a proxy: the same stdio server, one client\n\n")
	fmt.Fprintf(&b, "One MCP client (the Go SDK, protocol %s, one session) calls the `echo` tool of one stdio MCP server "+
		"(`bin/mcpfixture`) straight over stdio, and over Streamable HTTP through each proxy on 127.0.0.1; each row has one "+
		"server process behind its one session, but the rows marked \"%d sessions\", whose calls go round-robin over that many client sessions "+
		"(the server processes behind them as the row says). %d rounds, the rows in a different order each round; in each, %v at 1 caller, "+
		"then %v at %d callers at once on the session. Load average (1, 5, 15 min) %s at the start, %s at the end.\n\n",
		peerProtocol, rep.callers[1], rep.rounds, rep.duration, rep.duration, rep.callers[1], rep.load0, rep.load1)
	fmt.Fprintf(&b, "× direct: the row's figure over the baseline's in the same round, median (lowest–highest) of the rounds. "+
		"CPU per call (/proc, 10 ms ticks, summed over the rounds): the proxy's processes (for toolgate the edge, NATS and the bridge worker) "+
		"and the server's, at 1 / %d callers; the client's is not counted.\n\n", rep.callers[1])
	fmt.Fprintf(&b, "| path | 1 caller: calls/s | p50 | p99 | p50 × direct | %d callers: calls/s | p50 | p99 | calls/s × direct | proxy CPU µs/call | server CPU µs/call | errors |\n",
		rep.callers[1])
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	base := rep.peers[0]
	p50 := func(r load.Result) float64 { return float64(r.Percentile(0.5)) }
	rps := func(r load.Result) float64 { return r.RPS() }
	var notes, split []string
	for _, p := range rep.peers {
		if p.skip != "" {
			notes = append(notes, fmt.Sprintf("- %s: %s", p.name, p.skip))
			continue
		}
		merged := [2]load.Result{load.Merge(p.results[0]...), load.Merge(p.results[1]...)}
		// cpu is the CPU per call of the parts named, at 1 and at N callers.
		cpu := func(names ...string) string {
			var f [2]string
			for i, r := range merged {
				var d time.Duration
				for _, n := range names {
					d += p.cpu[i][n]
				}
				f[i] = "–"
				if ok := r.Requests - r.Errors; ok > 0 && len(names) > 0 {
					f[i] = fmt.Sprintf("%.0f", perRequest(d, ok))
				}
			}
			return f[0] + " / " + f[1]
		}
		var proxy []string
		for _, pt := range p.parts[:len(p.parts)-1] {
			proxy = append(proxy, pt.name)
		}
		one, many := merged[0], merged[1]
		fmt.Fprintf(&b, "| %s | %.0f | %v | %v | %s | %.0f | %v | %v | %s | %s | %s | %d |\n", p.name,
			one.RPS(), us(one.Percentile(0.5)), us(one.Percentile(0.99)), spread(ratios(p.results[0], base.results[0], p50)),
			many.RPS(), us(many.Percentile(0.5)), us(many.Percentile(0.99)), spread(ratios(p.results[1], base.results[1], rps)),
			cpu(proxy...), cpu("server"), one.Errors+many.Errors)
		if len(proxy) > 1 {
			var parts []string
			for _, n := range proxy {
				parts = append(parts, n+" "+cpu(n))
			}
			split = append(split, fmt.Sprintf("%s, proxy CPU µs/call at 1 / %d callers: %s.", p.name, rep.callers[1], strings.Join(parts, ", ")))
		}
		for _, r := range merged {
			if r.FirstErr != nil {
				notes = append(notes, fmt.Sprintf("- %s: first error: %v", p.name, r.FirstErr))
				break
			}
		}
	}
	if len(split) > 0 {
		b.WriteString("\n" + strings.Join(split, "\n") + "\n")
	}
	skipped := notes
	if len(skipped) > 0 {
		b.WriteString("\n" + strings.Join(skipped, "\n") + "\n")
	}
	b.WriteString("\n")
	return b.String()
}
