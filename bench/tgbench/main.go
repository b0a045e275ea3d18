// Command tgbench measures the gateway's cost against the machine's own ceilings. It
// starts the pieces as separate processes on 127.0.0.1 (a NATS node, the demo
// worker, an edge, and a bare gin server), drives each path with the load package,
// and prints one table from one run: throughput at saturation, latency at a fixed
// rate, and the edge's memory per idle SSE session.
//
//	go run ./bench/tgbench -bin bin/toolgate [-duration 5s] [-rounds 3] [-callers 32] [-rate 1000] [-sessions 1000,10000] [-out bench/RESULTS.md] [-profile dir]
//
// Throughput is measured in rounds (rounds.go): every path at saturation once per
// round, the paths in another order each round, each against the bare handler's
// figure from the same round. The fixed-rate latency is measured once per path, after
// the rounds.
//
// With -profile, each path through the edge is run once more at saturation after its
// fixed-rate run, while the edge's and the worker's CPU and allocation profiles are
// taken; they are written to the directory for go tool pprof.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bus"
)

type config struct {
	bin      string
	duration time.Duration
	rounds   int
	callers  int
	rate     float64
	max      int
	sessions []int
	out      string
	profile  string
	verbose  bool
	gobench  string
	only     string
	peers    peerPaths
	// loadStart is /proc/loadavg when the run started.
	loadStart string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "blob" {
		if err := serveBlobWorker(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "tgbench blob:", err)
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bare" {
		if err := serveBare(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "tgbench bare:", err)
			os.Exit(1)
		}
		return
	}
	var cfg config
	var sessions string
	flag.StringVar(&cfg.bin, "bin", "bin/toolgate", "the toolgate binary to run")
	flag.DurationVar(&cfg.duration, "duration", 5*time.Second, "how long each measurement runs")
	flag.IntVar(&cfg.rounds, "rounds", 3, "rounds of the gateway paths at saturation, each path once per round")
	flag.IntVar(&cfg.callers, "callers", 32, "concurrent callers at saturation")
	flag.Float64Var(&cfg.rate, "rate", 1000, "requests per second for the fixed-rate latency")
	flag.IntVar(&cfg.max, "max", 2_000_000, "at most this many requests per measurement")
	flag.StringVar(&sessions, "sessions", "1000,10000", "idle SSE sessions to hold for the memory measurement")
	flag.StringVar(&cfg.out, "out", "", "also write the report to this file (Markdown)")
	flag.StringVar(&cfg.profile, "profile", "", "write CPU and allocation profiles of the edge and the worker, under load on each edge path, to this directory")
	flag.BoolVar(&cfg.verbose, "v", false, "show the processes' logs")
	flag.StringVar(&cfg.gobench, "gobench", "", "the output of go test -bench to add to the report (its Benchmark lines)")
	flag.StringVar(&cfg.only, "only", "", "run one part alone: gateway (the paths through the edge and the idle sessions) or peers (MCP through a proxy)")
	flag.StringVar(&cfg.peers.fixture, "fixture", "bin/mcpfixture", "the stdio MCP server the peers are compared on")
	flag.StringVar(&cfg.peers.supergateway, "supergateway", "", "supergateway's dist/index.js (npm supergateway), for its row")
	flag.StringVar(&cfg.peers.mcpProxy, "mcp-proxy", "", "mcp-proxy's dist/bin/mcp-proxy.mjs (npm mcp-proxy), for its row")
	flag.StringVar(&cfg.peers.tbxark, "tbxark", "", "the binary of TBXark/mcp-proxy, for its row")
	flag.IntVar(&cfg.peers.rounds, "peer-rounds", 3, "rounds of the peer comparison")
	flag.DurationVar(&cfg.peers.duration, "peer-duration", 3*time.Second, "how long each peer measurement runs, per round and number of callers")
	flag.Parse()
	if cfg.only != "" && cfg.only != "gateway" && cfg.only != "peers" {
		fmt.Fprintf(os.Stderr, "tgbench: -only %q: want gateway or peers\n", cfg.only)
		os.Exit(2)
	}
	if cfg.rounds < 1 {
		fmt.Fprintf(os.Stderr, "tgbench: -rounds %d: want 1 or more\n", cfg.rounds)
		os.Exit(2)
	}
	for _, f := range strings.Split(sessions, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			cfg.sessions = append(cfg.sessions, n)
		}
	}
	cfg.loadStart = loadavg()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "tgbench:", err)
		os.Exit(1)
	}
}

// serveBare is the ceiling the gateway is measured against: gin, one handler that
// returns the body it is sent, nothing else.
func serveBare(args []string) error {
	fs := flag.NewFlagSet("bare", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address")
	fs.Parse(args)
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.GET("/healthz", func(c *gin.Context) { c.Status(http.StatusOK) })
	r.POST("/echo", func(c *gin.Context) {
		body, err := io.ReadAll(c.Request.Body)
		if err != nil {
			c.Status(http.StatusBadRequest)
			return
		}
		c.Data(http.StatusOK, "application/json", body)
	})
	r.GET("/blob", func(c *gin.Context) { c.Data(http.StatusOK, "application/octet-stream", largeBytes()) })
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	return http.Serve(ln, r)
}

// row is one path of the gateway part and what was measured of it.
type row struct {
	name   string
	id     string // names the profiles of a path through the edge
	call   load.Func
	rounds []load.Result            // at saturation, one per round
	cpu    map[string]time.Duration // each process's CPU time during the saturated runs, summed over the rounds
	paced  load.Result
}

// saturated is the row's rounds at saturation pooled: requests, errors and
// latencies of every round together.
func (r *row) saturated() load.Result { return load.Merge(r.rounds...) }

// run measures every part cfg asks for and writes the report.
func run(ctx context.Context, cfg config) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var logs io.Writer = io.Discard
	if cfg.verbose {
		logs = os.Stderr
	}
	s := &stack{}
	defer s.stop()
	if err := s.start(ctx, cfg.bin, self, logs, cfg.profile != ""); err != nil {
		return err
	}
	acct, err := setup(ctx, s, maxSessions(cfg))
	if err != nil {
		return err
	}
	nc, err := bus.Connect(s.natsURL, "tgbench", nil)
	if err != nil {
		return err
	}
	defer nc.Close()

	serverTimings := &timings{}
	rows := []*row{
		{name: "bare gin handler (HTTP ceiling)", call: bareCall(s)},
		{name: "NATS request-reply to the echo worker (bus ceiling)", call: busCall(nc)},
		{name: "POST /tool-call through the edge", id: "toolcall", call: toolCall(s, acct, serverTimings)},
		{name: "MCP tools/call, Streamable HTTP", id: "streamable", call: streamableCall(acct)},
		{name: "MCP tools/call, legacy HTTP+SSE", id: "legacy", call: legacyCall(acct)},
	}
	if cfg.only == "peers" {
		rows = nil
	}
	if err := saturateRounds(ctx, s, cfg, rows); err != nil {
		return err
	}
	if err := measurePaced(ctx, s, cfg, rows, serverTimings); err != nil {
		return err
	}
	var large []*largeRow
	if cfg.only != "peers" {
		if large, err = measureLarge(ctx, s, cfg, acct); err != nil {
			return fmt.Errorf("10 MiB replies: %w", err)
		}
	}
	var peers *peerReport
	if cfg.only != "gateway" {
		if peers, err = runPeers(ctx, s, cfg, acct, logs); err != nil {
			return fmt.Errorf("peers: %w", err)
		}
	}
	if cfg.only == "peers" {
		cfg.sessions = nil
	}
	mem, err := holdIdleSessions(ctx, s, cfg, acct)
	if err != nil {
		return err
	}
	return writeReport(cfg, render(cfg, rows, large, mem, serverTimings), peers)
}

// maxSessions is room for every idle session of every measurement at once: a legacy
// session whose stream closes as its edge stops is left for its client to resume,
// until it expires.
func maxSessions(cfg config) int {
	n := 100 + cfg.callers*4
	for _, sessions := range cfg.sessions {
		n += 2 * sessions
	}
	return n
}

// saturateRounds measures every row at saturation once per round, the rows in
// another order each round, with the CPU time each of the stack's processes spent.
func saturateRounds(ctx context.Context, s *stack, cfg config, rows []*row) error {
	for round := range cfg.rounds {
		for _, r := range inRound(rows, round) {
			fmt.Fprintf(os.Stderr, "round %d/%d: %s...\n", round+1, cfg.rounds, r.name)
			if round == 0 {
				load.Saturate(ctx, cfg.callers, time.Second, cfg.max, r.call) // warm connections, sessions, caches
			}
			before, err := s.cpu()
			if err != nil {
				return err
			}
			res := load.Saturate(ctx, cfg.callers, cfg.duration, cfg.max, r.call)
			after, err := s.cpu()
			if err != nil {
				return err
			}
			if r.cpu == nil {
				r.cpu = make(map[string]time.Duration, len(after))
			}
			for role, d := range after {
				r.cpu[role] += d - before[role]
			}
			r.rounds = append(r.rounds, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// measurePaced measures each row's latency at a fixed rate, and takes the profiles,
// once per path: neither is a ratio that the machine's other work would decide.
func measurePaced(ctx context.Context, s *stack, cfg config, rows []*row, serverTimings *timings) error {
	for _, r := range rows {
		fmt.Fprintf(os.Stderr, "%s at %.0f/s...\n", r.name, cfg.rate)
		serverTimings.on.Store(true) // only tool-call reads it, and only at the fixed rate
		r.paced = load.Paced(ctx, cfg.rate, cfg.duration, cfg.max, 512, r.call)
		serverTimings.on.Store(false)
		if cfg.profile != "" && r.id != "" {
			if err := profile(ctx, map[string]string{"edge": s.edgePprof, "worker": s.workerPprof}, cfg, r.id, r.call); err != nil {
				return fmt.Errorf("profile %s: %w", r.name, err)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return nil
}

// holdIdleSessions measures the edge's memory per idle session of each transport,
// for each number of sessions cfg asks for.
func holdIdleSessions(ctx context.Context, s *stack, cfg config, acct *account) ([]memory, error) {
	var mem []memory
	transports := []struct {
		name string
		open func(ctx context.Context, i int64) (idleStream, error)
	}{
		{"legacy HTTP+SSE", func(ctx context.Context, _ int64) (idleStream, error) { return openSSE(ctx, acct.sseURL) }},
		{"Streamable HTTP, GET stream", func(ctx context.Context, i int64) (idleStream, error) { return openStreamable(ctx, acct, i) }},
	}
	for _, tr := range transports {
		for _, n := range cfg.sessions {
			fmt.Fprintf(os.Stderr, "holding %d idle %s sessions...\n", n, tr.name)
			m, err := measureSessions(ctx, s, tr.name, n, tr.open)
			if err != nil {
				return nil, fmt.Errorf("%d %s sessions: %w", n, tr.name, err)
			}
			mem = append(mem, m)
		}
	}
	return mem, nil
}

// writeReport prints the report, the gateway's part followed by the peers' and the
// Go benchmarks', and writes it to cfg.out as well when set.
func writeReport(cfg config, report string, peers *peerReport) error {
	if peers != nil {
		report += peers.render()
	}
	if cfg.gobench != "" {
		lines, err := benchmarkLines(cfg.gobench)
		if err != nil {
			return err
		}
		report += "Go benchmarks of the hot paths, from the same run (`go test -run '^$' -bench . -benchmem ./...`):\n\n```\n" + lines + "```\n"
	}
	fmt.Print(report)
	if cfg.out != "" {
		return os.WriteFile(cfg.out, []byte(report), 0o644)
	}
	return nil
}

type memory struct {
	transport string
	sessions  int
	opened    int
	before    int64
	after     int64
	firstErr  error
	perStream int64
}

// measureSessions starts a fresh edge, opens n idle SSE streams of one transport to
// it, holds them, and reads how much the edge's resident memory grew.
func measureSessions(ctx context.Context, s *stack, transport string, n int, open func(ctx context.Context, i int64) (idleStream, error)) (memory, error) {
	m := memory{transport: transport, sessions: n}
	// A fresh edge: Go keeps the memory an earlier measurement grew, and would lend it
	// to this one's sessions unseen.
	if err := s.restartEdge(ctx); err != nil {
		return m, fmt.Errorf("restart the edge: %w", err)
	}
	time.Sleep(time.Second) // let it settle
	var err error
	if m.before, err = s.edgeRSS(); err != nil {
		return m, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var streams []idleStream
	sem := make(chan struct{}, 128)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st, err := open(sctx, int64(i))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if m.firstErr == nil {
					m.firstErr = err
				}
				return
			}
			streams = append(streams, st)
		})
	}
	wg.Wait()
	m.opened = len(streams)
	time.Sleep(3 * time.Second) // idle: keep-alives only
	if m.after, err = s.edgeRSS(); err != nil {
		return m, err
	}
	if m.opened > 0 {
		m.perStream = (m.after - m.before) / int64(m.opened)
	}
	for _, st := range streams {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			st.Close()
		})
	}
	wg.Wait()
	time.Sleep(time.Second) // for the edge to see the streams go before it is stopped
	return m, nil
}

func render(cfg config, rows []*row, large []*largeRow, mem []memory, t *timings) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "## toolgate benchmarks\n\n")
	fmt.Fprintf(&b, "Run %s on %s: %s/%s, %d CPUs, Go %s. Each process on 127.0.0.1; %d callers at saturation for %v in each of %s; fixed rate %.0f/s for %v.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), host, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version(),
		cfg.callers, cfg.duration, count(cfg.rounds, "round"), cfg.rate, cfg.duration)
	fmt.Fprintf(&b, "Load average (1, 5, 15 min) %s when the run started, %s when it ended: the machine's other work slows every row; compare rows within one run.\n\n",
		cfg.loadStart, loadavg())
	fmt.Fprintf(&b, "Produced by `%s` (`make bench` runs it with its defaults).\n\n", strings.Join(os.Args, " "))
	if len(rows) == 0 {
		return b.String()
	}
	bare := rows[0]
	if cfg.rounds == 1 {
		b.WriteString("One round: every path at saturation once, after a 1 s warm-up; × bare: the row's req/s over the bare handler's. ")
	} else {
		fmt.Fprintf(&b, "%d rounds, every path at saturation once in each, the paths in a different order each round (a 1 s warm-up before each path's first). "+
			"req/s, p50 and p99 at saturation pool the rounds' requests; × bare: the row's req/s over the bare handler's in the same round, "+
			"median (lowest–highest) of the rounds. ", cfg.rounds)
	}
	b.WriteString("The fixed-rate run is made once per path, after the rounds, the paths in the table's order.\n\n")
	fmt.Fprintf(&b, "| path | req/s at saturation | p50 | p99 | × bare | p50 at %.0f/s | p99 at %.0f/s | p50 − bare's | errors |\n", cfg.rate, cfg.rate)
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	rps := func(r load.Result) float64 { return r.RPS() }
	for _, r := range rows {
		sat := r.saturated()
		fmt.Fprintf(&b, "| %s | %.0f | %v | %v | %s | %v | %v | %+v | %d |\n", r.name, sat.RPS(),
			us(sat.Percentile(0.5)), us(sat.Percentile(0.99)), spread(ratios(r.rounds, bare.rounds, rps)),
			us(r.paced.Percentile(0.5)), us(r.paced.Percentile(0.99)),
			us(r.paced.Percentile(0.5)-bare.paced.Percentile(0.5)), sat.Errors+r.paced.Errors)
	}
	for _, r := range rows {
		for _, res := range []load.Result{r.saturated(), r.paced} {
			if res.FirstErr != nil {
				fmt.Fprintf(&b, "\n%s: first error: %v", r.name, res.FirstErr)
				break
			}
		}
	}
	if gw, tool, n := t.medians(); n > 0 {
		fmt.Fprintf(&b, "\n\nPOST /tool-call at %.0f/s, as the edge's Server-Timing splits it (medians of %d answers): the tool's time, the round trip on the bus to the echo worker and back, %v; the gateway's own, %v. The rest of its p50 is HTTP between the load generator and the edge.\n",
			cfg.rate, n, us(tool), us(gw))
	}
	fmt.Fprintf(&b, "\n\nCPU time per request at saturation, by process (µs; /proc, 10 ms ticks; CPU time and requests each summed over the %s). When the machine is the limit, the ratio of two paths' totals is about the inverse of their throughputs'.\n\n", count(cfg.rounds, "round"))
	b.WriteString("| path |")
	for _, role := range cpuRoles {
		fmt.Fprintf(&b, " %s |", role)
	}
	b.WriteString(" total |\n|---|" + strings.Repeat("---:|", len(cpuRoles)+1) + "\n")
	for _, r := range rows {
		n := r.saturated().Requests
		if n == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s |", r.name)
		var total time.Duration
		for _, role := range cpuRoles {
			total += r.cpu[role]
			fmt.Fprintf(&b, " %.1f |", perRequest(r.cpu[role], n))
		}
		fmt.Fprintf(&b, " %.1f |\n", perRequest(total, n))
	}
	renderLarge(&b, large)
	b.WriteString("\n\n| idle SSE sessions | transport | opened | edge RSS before | after | per session |\n|---:|---|---:|---:|---:|---:|\n")
	for _, m := range mem {
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s |\n", m.sessions, m.transport, m.opened, mib(m.before), mib(m.after), kib(m.perStream))
		if m.firstErr != nil {
			fmt.Fprintf(&b, "\nfirst error opening sessions: %v\n", m.firstErr)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// count is n of a thing, named in the singular or the plural: "1 round", "3 rounds".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

func us(d time.Duration) time.Duration { return d.Round(time.Microsecond) }

// perRequest is d spread over n requests, in microseconds.
func perRequest(d time.Duration, n int) float64 { return float64(d.Microseconds()) / float64(n) }
func mib(n int64) string                        { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
func kib(n int64) string                        { return fmt.Sprintf("%.1f KiB", float64(n)/1024) }

// benchmarkLines are the result lines of go test -bench output in file, with the
// package each ran in.
func benchmarkLines(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	var b, pkg strings.Builder
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.HasPrefix(line, "pkg: "):
			pkg.Reset()
			pkg.WriteString(line)
		case strings.HasPrefix(line, "Benchmark") && strings.Contains(line, "ns/op"):
			if pkg.Len() > 0 {
				b.WriteString(pkg.String())
				pkg.Reset()
			}
			b.WriteString(line)
		}
	}
	if b.Len() == 0 {
		return "", fmt.Errorf("%s: no benchmark results", file)
	}
	return b.String(), nil
}
