package core

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// sessionContext is what a call of a session's client carries of it to the tool
// (nothing of a request without a session), with the call's extra headers and the
// worker instance it is sent to.
func sessionContext(sess *registry.Session, header nats.Header, instance string) wire.MCPContext {
	mc := wire.MCPContext{Header: header, Instance: instance}
	if sess != nil {
		c := sessionCaps(sess)
		mc.Session, mc.ClientCapabilities, mc.ClientCapabilityObject, mc.LogLevel = sess.ID, c.names, c.compact, sess.LogLevel
	}
	return mc
}

func sessionID(sess *registry.Session) string {
	if sess == nil {
		return ""
	}
	return sess.ID
}

// clientCapabilities are the capabilities a session's client declared, by name, so
// that a worker asks it nothing it cannot answer; nil when unknown.
func clientCapabilities(sess *registry.Session) []string {
	if sess == nil {
		return nil
	}
	return sessionCaps(sess).names
}

// caps is what a call sends of a capabilities object: its names, and the object
// compact.
type caps struct {
	names   []string
	compact []byte
}

// sessionCaps reads the capabilities object of a session once for all its calls,
// and for every session whose client sends the same object.
func sessionCaps(sess *registry.Session) caps {
	capsMu.RLock()
	c, ok := capsCache[string(sess.Capabilities)]
	capsMu.RUnlock()
	if ok {
		return c
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(sess.Capabilities, &fields) == nil {
		c.names = slices.Sorted(maps.Keys(fields))
	}
	if len(sess.Capabilities) > 0 {
		c.compact = compactObject(sess.Capabilities)
	}
	capsMu.Lock()
	if len(capsCache) < maxCachedCaps {
		capsCache[string(sess.Capabilities)] = c
	}
	capsMu.Unlock()
	return c
}

// compactObject is a JSON object compact (a header's value is one line); nil when it
// is no object.
func compactObject(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil || b.Len() == 0 || b.Bytes()[0] != '{' {
		return nil
	}
	return b.Bytes()
}

// asksClient reports whether a session's client declared a capability a worker may
// send it a request for (sampling, elicitation, roots): the tool of a call of such a
// client is told the call's POST stream, on which those requests travel.
func asksClient(sess *registry.Session) bool {
	for _, c := range clientCapabilities(sess) {
		if c == "sampling" || c == "elicitation" || c == "roots" {
			return true
		}
	}
	return false
}

// The capability names and compact forms of the capabilities objects seen, which few
// clients make in few ways, so that a call does not decode its session's again. The
// slices are shared: their readers only read them. At most maxCachedCaps are kept, so that
// clients that declare many different objects cannot grow it without bound.
var (
	capsMu    sync.RWMutex
	capsCache = map[string]caps{}
)

const maxCachedCaps = 1024
