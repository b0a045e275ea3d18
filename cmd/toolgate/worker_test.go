package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/internal/mcpfixture"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestMain lets this test binary run as the MCP fixture's stdio child, for the tests
// of toolgate worker mcp, and as toolgate itself (asToolgate), for the tests of
// commands a client starts as a process.
func TestMain(m *testing.M) {
	mcpfixture.RunIfChild()
	if os.Getenv(asToolgate) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestWorkerDemoCommand(t *testing.T) {
	t.Run("it serves the demo tools until its context ends, then leaves", func(t *testing.T) {
		srv := testenv.Server(t)
		nc := testenv.Conn(t, srv.ClientURL())
		view := testenv.View(t, testenv.Store(t, nc, 1))

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		root := newRootCmd()
		root.SetArgs([]string{"worker", "demo", "--nats", srv.ClientURL()})
		var stderr strings.Builder
		root.SetErr(&stderr)
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()

		live := func() int {
			s := view.Snapshot()
			return s.Instances("email") + s.Instances("echo") + s.Instances("clock")
		}
		testenv.WaitFor(t, "the three demo tools are live", func() bool { return live() == 3 })
		cancel() // as SIGINT or SIGTERM does
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("worker demo: %v\n%s", err, stderr.String())
			}
		case <-time.After(testenv.Patience):
			t.Fatal("worker demo did not stop")
		}
		testenv.EventuallyBefore(t, 500*time.Millisecond, wire.DefaultPresenceTTL/2, "presence removed, not left to expire", func() bool { return live() == 0 })
	})

	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a URL that is not NATS is refused", []string{"--nats", "http://127.0.0.1:4222"}, nil, "worker: nats:"},
		{"TOOLGATE_NATS is the default URL", nil, map[string]string{"TOOLGATE_NATS": "localhost:4222"}, "worker: nats:"},
		{"a replica count over 5 is refused", []string{"--replicas", "7"}, nil, "worker: replicas:"},
		{"a TOOLGATE_REPLICAS that is not a number is refused", nil, map[string]string{"TOOLGATE_REPLICAS": "three"}, "worker: replicas:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			root := newRootCmd()
			root.SetArgs(append([]string{"worker", "demo"}, tt.args...))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error starting %q", err, tt.want)
			}
		})
	}
}

func TestWorkerMCPCommand(t *testing.T) {
	t.Run("it deploys a stdio server until its context ends, then stops it and leaves", func(t *testing.T) {
		srv := testenv.Server(t)
		nc := testenv.Conn(t, srv.ClientURL())
		view := testenv.View(t, testenv.Store(t, nc, 1))
		t.Setenv(mcpfixture.ChildEnv, "stdio") // the child below is this test binary

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		root := newRootCmd()
		root.SetArgs([]string{"worker", "mcp", "--nats", srv.ClientURL(), "--tool", "fixture", "--title", "Fixture",
			"--sessions", "2", "--call-timeout", "2m", "--", os.Args[0], "-test.run=^$"})
		var stderr strings.Builder
		root.SetErr(&stderr)
		done := make(chan error, 1)
		go func() { done <- root.ExecuteContext(ctx) }()

		testenv.WaitFor(t, "the tool is live with the server's tools", func() bool {
			s := view.Snapshot()
			tool := s.RawTool("fixture")
			return s.Instances("fixture") == 1 && tool != nil && tool.Tool.Title == "Fixture" &&
				tool.Method("echo") != nil && time.Duration(tool.Method("echo").Method.Timeout) == 2*time.Minute
		})
		cancel() // as SIGINT or SIGTERM does
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("worker mcp: %v\n%s", err, stderr.String())
			}
		case <-time.After(testenv.Patience):
			t.Fatal("worker mcp did not stop")
		}
		testenv.EventuallyBefore(t, 500*time.Millisecond, wire.DefaultPresenceTTL/2, "presence removed, not left to expire", func() bool { return view.Snapshot().Instances("fixture") == 0 })
		if !strings.Contains(stderr.String(), "mcpfixture: serving on stdio") {
			t.Errorf("the children's stderr is not in the worker's log:\n%s", stderr.String())
		}
	})

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"a tool id is required", []string{"--", "server"}, "mcp: tool:"},
		{"a command or a URL is required", []string{"--tool", "t"}, "mcp: command:"},
		{"not both", []string{"--tool", "t", "--url", "http://127.0.0.1:1/mcp", "--", "server"}, "mcp: url:"},
		{"a header must be Name: value", []string{"--tool", "t", "--url", "http://127.0.0.1:1/mcp", "--header", "nocolon"}, "mcp: header:"},
		{"a bad NATS URL is refused first", []string{"--nats", "http://x", "--tool", "t", "--", "server"}, "worker: nats:"},
		{"a server that cannot start fails the command", []string{"--tool", "t", "--start-timeout", "2s", "--", "/nonexistent/mcp-server"}, "mcp: tool t: start the server:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"worker", "mcp"}, tt.args...)
			if !strings.Contains(strings.Join(tt.args, " "), "--nats") {
				args = append([]string{"worker", "mcp", "--nats", testenv.Server(t).ClientURL()}, tt.args...)
			}
			root := newRootCmd()
			root.SetArgs(args)
			root.SetErr(new(strings.Builder))
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error starting %q", err, tt.want)
			}
		})
	}
}
