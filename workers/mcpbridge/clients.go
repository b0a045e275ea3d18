package mcpbridge

//lint:file-ignore SA1019 the bridge declares roots and sampling upstream, which MCP deprecates only from 2026-07-28, for the clients that declare them.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// CodeSessionLimit is the error code of a request of a client session that would need
// an upstream session of its own while the bridge holds ClientSessions already.
const CodeSessionLimit = "upstream_session_limit"

// notifyTimeout bounds handing one notification of the server to a client's session.
const notifyTimeout = 5 * time.Second

// clientCapabilities is what a client's upstream session declares: what the client
// declared in its initialize, as far as the SDK's types carry it; when only the
// names of its capabilities are known, those; when nothing is, every capability, as
// a shared session (the client answers for itself).
func clientCapabilities(c *workers.Call) *mcp.ClientCapabilities {
	raw := c.ClientCapabilities
	if len(raw) == 0 {
		names, known := c.Header[wire.HeaderClientCapabilities]
		if !known {
			return everyCapability()
		}
		caps := &mcp.ClientCapabilities{}
		for _, n := range strings.Split(strings.Join(names, ","), ",") {
			switch n {
			case "sampling":
				caps.Sampling = &mcp.SamplingCapabilities{}
			case "elicitation":
				caps.Elicitation = &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}}
			case "roots":
				caps.RootsV2 = &mcp.RootCapabilities{}
			}
		}
		return caps
	}
	caps := &mcp.ClientCapabilities{}
	if err := json.Unmarshal(raw, caps); err != nil {
		return &mcp.ClientCapabilities{}
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) == nil {
		if r, ok := fields["roots"]; ok {
			var roots mcp.RootCapabilities
			_ = json.Unmarshal(r, &roots)
			caps.RootsV2 = &roots
		}
	}
	return caps
}

// acquireClient counts c as running on the upstream session of its client session,
// opening that session first if it has none. A server that acts per account
// (Config.Env, Header templates) runs it with the values of the session's account.
func (b *Bridge) acquireClient(ctx context.Context, c *workers.Call) (*inflight, error) {
	values, err := b.valuesOf(c)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	s := b.clients[c.Session]
	b.mu.Unlock()
	if s != nil && b.perAccount && !maps.Equal(s.values, values) {
		// The account changed its values (or set them since the session began): the
		// server must act with the new ones, so the session starts again.
		b.endClient(c.Session, s, "the account's connection values changed")
	}
	return b.acquireHeld(ctx, c, b.clients, c.Session, b.cfg.ClientSessions, "client sessions (its client-sessions setting)", func() *session {
		return &session{idx: -1, client: c.Session, acting: c.Account, caps: clientCapabilities(c), level: c.LogLevel, values: values}
	})
}

// acquireHeld counts c as running on the upstream session held in held under key,
// opening one made by fresh first if there is none, and at most limit held at once.
func (b *Bridge) acquireHeld(ctx context.Context, c *workers.Call, held map[string]*session, key string, limit int,
	what string, fresh func() *session) (*inflight, error) {
	for {
		b.mu.Lock()
		s := held[key]
		if s == nil {
			if len(held) >= limit {
				b.mu.Unlock()
				return nil, &workers.Error{Code: CodeSessionLimit, Status: 503, Message: fmt.Sprintf(
					"the bridge holds its most upstream sessions for %s: %d; retry once one ends", what, limit)}
			}
			s = fresh()
			s.key, s.holder, s.opened, s.used = key, held, make(chan struct{}), time.Now()
			s.calls, s.relist = map[*inflight]struct{}{}, make(chan struct{}, 1)
			held[key] = s
			b.counted(s)
			go b.openHeld(s)
		}
		opened := s.opened
		b.mu.Unlock()

		select {
		case <-opened:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.mu.Lock()
		if s.err != nil {
			err := s.err
			b.mu.Unlock()
			return nil, &workers.Error{Code: CodeUnavailable, Status: 503, Message: "the upstream session of this client session did not start: " + err.Error()}
		}
		if s.cs == nil || held[key] != s {
			b.mu.Unlock()
			continue // it ended meanwhile: open another
		}
		in := &inflight{c: c, ctx: ctx, s: s, cs: s.cs}
		s.calls[in] = struct{}{}
		s.used = time.Now()
		setLevel := c.LogLevel != "" && c.LogLevel != s.level
		if setLevel {
			s.level = c.LogLevel
		}
		b.mu.Unlock()
		if setLevel {
			b.setLevel(ctx, s, in.cs, c.LogLevel)
		}
		return in, nil
	}
}

// setLevel passes on the log level a client set, to its session's server.
func (b *Bridge) setLevel(ctx context.Context, s *session, cs *mcp.ClientSession, level string) {
	if caps := cs.InitializeResult().Capabilities; caps == nil || caps.Logging == nil {
		return
	}
	if err := cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: mcp.LoggingLevel(level)}); err != nil {
		b.log.Warn("upstream logging/setLevel failed", "client_session", s.client, "err", err)
	}
}

// openHeld opens a client's or an account's upstream session, and ends it when the
// server does.
func (b *Bridge) openHeld(s *session) {
	err := b.open(b.life, s)
	b.mu.Lock()
	if err != nil {
		s.err = err
		if s.holder[s.key] == s {
			delete(s.holder, s.key)
			b.counted(s)
		}
	}
	down := s.down
	close(s.opened)
	b.mu.Unlock()
	if err != nil {
		b.log.Warn("upstream session of a client session or account did not start", append(s.whose(), "err", err)...)
		return
	}
	select {
	case <-down:
		b.mu.Lock()
		ended := s.ended
		b.mu.Unlock()
		b.endHeld(s.holder, s.key, s, fmt.Sprintf("the server ended it (%v)", ended))
	case <-b.life.Done():
	}
}

// whose are the log attributes naming whom a held session serves.
func (s *session) whose() []any {
	if s.client != "" {
		return []any{"client_session", s.client}
	}
	return []any{"account", s.account}
}

// endClient ends the upstream session of client session id (only if it is s, when s
// is given).
func (b *Bridge) endClient(id string, s *session, why string) { b.endHeld(b.clients, id, s, why) }

// endHeld ends the upstream session held in held under key (only if it is s, when s
// is given).
func (b *Bridge) endHeld(held map[string]*session, key string, s *session, why string) {
	b.mu.Lock()
	cur := held[key]
	if cur == nil || (s != nil && cur != s) {
		b.mu.Unlock()
		return
	}
	delete(held, key)
	b.counted(cur)
	opened := cur.opened
	b.mu.Unlock()
	<-opened // an opening session is ended once open
	b.mu.Lock()
	stop := cur.stop
	b.mu.Unlock()
	b.shut(cur, stop)
	b.mu.Lock()
	listed := len(cur.tools) > 0
	b.mu.Unlock()
	if listed { // the tools it alone offered are methods no more
		select {
		case b.changed <- struct{}{}:
		default:
		}
	}
	b.log.Info("upstream session of a client session or account ended", append(cur.whose(), "why", why)...)
}

// endClients ends every client's and account's upstream session.
func (b *Bridge) endClients(why string) {
	var wg sync.WaitGroup
	for _, held := range []map[string]*session{b.clients, b.accounts} {
		b.mu.Lock()
		keys := slices.Collect(maps.Keys(held))
		b.mu.Unlock()
		for _, key := range keys {
			wg.Go(func() { b.endHeld(held, key, nil, why) })
		}
	}
	wg.Wait()
}

// ClientSessions are the MCP client sessions that hold an upstream session now.
func (b *Bridge) ClientSessions() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var ids []string
	for id, s := range b.clients {
		if s.cs != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

// sweep ends the upstream sessions of client sessions idle for ClientSessionIdle.
func (b *Bridge) sweep(ctx context.Context) {
	every := min(max(min(b.cfg.ClientSessionIdle, b.cfg.AccountIdle)/4, 10*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, h := range []struct {
			held map[string]*session
			idle time.Duration
		}{{b.clients, b.cfg.ClientSessionIdle}, {b.accounts, b.cfg.AccountIdle}} {
			b.mu.Lock()
			var idle []*session
			for _, s := range h.held {
				if s.cs != nil && len(s.calls) == 0 && time.Since(s.used) >= h.idle {
					idle = append(idle, s)
				}
			}
			b.mu.Unlock()
			for _, s := range idle {
				b.endHeld(h.held, s.key, s, "idle for "+h.idle.String())
			}
		}
	}
}

// serverRequests is the receiving middleware of every upstream session: the server's
// requests for its client (sampling, elicitation, roots) go to the caller (ask)
// rather than to the SDK's handlers.
func (b *Bridge) serverRequests(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		var out mcp.Result
		switch method {
		case "sampling/createMessage":
			out = new(mcp.CreateMessageWithToolsResult)
		case "elicitation/create":
			out = new(mcp.ElicitResult)
		case "roots/list":
			out = new(mcp.ListRootsResult)
		default:
			return next(ctx, method, req)
		}
		params, err := requestParams(method, req.GetParams())
		if err != nil {
			return nil, err
		}
		cs, _ := req.GetSession().(*mcp.ClientSession)
		if err := b.ask(ctx, cs, method, params, out); err != nil {
			return nil, err
		}
		return out, nil
	}
}

// requestParams are the params of a server's request as the client is sent them: as
// the server sent them, where the SDK's types add nothing (an elicitation's mode is
// left out when the server left it out).
func requestParams(method string, p mcp.Params) (json.RawMessage, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("%s: params: %w", method, err)
	}
	if method != "elicitation/create" {
		return raw, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("%s: params: %w", method, err)
	}
	if m, ok := fields["mode"]; ok && string(m) == `""` {
		delete(fields, "mode")
	}
	return json.Marshal(fields)
}

// toClient hands a notification of a client's upstream session to its client session.
func (b *Bridge) toClient(s *session, method string, params json.RawMessage) {
	ctx, cancel := context.WithTimeout(b.life, notifyTimeout)
	defer cancel()
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	if err := b.w.Notify(ctx, s.client, method, params); err != nil {
		b.log.Warn("a notification of the server did not reach its client session", "client_session", s.client, "method", method, "err", err)
	}
}

// askClient sends a server's request to the client of a client's upstream session on
// its standalone stream: no single call it belongs to is running.
func (b *Bridge) askClient(ctx context.Context, s *session, method string, params json.RawMessage) (json.RawMessage, error) {
	raw, err := b.w.SessionRequest(ctx, s.client, method, params)
	if err != nil {
		var re *workers.RPCError
		if errors.As(err, &re) {
			return nil, &jsonrpc.Error{Code: re.Code, Message: re.Message, Data: re.Data}
		}
		return nil, err
	}
	return raw, nil
}
