package mcpbridge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// open starts s's session: the process or connection, initialize, the log level and
// the first tools/list, all within the start timeout.
func (b *Bridge) open(ctx context.Context, s *session) error {
	// The session lives as long as connCtx (the legacy SSE transport ties its stream
	// to the context it connects with); the timer ends it early if it starts too slowly.
	connCtx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(b.cfg.StartTimeout, cancel)
	transport, cmd, stderr := b.transport(s)
	fail := func(err error) error {
		cancel()
		if stderr != nil {
			stderr.flush() // what a child said before it failed
		}
		if !timer.Stop() && ctx.Err() == nil {
			return fmt.Errorf("not started within %v: %w", b.cfg.StartTimeout, err)
		}
		return err
	}
	initCtx, initRaw := withRaw(connCtx)
	cs, err := b.connect(initCtx, s, transport)
	if err != nil {
		return fail(err)
	}
	b.attach(s, cs, stderr, initRaw)
	b.setStartLevel(connCtx, s, cs)
	if s.client == "" {
		if err := b.list(connCtx, s); err != nil {
			b.shut(s, cancel)
			return fail(err)
		}
	}
	if !timer.Stop() {
		b.shut(s, cancel)
		return fmt.Errorf("not started within %v", b.cfg.StartTimeout)
	}
	b.mu.Lock()
	s.stop = cancel
	b.mu.Unlock()
	if s.idx == 0 {
		b.resubscribe(connCtx, cs)
	}
	b.logStarted(s, cs, cmd)
	return nil
}

// connect initializes s's session on transport. An endpoint that does not take
// Streamable HTTP may be a legacy HTTP+SSE one: a remote server that refuses the
// first is tried as the second, and spoken to so from then on.
func (b *Bridge) connect(ctx context.Context, s *session, transport mcp.Transport) (*mcp.ClientSession, error) {
	opts := &mcp.ClientSessionOptions{ProtocolVersion: cmp.Or(s.revision, ProtocolVersion)}
	client := b.newClient(s.caps, s.revision == StatelessRevision)
	cs, err := client.Connect(ctx, transport, opts)
	if err == nil || b.cfg.URL == "" || b.sse() || ctx.Err() != nil {
		return cs, err
	}
	if s.revision != StatelessRevision {
		// A server of StatelessRevision alone refuses an older revision's initialize.
		mcs, merr := b.newClient(s.caps, true).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: b.httpClient(s)},
			&mcp.ClientSessionOptions{ProtocolVersion: StatelessRevision})
		if merr == nil {
			b.mu.Lock()
			s.revision = StatelessRevision
			b.mu.Unlock()
			return mcs, nil
		}
		err = errors.Join(err, fmt.Errorf("and at %s: %w", StatelessRevision, merr))
	}
	sseCS, sseErr := client.Connect(ctx, &mcp.SSEClientTransport{Endpoint: b.cfg.URL, HTTPClient: b.httpClient(s)}, opts)
	if sseErr != nil {
		return nil, errors.Join(err, fmt.Errorf("and as HTTP+SSE: %w", sseErr))
	}
	b.log.Info("the server does not take Streamable HTTP; using HTTP+SSE", "url", b.cfg.URL, "streamable_error", err)
	b.mu.Lock()
	b.useSSE = true
	b.mu.Unlock()
	return sseCS, nil
}

// attach makes cs s's session, with the initialize result initRaw saw, and marks s
// down when cs ends.
func (b *Bridge) attach(s *session, cs *mcp.ClientSession, stderr *lineLog, initRaw *rawSink) {
	down := make(chan struct{})
	initialized := initRaw.raw()
	s.raw.forget(initRaw)
	b.mu.Lock()
	s.cs, s.down, s.stderr, s.initialized = cs, down, stderr, initialized
	b.byClient[cs] = s
	b.mu.Unlock()
	go func() {
		err := cs.Wait()
		b.mu.Lock()
		s.ended = err
		b.mu.Unlock()
		close(down)
	}()
}

// setStartLevel sets the session's log level upstream, on a server that logs:
// everything on a shared session, since what reaches a caller is filtered by the
// level its session set; on a client's session, the level its client set, if any, as
// it would have directly.
func (b *Bridge) setStartLevel(ctx context.Context, s *session, cs *mcp.ClientSession) {
	b.mu.Lock()
	level := s.level
	b.mu.Unlock()
	if s.client == "" {
		level = "debug"
	}
	caps := cs.InitializeResult().Capabilities
	if caps == nil || caps.Logging == nil || level == "" || s.revision == StatelessRevision {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(level)}); err != nil {
		b.log.Warn("upstream logging/setLevel failed", "session", s.idx, "err", err)
	}
}

// logStarted says that s's session started, and with what: its protocol, its
// client's session, its process.
func (b *Bridge) logStarted(s *session, cs *mcp.ClientSession, cmd *exec.Cmd) {
	attrs := []any{"session", s.idx, "protocol", cs.InitializeResult().ProtocolVersion}
	if s.client != "" || s.account != "" {
		attrs = append(attrs, s.whose()...)
	}
	if cmd != nil && cmd.Process != nil {
		attrs = append(attrs, "pid", cmd.Process.Pid)
	}
	b.log.Info("upstream session started", attrs...)
}

// transport is how s reaches the server: the remote URL, or a new child process
// (returned with its stderr's log).
func (b *Bridge) transport(s *session) (mcp.Transport, *exec.Cmd, *lineLog) {
	if b.cfg.URL != "" {
		if b.sse() {
			return &mcp.SSEClientTransport{Endpoint: b.cfg.URL, HTTPClient: b.httpClient(s)}, nil, nil
		}
		return &mcp.StreamableClientTransport{Endpoint: b.cfg.URL, HTTPClient: b.httpClient(s)}, nil, nil
	}
	cmd := exec.Command(b.cfg.Command[0], b.cfg.Command[1:]...)
	if len(b.cfg.Env) > 0 {
		cmd.Env = b.cfg.upstreamEnv(s.values)
	}
	stderr := &lineLog{log: b.log.With("session", s.idx)}
	cmd.Stderr = stderr
	// A grandchild that keeps stderr open must not keep the restart waiting.
	cmd.WaitDelay = 2 * time.Second
	t := &stdioTransport{cmd: cmd, terminate: 2 * time.Second}
	return observed{Transport: t, see: func(msg jsonrpc.Message) { b.observe(s, msg) }, sent: s.raw.sent, opened: func(c *observedConn) {
		b.mu.Lock()
		s.conn = c
		b.mu.Unlock()
	}}, cmd, stderr
}

// httpClient is s's HTTP client for the remote server.
func (b *Bridge) httpClient(s *session) *http.Client {
	t := httpTransport{
		header: b.cfg.upstreamHeader(s.values), base: http.DefaultTransport,
		see:  func(msg jsonrpc.Message) { b.observe(s, msg) },
		sent: s.raw.sent,
	}
	if b.oauth != nil {
		oauthHeader(t.header, s.values)
		t.refused = func(res *http.Response) { b.noteRefusal(s.values, res) }
	}
	return &http.Client{Transport: t}
}

func (b *Bridge) sse() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.useSSE
}

// keep keeps s running until ctx ends: it starts it (unless up), re-lists its tools
// when the server says they changed, and restarts it with backoff when it ends.
func (b *Bridge) keep(ctx context.Context, s *session, up bool) {
	backoff := b.cfg.RestartMin
	for {
		if !up {
			if err := b.open(ctx, s); err != nil {
				if ctx.Err() != nil {
					return
				}
				b.log.Warn("upstream session did not start", "session", s.idx, "retry_in", backoff, "err", err)
				if !sleep(ctx, backoff) {
					return
				}
				backoff = min(2*backoff, b.cfg.RestartMax)
				continue
			}
		}
		up = false
		started := time.Now()
		b.mu.Lock()
		down, stop := s.down, s.stop
		b.mu.Unlock()
	serve:
		for {
			select {
			case <-ctx.Done():
				b.shut(s, stop)
				return
			case <-s.relist:
				if err := b.list(ctx, s); err != nil {
					b.log.Warn("upstream tools/list failed", "session", s.idx, "err", err)
				}
			case <-down:
				break serve
			}
		}
		b.mu.Lock()
		ended := s.ended
		b.mu.Unlock()
		b.shut(s, stop)
		if time.Since(started) > stableAfter {
			backoff = b.cfg.RestartMin
		}
		b.log.Warn("upstream session ended; restarting", "session", s.idx, "lived_ms", time.Since(started).Milliseconds(), "err", ended, "restart_in_ms", backoff.Milliseconds())
		if !sleep(ctx, backoff) {
			return
		}
		backoff = min(2*backoff, b.cfg.RestartMax)
	}
}

// shut closes s's session (for a stdio server, ends its process) and marks it down.
func (b *Bridge) shut(s *session, stop context.CancelFunc) {
	b.mu.Lock()
	cs, stderr := s.cs, s.stderr
	s.cs, s.stderr, s.stop = nil, nil, nil
	delete(b.byClient, cs)
	b.mu.Unlock()
	if cs == nil {
		return
	}
	_ = cs.Close() // an exit status, when the process failed; logged where it ended
	if stop != nil {
		stop()
	}
	if stderr != nil {
		stderr.flush()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// list reads every page of s's tools.
func (b *Bridge) list(ctx context.Context, s *session) error {
	b.mu.Lock()
	cs := s.cs
	b.mu.Unlock()
	if cs == nil {
		return errors.New("the session is down")
	}
	tools := map[string]*mcp.Tool{}
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("tools/list: %w", err)
		}
		tools[t.Name] = t
	}
	b.mu.Lock()
	s.tools, s.listedAt = tools, time.Now()
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return nil
}
