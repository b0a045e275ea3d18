package mcpbridge

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResolveSharing: the flag decides when it is given; by default a server that
// names no session shares, one that declares what it keeps per session (a log level,
// subscriptions, tasks) does not, and any other leaves it to each client's
// capabilities.
func TestResolveSharing(t *testing.T) {
	tools := &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}}
	logging := &mcp.ServerCapabilities{Tools: tools.Tools, Logging: &mcp.LoggingCapabilities{}}
	subscribe := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{Subscribe: true}}
	resources := &mcp.ServerCapabilities{Resources: &mcp.ResourceCapabilities{ListChanged: true}}
	tests := []struct {
		name         string
		setting      string
		caps         *mcp.ServerCapabilities
		raw          string
		namesSession bool
		want         sharing
	}{
		{"shared is shared, whatever the server declares", UpstreamShared, logging, "", true, ownNever},
		{"per-session is per session, even for a server that names none", UpstreamPerSession, tools, "", false, ownAlways},
		{"a server that names no session is shared", UpstreamAuto, logging, "", false, ownNever},
		{"logging keeps a level per session", UpstreamAuto, logging, "", true, ownAlways},
		{"subscriptions are per session", UpstreamAuto, subscribe, "", true, ownAlways},
		{"tasks live in the session that made them", UpstreamAuto, tools, `{"tools":{},"tasks":{"list":{}}}`, true, ownAlways},
		{"tools with list_changed leave it to the clients", UpstreamAuto, tools, `{"tools":{"listChanged":true}}`, true, ownIfAsked},
		{"resources without subscribe leave it to the clients", UpstreamAuto, resources, "", true, ownIfAsked},
		{"empty means auto", "", tools, "", true, ownIfAsked},
		{"no capabilities at all leave it to the clients", UpstreamAuto, nil, "", true, ownIfAsked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resolveSharing(tt.setting, tt.caps, json.RawMessage(tt.raw), tt.namesSession); got != tt.want {
				t.Fatalf("resolveSharing = %v, want %v", got, tt.want)
			}
		})
	}
}
