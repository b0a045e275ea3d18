package mcpbridge

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/workers"
)

// StatelessRevision is the MCP revision without sessions, in which a server asks its
// client for input (sampling, elicitation, roots) by answering a request with an
// input_required result, and the client calls again with the answers.
const StatelessRevision = "2026-07-28"

// A client that calls at StatelessRevision takes input_required results, so its
// tools/call goes, when the server speaks that revision too, to an upstream session
// of that revision (one per bridge, opened at the first such call; the server keeps
// nothing between its requests), with the client's capabilities in its _meta. The
// server's input_required result, its keys and requestState, goes back to the
// client as the server made it, and the client's retry comes back with the server's
// requestState and the client's answers (wire.HeaderRequestState,
// wire.HeaderInputResponses), which are passed on. When the server speaks only an
// older revision, such calls take the older path: the server's requests go to the
// client through the gateway's own rounds.

// statelessState is the bridge's upstream session at StatelessRevision.
type statelessState struct {
	mu          sync.Mutex // held while one is opened
	s           *session   // nil until opened
	unsupported bool       // the server answered with an older revision
}

// statelessSession is the upstream session at StatelessRevision, opened (again) if
// it is not running; nil when the server does not speak that revision or the session
// cannot be opened now.
func (b *Bridge) statelessSession() *session {
	st := &b.stateless
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.unsupported {
		return nil
	}
	if s := st.s; s != nil {
		b.mu.Lock()
		cs, down := s.cs, s.down
		b.mu.Unlock()
		running := cs != nil
		if running {
			select {
			case <-down:
				running = false
			default:
			}
		}
		if running {
			return s
		}
		b.mu.Lock()
		stop := s.stop
		b.mu.Unlock()
		b.shut(s, stop)
		st.s = nil
		b.setStatelessOpen(nil)
	}
	s := &session{idx: -1, revision: StatelessRevision, caps: everyCapability(), calls: map[*inflight]struct{}{}, relist: make(chan struct{}, 1)}
	if err := b.open(b.life, s); err != nil {
		b.log.Warn("upstream session at "+StatelessRevision+" did not start; its calls take the older path", "err", err)
		return nil
	}
	b.mu.Lock()
	cs, stop := s.cs, s.stop
	b.mu.Unlock()
	if v := cs.InitializeResult().ProtocolVersion; v < StatelessRevision {
		b.log.Info("the server does not speak "+StatelessRevision+"; its clients' input requests go through the gateway's rounds", "protocol", v)
		b.shut(s, stop)
		st.unsupported = true
		return nil
	}
	st.s = s
	b.setStatelessOpen(s)
	return s
}

// setStatelessOpen records the stateless session whose tools are methods, and has the
// methods written again.
func (b *Bridge) setStatelessOpen(s *session) {
	b.mu.Lock()
	b.statelessOpen = s
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
}

// endStateless ends the upstream session at StatelessRevision, if one runs.
func (b *Bridge) endStateless() {
	st := &b.stateless
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.s == nil {
		return
	}
	b.mu.Lock()
	stop := st.s.stop
	b.mu.Unlock()
	b.shut(st.s, stop)
	st.s = nil
	b.mu.Lock()
	b.statelessOpen = nil
	b.mu.Unlock()
}

// stateless reports whether c comes from a client of StatelessRevision or later.
func stateless(c *workers.Call) bool {
	v := c.Header.Get(wire.HeaderProtocolVersion)
	return v != "" && v >= StatelessRevision
}

// callStateless calls tool name on s for a client of StatelessRevision: with the
// client's capabilities, and on a retry the server's requestState and the client's
// answers; it returns the server's result as the server sent it, input_required
// included.
func (b *Bridge) callStateless(ctx context.Context, c *workers.Call, s *session, name string) (any, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: argumentsOf(c)}
	if len(c.ClientCapabilities) > 0 {
		// What this client declared, not what the session's client does.
		params.Meta = mcp.Meta{mcp.MetaKeyClientCapabilities: c.ClientCapabilities}
	}
	params.RequestState = c.Header.Get(wire.HeaderRequestState)
	if answers := c.Header.Get(wire.HeaderInputResponses); answers != "" {
		if err := json.Unmarshal([]byte(answers), &params.InputResponses); err != nil {
			return nil, &workers.Error{Code: workers.CodeInvalidParams, Status: 400, Message: "inputResponses: " + err.Error()}
		}
	}
	in := b.enter(ctx, c, s)
	defer b.release(in)
	if in.token != "" {
		params.SetProgressToken(in.token)
	}
	if in.cs == nil {
		return nil, &workers.Error{Code: CodeUnavailable, Message: "the upstream session ended; retry shortly", Status: 503}
	}
	return b.callOn(ctx, in, params)
}

// enter counts c as running on s (released with release), with a progress token
// when its caller follows its progress.
func (b *Bridge) enter(ctx context.Context, c *workers.Call, s *session) *inflight {
	b.mu.Lock()
	defer b.mu.Unlock()
	in := &inflight{c: c, ctx: ctx, s: s, cs: s.cs}
	s.calls[in] = struct{}{}
	if c.Header.Get(wire.HeaderProgress) != "" {
		in.token = "tg-" + nuid.Next()
		b.progress[in.token] = in
	}
	return in
}
