package main

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// poolSize is the bridge's pool of upstream sessions in the bench: its default
// (--sessions). A shared row with a pool of one runs one server process, as
// TBXark/mcp-proxy does.
const poolSize = 4

// manySessionRows are the rows with as many client sessions as callers, as a
// gateway's clients are each on a session of their own: toolgate links whose bridge
// shares its pool of upstream processes among them (--upstream-sessions shared; the
// default pool, and a pool of one), one whose bridge gives each its own process
// (per-session), and TBXark/mcp-proxy, which runs one server process for all of its
// clients.
func manySessionRows(ctx context.Context, d peerDialer, s *stack, cfg config, acct *account, fixture string, logs io.Writer) ([]*peer, error) {
	n := cfg.callers
	var rows []*peer
	for _, m := range []struct {
		mode string
		pool int
	}{{"shared", poolSize}, {"shared", 1}, {"per-session", poolSize}} {
		what := fmt.Sprintf("`--sessions %d`: %d server processes", m.pool, m.pool)
		if m.pool == 1 {
			what = "`--sessions 1`: one server process"
		}
		if m.mode == "per-session" {
			what = fmt.Sprintf("a server process each, and a pool of %d", m.pool)
		}
		row := &peer{name: fmt.Sprintf("toolgate link, %d sessions, `--upstream-sessions %s` (%s)", n, m.mode, what)}
		if err := bridgedRow(ctx, d, s, cfg, acct, logs, row, nil, fmt.Sprintf("fixture-%s-%d", m.mode, m.pool),
			"--upstream-sessions", m.mode, "--sessions", fmt.Sprint(m.pool), "--client-sessions", fmt.Sprint(n), "--", fixture); err != nil {
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
