package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
)

// newHealthCmd checks health endpoints: a container built FROM scratch has no shell
// or curl, so its health checks run the binary itself.
func newHealthCmd() *cobra.Command {
	timeout := 2 * time.Second
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "health URL...",
		Short: "Exit 0 if every URL answers GET with a 2xx status (for container health checks), 1 otherwise",
		Example: `  toolgate health http://127.0.0.1:8080/readyz     # an edge ready for traffic
  toolgate health http://127.0.0.1:8222/healthz    # a NATS node (toolgate nats --monitor-listen)
  toolgate health --wait 2m http://127.0.0.1:8080/readyz http://127.0.0.1:8081/readyz`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			deadline := time.Now().Add(wait)
			for _, u := range args {
				for {
					err := checkHealth(cmd.Context(), u, timeout)
					if err == nil {
						break
					}
					if time.Now().After(deadline) {
						if wait > 0 {
							return fmt.Errorf("%w (waited %s)", err, wait)
						}
						return err
					}
					select {
					case <-cmd.Context().Done():
						return cmd.Context().Err()
					case <-time.After(time.Second):
					}
				}
			}
			return nil
		},
	}
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "how long one answer may take")
	cmd.Flags().DurationVar(&wait, "wait", 0, "keep asking until every URL is healthy, for up to this long (0: ask once)")
	return cmd
}

// checkHealth GETs target and wants a 2xx answer within timeout.
func checkHealth(ctx context.Context, target string, timeout time.Duration) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("health: %q: must be an http(s) URL", target)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("health: %s: %d %s", target, resp.StatusCode, body)
	}
	return nil
}

// healthEnv names the address a worker serves GET /healthz on, for the health checks
// of a container or a pod: the worker has no HTTP listener of its own otherwise.
const healthEnv = "TOOLGATE_HEALTH_LISTEN"

// serveWorkerHealth answers GET /healthz on addr until ctx ends: 200 while the
// worker's NATS connection is up, 503 while it is not. An empty addr serves nothing.
func serveWorkerHealth(ctx context.Context, addr string, nc *nats.Conn, log *slog.Logger) error {
	if addr == "" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("worker: health-listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !nc.IsConnected() {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "nats:", nc.Status())
			return
		}
		fmt.Fprintln(w, "ok")
	})
	// The worker's metrics (a bridge's upstream sessions of accounts).
	mux.Handle("GET /metrics", promhttp.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("health listener", "err", err)
		}
	}()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	log.Info("health served", "addr", ln.Addr().String(), "path", "/healthz")
	return nil
}
