package core

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// A tool whose workers keep state per MCP session (wire.Capabilities.SessionState: a
// bridged server holds one upstream session per client session) must see all of a
// session's requests at the one instance holding that state. The session's record
// names it (registry.Session.Instance), so that every edge sends the session's
// requests there (gateway.Call.Instance); the first answer names it, and so does the
// answer of another instance once the one holding it is gone.

// instanceOf is the worker instance r's session is held by, or "" for any.
func (s *Server) instanceOf(r *Request) string {
	if r.Session == nil || r.Session.Instance == "" {
		return ""
	}
	if t, err := s.view.Snapshot().Tool(r.Principal, r.Tool); err != nil || !t.Tool.Capabilities.SessionState {
		return "" // the tool's workers no longer keep sessions' state
	}
	return r.Session.Instance
}

// pinTimeout bounds recording the instance that holds a session.
const pinTimeout = 5 * time.Second

// pin records in r's session the instance that answered it (wire.HeaderInstance), when
// it is not the one the request was sent to (sentTo, "" for any). Of two first
// requests answered by two instances at once, the first recorded stays.
func (s *Server) pin(ctx context.Context, r *Request, sentTo string, reply *wire.Reply) {
	if r.Session == nil || reply == nil {
		return
	}
	got := reply.Header.Get(wire.HeaderInstance)
	if got == "" || got == sentTo || !wire.ValidToken(got) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), pinTimeout)
	defer cancel()
	sess := *r.Session // r's copy is read by the request's other goroutines
	err := s.updateSession(ctx, &sess, func(cur *registry.Session) {
		if cur.Instance == sentTo {
			cur.Instance = got
		}
	})
	if err != nil {
		// The next request goes to any instance again, which names itself again.
		s.log.Warn("mcp: the instance holding a session was not recorded", "session", sess.ID, "tool", r.Tool, "err", err)
	}
}
