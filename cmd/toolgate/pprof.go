package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"time"
)

// pprofEnv names the loopback address a long-running role serves Go's profiles on
// (net/http/pprof), for measuring it under load: TOOLGATE_PPROF=127.0.0.1:6060. Unset,
// nothing is served. The profiles are never on a role's public listener, and only a
// loopback address is accepted: a heap profile shows what is in memory, keys included.
const pprofEnv = "TOOLGATE_PPROF"

// startPprof serves the profiles on the address pprofEnv names until ctx ends.
func startPprof(ctx context.Context, log *slog.Logger) error {
	addr := os.Getenv(pprofEnv)
	if addr == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New(pprofEnv + ": must be a loopback address, such as 127.0.0.1:6060")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("profiles served", "addr", ln.Addr().String(), "path", "/debug/pprof/")
	return nil
}
