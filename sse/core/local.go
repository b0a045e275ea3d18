package core

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/internal/mcphttp"
)

// callRequestID is the call id of a session's request. It is derived, not drawn, so
// that the edge receiving a notifications/cancelled can cancel a call that another
// edge runs: it publishes the cancel for the same id. A session never reuses a
// request id, so neither does the bus; and the session id is a secret the gateway
// made, so no caller can name another's call.
func callRequestID(session string, id jsonrpc.ID) string {
	sum := sha256.Sum256([]byte(session + "\x00" + mcphttp.IDKey(id)))
	return "mcp-" + hex.EncodeToString(sum[:16])
}

// callSet holds the calls running on this edge by their call ids, to cancel
// them when the client asks (on this edge or, through the bus, on another), when
// their session ends, or when the edge closes.
type callSet struct {
	mu    sync.Mutex
	calls map[string]runningCall
}

type runningCall struct {
	session string // "" on 2026-07-28
	cancel  func()
}

func newCallSet() *callSet { return &callSet{calls: map[string]runningCall{}} }

func (c *callSet) add(callID, session string, cancel func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[callID] = runningCall{session, cancel}
}

func (c *callSet) remove(callID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.calls, callID)
}

// cancel cancels a call if it runs here, and reports whether it did.
func (c *callSet) cancel(callID string) bool {
	c.mu.Lock()
	call, ok := c.calls[callID]
	c.mu.Unlock()
	if ok {
		call.cancel()
	}
	return ok
}

// cancelSession cancels the calls of a session. They are few: a session's calls
// run on the edges its POSTs reach.
func (c *callSet) cancelSession(session string) {
	c.cancelWhere(func(call runningCall) bool { return call.session == session })
}

func (c *callSet) cancelAll() { c.cancelWhere(func(runningCall) bool { return true }) }

func (c *callSet) cancelWhere(match func(runningCall) bool) {
	var fns []func()
	c.mu.Lock()
	for id, call := range c.calls {
		if match(call) {
			fns = append(fns, call.cancel)
			delete(c.calls, id)
		}
	}
	c.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// streamSet holds the session streams this edge serves, to close them when their
// session ends.
type streamSet struct {
	mu      sync.Mutex
	streams map[string]map[chan struct{}]struct{}
}

func newStreamSet() *streamSet { return &streamSet{streams: map[string]map[chan struct{}]struct{}{}} }

// add registers a stream of session; the returned channel closes when the session
// ends, and release forgets the stream.
func (s *streamSet) add(session string) (ended <-chan struct{}, release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.streams[session] == nil {
		s.streams[session] = map[chan struct{}]struct{}{}
	}
	s.streams[session][ch] = struct{}{}
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.streams[session][ch]; ok {
			delete(s.streams[session], ch)
			if len(s.streams[session]) == 0 {
				delete(s.streams, session)
			}
		}
	}
}

func (s *streamSet) end(session string) {
	s.mu.Lock()
	chs := s.streams[session]
	delete(s.streams, session)
	s.mu.Unlock()
	for ch := range chs {
		close(ch)
	}
}

// listenerSet holds the subscriptions/listen streams (2026-07-28) this edge serves,
// by tool. They have no session and no event log: a change is told to them directly.
type listenerSet struct {
	mu     sync.Mutex
	byTool map[string]map[*Listener]struct{}
}

// Listener is one subscriptions/listen stream: the lists that changed since it last
// took them, and a wake-up when one did.
type Listener struct {
	Wake    chan struct{}
	mu      sync.Mutex
	changed map[string]bool // wire.ListTools, ...
}

// Take returns the lists that changed since the last take.
func (l *Listener) Take() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.changed
	l.changed = map[string]bool{}
	return c
}

func newListenerSet() *listenerSet {
	return &listenerSet{byTool: map[string]map[*Listener]struct{}{}}
}

// add registers a listener on tool; its wake channel receives a value when one of the
// tool's lists changes (changes in quick succession may arrive as one), and take says
// which.
func (l *listenerSet) add(tool string) (*Listener, func()) {
	ln := &Listener{Wake: make(chan struct{}, 1), changed: map[string]bool{}}
	l.mu.Lock()
	if l.byTool[tool] == nil {
		l.byTool[tool] = map[*Listener]struct{}{}
	}
	l.byTool[tool][ln] = struct{}{}
	l.mu.Unlock()
	return ln, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		delete(l.byTool[tool], ln)
		if len(l.byTool[tool]) == 0 {
			delete(l.byTool, tool)
		}
	}
}

// notify tells the listeners on tool that its list changed.
func (l *listenerSet) notify(tool, list string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ln := range l.byTool[tool] {
		ln.mu.Lock()
		ln.changed[list] = true
		ln.mu.Unlock()
		select {
		case ln.Wake <- struct{}{}:
		default:
		}
	}
}
