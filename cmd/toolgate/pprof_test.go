package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestPprofServesOnlyOnLoopback(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range []struct {
		name, addr string
		ok         bool
	}{
		{"nothing is served when the variable is unset", "", true},
		{"a loopback address is served", "127.0.0.1:0", true},
		{"localhost is served", "localhost:0", true},
		{"every interface is refused", "0.0.0.0:6060", false},
		{"a bare port is refused", ":6060", false},
		{"a malformed address is refused", "6060", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(pprofEnv, tc.addr)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			err := startPprof(ctx, log)
			if (err == nil) != tc.ok {
				t.Fatalf("startPprof(%q): %v", tc.addr, err)
			}
			if err != nil && !strings.HasPrefix(err.Error(), pprofEnv+": ") {
				t.Fatalf("error %q does not name %s", err, pprofEnv)
			}
		})
	}
}

func TestPprofServesProfiles(t *testing.T) {
	var logs strings.Builder
	t.Setenv(pprofEnv, "127.0.0.1:0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := startPprof(ctx, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	_, addr, ok := strings.Cut(logs.String(), "addr=")
	addr, _, _ = strings.Cut(addr, " ")
	if !ok {
		t.Fatalf("no address logged: %s", logs.String())
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Fatalf("heap profile: %d %.100s", resp.StatusCode, body)
	}
}
