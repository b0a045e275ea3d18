package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

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
		testenv.Eventually(t, 10*time.Second, "the three demo tools are live", func() bool { return live() == 3 })
		cancel() // as SIGINT or SIGTERM does
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("worker demo: %v\n%s", err, stderr.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatal("worker demo did not stop")
		}
		testenv.Eventually(t, 500*time.Millisecond, "presence removed", func() bool { return live() == 0 })
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
