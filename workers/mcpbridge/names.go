package mcpbridge

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/toolgate/toolgate/bus/wire"
)

// maxMethodName is the longest method name (^[A-Za-z0-9_-]{1,128}$).
const maxMethodName = 128

// methodNames maps a server's tool names to method names. A tool name that is a valid
// method name is kept. In another, each character a method name cannot hold becomes
// '_' ("github.search" is "github_search"); when that collides with another tool's
// name, or is too long, a short hash of the original follows, so the mapping depends
// only on the set of names, never on their order. The method keeps the tool's own name
// as its MCPName, which is how a call finds its way back.
func methodNames(tools []string) map[string]string {
	out := make(map[string]string, len(tools))
	taken := map[string]int{}
	sanitized := map[string]string{}
	for _, name := range tools {
		if wire.ValidMethodName(name) {
			out[name] = name
			taken[name]++
			continue
		}
		s := sanitize(name)
		sanitized[name] = s
		taken[s]++
	}
	for name, s := range sanitized {
		if taken[s] > 1 || s == "" || len(s) > maxMethodName {
			h := sha256.Sum256([]byte(name))
			suffix := "_" + hex.EncodeToString(h[:4])
			s = s[:min(len(s), maxMethodName-len(suffix))] + suffix
		}
		out[name] = s
	}
	return out
}

func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9') {
			return r
		}
		return '_'
	}, name)
}
