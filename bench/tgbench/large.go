package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/bench/load"
	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/workers"
)

// Large replies: a tool's reply of 10 MiB travels past one NATS message, through the
// payloads bucket, and the edge streams it to the caller. It is measured beside the
// bare handler serving the same bytes, in the same run, in MB/s.

// largeSize is the size of the reply measured.
const largeSize = 10 << 20

// largeBytes is what both the bare handler and the blob worker answer: the same
// bytes in each process, made once where they are served.
var largeBytes = sync.OnceValue(func() []byte {
	b := make([]byte, largeSize)
	for i := range b {
		b[i] = byte(i * 7 % 251)
	}
	return b
})

// serveBlobWorker runs the "blob" tool: its method "bytes" answers largeSize bytes,
// through the worker SDK as any tool team's worker would.
func serveBlobWorker(args []string) error {
	fs := flag.NewFlagSet("blob", flag.ExitOnError)
	url := fs.String("nats", "nats://127.0.0.1:4222", "NATS URL")
	fs.Parse(args)
	nc, err := bus.Connect(*url, "tgbench-blob", nil)
	if err != nil {
		return err
	}
	defer nc.Close()
	w := workers.New(nc, workers.Tool{ID: "blob", Description: "answers 10 MiB"})
	w.Handle(workers.Method{Name: "bytes", Handler: func(context.Context, *workers.Call) (any, error) {
		return workers.Raw{ContentType: "application/octet-stream", Data: largeBytes()}, nil
	}})
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return w.Run(ctx)
}

// largeRow is one way of getting largeSize bytes, measured once per round.
type largeRow struct {
	name   string
	call   load.Func
	rounds []load.Result
}

// largeCallers is how many callers ask for large replies at once: a few, as a 10 MiB
// answer takes its time.
const largeCallers = 4

// measureLarge measures the bare handler's large answer and the gateway's, in
// alternating rounds.
func measureLarge(ctx context.Context, s *stack, cfg config, a *account) ([]*largeRow, error) {
	if err := adminDo(ctx, s, http.MethodPost, "/admin/connections", map[string]any{"account": "bench", "tool": "blob"}, nil); err != nil {
		return nil, err
	}
	rows := []*largeRow{
		{name: "bare gin handler, the same 10 MiB", call: getLarge(http.MethodGet, s.bareURL+"/blob", nil)},
		{name: "POST /tool-call, a 10 MiB reply through the payloads bucket", call: getLarge(http.MethodPost, s.edgeURL+"/tool-call/blob/bytes",
			http.Header{"Content-Type": {"application/json"}, "SERVICE_API_KEY": {a.key}})},
	}
	if err := poll(ctx, func() bool { return rows[1].call(ctx) == nil }); err != nil {
		return nil, fmt.Errorf("the blob tool never answered: %w", err)
	}
	for round := range cfg.rounds {
		for _, r := range inRound(rows, round) {
			fmt.Fprintf(os.Stderr, "10 MiB replies, round %d: %s...\n", round+1, r.name)
			load.Saturate(ctx, largeCallers, time.Second, cfg.max, r.call) // warm
			r.rounds = append(r.rounds, load.Saturate(ctx, largeCallers, cfg.duration, cfg.max, r.call))
		}
	}
	return rows, nil
}

// getLarge asks for a large answer and reads it whole, failing unless it is
// largeSize bytes.
func getLarge(method, url string, h http.Header) load.Func {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader("{}"))
		if err != nil {
			return err
		}
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		n, err := io.Copy(io.Discard, resp.Body)
		if err == nil && (resp.StatusCode != http.StatusOK || n != largeSize) {
			err = fmt.Errorf("status %d, %d bytes", resp.StatusCode, n)
		}
		return err
	}
}

// renderLarge is the table of the large replies: MB/s of each, and the gateway's over
// the bare handler's in the same round.
func renderLarge(b *strings.Builder, rows []*largeRow) {
	if len(rows) == 0 {
		return
	}
	mbs := func(r load.Result) float64 { return r.RPS() * largeSize / 1e6 }
	fmt.Fprintf(b, "\n\n%d callers asking for a 10 MiB answer at once, for the rounds' duration in each round, the two in a different order each round: "+
		"the bare handler serving the same bytes from memory, and a tool's reply through the edge (past one NATS message: stored in parts by the worker, streamed from the payloads bucket by the edge). "+
		"× bare: the row's MB/s over the bare handler's in the same round, median (lowest–highest).\n\n", largeCallers)
	b.WriteString("| 10 MiB replies | MB/s | p50 | × bare | errors |\n|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		sat := load.Merge(r.rounds...)
		fmt.Fprintf(b, "| %s | %.0f | %v | %s | %d |\n", r.name, mbs(sat), us(sat.Percentile(0.5)),
			spread(ratios(r.rounds, rows[0].rounds, mbs)), sat.Errors)
	}
	for _, r := range rows {
		if res := load.Merge(r.rounds...); res.FirstErr != nil {
			fmt.Fprintf(b, "\n%s: first error: %v\n", r.name, res.FirstErr)
		}
	}
}
