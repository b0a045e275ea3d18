package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"github.com/toolgate/toolgate/bench/load"
)

// profile runs fn at saturation for cfg.duration while it takes CPU and allocation
// profiles of the processes in addrs (name: its pprof address), and writes them to cfg.profile as
// <id>.<process>.<cpu|allocs>.pprof. The run is not one of the table's: profiling
// costs the processes some of their speed.
func profile(ctx context.Context, addrs map[string]string, cfg config, id string, fn load.Func) error {
	if err := os.MkdirAll(cfg.profile, 0o755); err != nil {
		return err
	}
	secs := max(int(cfg.duration.Seconds()), 1)
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(addrs))
	for proc, addr := range addrs {
		for kind, path := range map[string]string{"cpu": "profile", "allocs": "allocs"} {
			url := fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", addr, path, secs)
			file := filepath.Join(cfg.profile, fmt.Sprintf("%s.%s.%s.pprof", id, proc, kind))
			wg.Go(func() {
				if err := fetch(ctx, url, file); err != nil {
					errs <- fmt.Errorf("%s %s: %w", proc, kind, err)
				}
			})
		}
	}
	load.Saturate(ctx, cfg.callers, cfg.duration, cfg.max, fn)
	wg.Wait()
	close(errs)
	return <-errs
}

func fetch(ctx context.Context, url, file string) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: status %d", url, resp.StatusCode)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
