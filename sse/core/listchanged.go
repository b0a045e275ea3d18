package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"sync"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// toolChanges collects the tools whose list of MCP tools changed, between the
// registry view's goroutine (which must not block) and the one that tells sessions.
type toolChanges struct {
	mu      sync.Mutex
	digests map[string]string // tool -> digest of what tools/list shows
	pending map[string]string // tool -> key of the change, not yet announced
	wake    chan struct{}
}

func newToolChanges(snap *registry.Snapshot) *toolChanges {
	c := &toolChanges{digests: map[string]string{}, pending: map[string]string{}, wake: make(chan struct{}, 1)}
	return c.seed(snap)
}

// seed records what every tool shows now, so that a worker rewriting the same
// record on restart is not announced as a change.
func (c *toolChanges) seed(snap *registry.Snapshot) *toolChanges {
	for _, a := range snap.Accounts() {
		for _, conn := range snap.Connections(a.ID) {
			if t := snap.RawTool(conn.Tool); t != nil {
				c.digests[conn.Tool] = listDigest(t.Tool)
			}
		}
	}
	return c
}

// listDigest sums what tools/list shows of a tool; "" for a tool that is gone.
func listDigest(t *registry.Tool) string {
	if t == nil {
		return ""
	}
	b, _ := json.Marshal(t.Methods)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// note is the view's change callback.
func (c *toolChanges) note(ch registry.Change, snap *registry.Snapshot) {
	if ch.Bucket != registry.BucketTools {
		return
	}
	var d, version string
	if e := snap.RawTool(ch.Key); e != nil && !ch.Deleted {
		d = listDigest(e.Tool)
		version = strconv.FormatInt(e.Tool.UpdatedAt.UnixNano(), 36)
	}
	c.mu.Lock()
	if old, ok := c.digests[ch.Key]; ok && old == d {
		c.mu.Unlock()
		return
	}
	c.digests[ch.Key] = d
	// Every edge computes the same key for the same record, and a tool that changes
	// back and forth gets a new one each time.
	c.pending[ch.Key] = d + "-" + version
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

func (c *toolChanges) take() map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pending
	c.pending = map[string]string{}
	return p
}

// announceToolChanges sends notifications/tools/list_changed for every changed tool:
// to the 2026-07-28 listeners on this edge, and into the event log of every session
// of the tool. Every edge does the latter for every session; the record's id makes
// the log keep one copy.
func (s *Server) announceToolChanges() {
	msg := EncodeNotification(NotifyToolsChanged, struct{}{})
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-s.changes.wake:
		}
		for tool, key := range s.changes.take() {
			s.listeners.notify(tool, wire.ListTools)
			for _, id := range s.index.OfTool(tool) {
				ctx, cancel := s.detached()
				_, err := s.events.Append(ctx, s.events.StandaloneSubject(tool, id), msg, nil, "tools-changed."+id+"."+key)
				cancel()
				if err != nil {
					s.log.Warn("announcing tool change", "tool", tool, "session", id, "err", err)
				}
			}
		}
	}
}
