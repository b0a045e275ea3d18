package main

import (
	"context"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestStateCreateCommand makes tools' state buckets as an operator does, keeps them
// when run again, and refuses bad settings before it connects, naming them.
func TestStateCreateCommand(t *testing.T) {
	srv := testenv.Server(t)
	ctx := testenv.Context(t)
	out, err := run(t, ctx, "state", "create", "weather", "notes", "--nats", srv.ClientURL(), "--max-bytes", "1048576")
	if err != nil || !strings.Contains(out, "state: made tg-state-weather") || !strings.Contains(out, "state: made tg-state-notes") {
		t.Fatalf("state create: %v\n%s", err, out)
	}
	if out, err := run(t, ctx, "state", "create", "weather", "--nats", srv.ClientURL()); err != nil || !strings.Contains(out, "state: kept tg-state-weather") {
		t.Fatalf("state create again: %v\n%s", err, out)
	}
	js, err := jetstream.New(testenv.Conn(t, srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "tg-state-weather")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := kv.Status(ctx); err != nil || st.Config().MaxBytes != 1048576 {
		t.Fatalf("the bucket's bound: %v %v", st, err)
	}

	for _, c := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"a tool id that is not one", []string{"Bad.Tool"}, nil, "state create: tool id"},
		{"a negative bound", []string{"weather", "--max-bytes", "-1"}, nil, "state: max bytes"},
		{"a bound over the most", []string{"weather", "--max-bytes", "1073741825"}, nil, "state: max bytes"},
		{"a TOOLGATE_STATE_MAX_BYTES that is not a number", []string{"weather"}, map[string]string{"TOOLGATE_STATE_MAX_BYTES": "lots"}, "state: max bytes"},
		{"too many replicas", []string{"weather", "--replicas", "6"}, nil, "state: replicas"},
		{"no tool", nil, nil, "requires at least 1 arg"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			// An address nothing listens on: a refusal must come before any connection.
			out, err := run(t, context.Background(), append([]string{"state", "create", "--nats", "nats://127.0.0.1:1"}, c.args...)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want an error naming %q\n%s", err, c.want, out)
			}
		})
	}
	var streams []string
	for name := range js.StreamNames(ctx).Name() {
		streams = append(streams, name)
	}
	if len(streams) != 2 {
		t.Errorf("streams %v: the refused settings made some", streams)
	}
}
