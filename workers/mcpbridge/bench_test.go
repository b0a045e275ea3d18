package mcpbridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/workers/mcpbridge"
)

// BenchmarkBridgedCall is one tools/call of the stdio fixture's echo through the
// gateway and the bridge, with 32 callers at once, as an MCP client's calls reach the
// bridge. Besides the time per call it reports the CPU the server's processes spent
// per call (upstream-µs/call, from /proc/<pid>/schedstat) and this process's (the
// NATS server, the gateway and the bridge: self-µs/call), for pools of one and four
// upstream sessions.
func BenchmarkBridgedCall(b *testing.B) {
	for _, sessions := range []int{1, 4} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			benchBridged(b, sessions)
		})
	}
}

func benchBridged(b *testing.B, sessions int) {
	tool := fmt.Sprintf("bench%d", sessions)
	e := startBench(b, stdioConfig(tool, sessions))
	ctx := testenv.Context(b)

	// The sessions' processes: calls go to the least busy session, ties taken in turn,
	// so calls one at a time meet every session.
	pids := map[int]bool{}
	testenv.Eventually(b, 30*time.Second, "every session's process answering", func() bool {
		r, err := e.do(ctx, tool, call{method: "process_pid", params: `{}`})
		if err != nil {
			b.Fatal(err)
		}
		var res struct {
			StructuredContent struct {
				PID int `json:"pid"`
			} `json:"structuredContent"`
		}
		if err := json.Unmarshal(r.Data, &res); err != nil || res.StructuredContent.PID == 0 {
			b.Fatalf("process_pid: %s %v", r.Data, err)
		}
		pids[res.StructuredContent.PID] = true
		return len(pids) == sessions
	})
	cpu := func() (up, self time.Duration) {
		for pid := range pids {
			up += schedstat(b, strconv.Itoa(pid))
		}
		return up, schedstat(b, "self")
	}

	b.SetParallelism(16) // 32 callers on 2 CPUs
	b.ReportAllocs()
	up0, self0 := cpu()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := e.do(context.Background(), tool, call{method: "echo", params: `{"text":"hello, gateway"}`}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	up1, self1 := cpu()
	b.ReportMetric(float64((up1-up0).Microseconds())/float64(b.N), "upstream-µs/call")
	b.ReportMetric(float64((self1-self0).Microseconds())/float64(b.N), "self-µs/call")
}

// startBench is newEnv and start for a benchmark: the registry, the account, a
// gateway, and the bridge for cfg on a connection of its own, served and visible.
func startBench(b *testing.B, cfg mcpbridge.Config) *env {
	r := testenv.NewRegistry(b)
	if _, err := r.Store.CreateAccount(r.Ctx, registry.Account{ID: account, Name: "Acme", Limits: registry.Limits{Rate: 1e9, Burst: 1 << 30}}); err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(r.Conn, r.View, gateway.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := r.Store.Connect(r.Ctx, account, cfg.Tool, testenv.LinkSigner(b)); err != nil {
		b.Fatal(err)
	}
	br := mcpbridge.New(testenv.Conn(b, r.Server.ClientURL()), cfg, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- br.Run(ctx) }()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-br.Ready():
	case err := <-done:
		b.Fatalf("bridge did not start: %v", err)
	}
	e := &env{url: r.Server.ClientURL(), nc: r.Conn, store: r.Store, view: r.View, gw: gw}
	testenv.Eventually(b, 30*time.Second, "the tool in the view", func() bool {
		_, err := r.View.Snapshot().Tool(registry.Principal{Account: account}, cfg.Tool)
		return err == nil
	})
	return e
}

// schedstat is the CPU time a process's threads have run for, from
// /proc/<pid>/task/*/schedstat (a Go process keeps its threads).
func schedstat(b *testing.B, pid string) time.Duration {
	tasks, err := os.ReadDir("/proc/" + pid + "/task")
	if err != nil {
		b.Skipf("no /proc: %v", err)
	}
	var sum time.Duration
	for _, task := range tasks {
		data, err := os.ReadFile("/proc/" + pid + "/task/" + task.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended
		}
		ns, err := strconv.ParseInt(string(bytes.Fields(data)[0]), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		sum += time.Duration(ns)
	}
	return sum
}
