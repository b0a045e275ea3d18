package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// poolSize is the bridge's pool of upstream sessions in the bench: its default
// (--sessions).
const poolSize = 4

// manySessionRows are the rows with as many client sessions as callers, as a
// gateway's clients are each on a session of their own: a toolgate link whose bridge
// shares its pool of upstream processes among them (--upstream-sessions shared), one
// whose bridge gives each its own process (per-session), and TBXark/mcp-proxy, which
// runs one server process for all of its clients.
func manySessionRows(ctx context.Context, d peerDialer, s *stack, cfg config, acct *account, fixture string, logs io.Writer) ([]*peer, error) {
	n := cfg.callers
	var rows []*peer
	for _, mode := range []string{"shared", "per-session"} {
		what := fmt.Sprintf("a pool of %d server processes", poolSize)
		if mode == "per-session" {
			what = fmt.Sprintf("a server process each, and a pool of %d", poolSize)
		}
		row := &peer{name: fmt.Sprintf("toolgate link, %d sessions, `--upstream-sessions %s` (%s)", n, mode, what)}
		if err := bridgedRow(ctx, d, s, cfg, acct, logs, row, nil, "fixture-"+mode,
			"--upstream-sessions", mode, "--sessions", fmt.Sprint(poolSize), "--client-sessions", fmt.Sprint(n), "--", fixture); err != nil {
			return nil, err
		}
		if err := row.openMore(ctx, d, n); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	for _, o := range proxyRows(cfg.peers, fixture, s.dir) {
		if !strings.HasPrefix(o.name, "TBXark/") {
			continue
		}
		o.name = strings.Replace(o.name, " (stdio", fmt.Sprintf(", %d sessions (one server process; stdio", n), 1)
		row, err := startProxy(ctx, d, s, o, logs)
		if err != nil {
			return nil, err
		}
		if row.skip == "" {
			if err := row.openMore(ctx, d, n); err != nil {
				return nil, err
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
