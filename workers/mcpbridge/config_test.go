package mcpbridge_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/workers/mcpbridge"
)

func TestConfigValidate(t *testing.T) {
	ok := mcpbridge.DefaultConfig()
	ok.Tool, ok.Command = "files", []string{"npx", "-y", "server"}
	tests := []struct {
		name string
		edit func(*mcpbridge.Config)
		want string
	}{
		{"a command is enough", func(*mcpbridge.Config) {}, ""},
		{"a URL instead of a command is enough", func(c *mcpbridge.Config) { c.Command, c.URL = nil, "https://mcp.example.com/mcp" }, ""},
		{"a bad tool id is refused", func(c *mcpbridge.Config) { c.Tool = "Files" }, "mcp: tool:"},
		{"neither a command nor a URL is refused", func(c *mcpbridge.Config) { c.Command = nil }, "mcp: command:"},
		{"both a command and a URL are refused", func(c *mcpbridge.Config) { c.URL = "https://mcp.example.com/mcp" }, "mcp: url:"},
		{"a URL that is not http(s) is refused", func(c *mcpbridge.Config) { c.Command, c.URL = nil, "ftp://x/mcp" }, "mcp: url:"},
		{"headers without a URL are refused", func(c *mcpbridge.Config) { c.Header = http.Header{"A": {"b"}} }, "mcp: header:"},
		{"OAuth for a URL with the gateway's URL is taken", func(c *mcpbridge.Config) {
			c.Command, c.URL, c.OAuth = nil, "https://mcp.example.com/mcp", &mcpbridge.OAuthClient{GatewayURL: "https://gw.example.com"}
		}, ""},
		{"OAuth for a command is refused", func(c *mcpbridge.Config) { c.OAuth = &mcpbridge.OAuthClient{GatewayURL: "https://gw.example.com"} }, "mcp: oauth:"},
		{"OAuth without the gateway's URL is refused", func(c *mcpbridge.Config) {
			c.Command, c.URL, c.OAuth = nil, "https://mcp.example.com/mcp", &mcpbridge.OAuthClient{}
		}, "mcp: oauth:"},
		{"OAuth with an Authorization header is refused", func(c *mcpbridge.Config) {
			c.Command, c.URL, c.OAuth = nil, "https://mcp.example.com/mcp", &mcpbridge.OAuthClient{GatewayURL: "https://gw.example.com"}
			c.Header = http.Header{"Authorization": {"Bearer x"}}
		}, "mcp: oauth:"},
		{"OAuth with a templated header is refused", func(c *mcpbridge.Config) {
			c.Command, c.URL, c.OAuth = nil, "https://mcp.example.com/mcp", &mcpbridge.OAuthClient{GatewayURL: "https://gw.example.com"}
			c.Header = http.Header{"X-Key": {"{key}"}}
		}, "mcp: oauth:"},
		{"one account's list is taken", func(c *mcpbridge.Config) { c.AccountLists = 1 }, ""},
		{"no account's list is refused", func(c *mcpbridge.Config) { c.AccountLists = 0 }, "mcp: account-lists:"},
		{"the most accounts' lists are taken", func(c *mcpbridge.Config) { c.AccountLists = mcpbridge.MaxAccountLists }, ""},
		{"more accounts' lists are refused", func(c *mcpbridge.Config) { c.AccountLists = mcpbridge.MaxAccountLists + 1 }, "mcp: account-lists:"},
		{"no sessions is refused", func(c *mcpbridge.Config) { c.Sessions = 0 }, "mcp: sessions:"},
		{"the pool of sessions at its most is taken", func(c *mcpbridge.Config) { c.Sessions = 64 }, ""},
		{"a pool beyond 64 sessions is refused", func(c *mcpbridge.Config) { c.Sessions = 65 }, "mcp: sessions:"},
		{"shared upstream sessions are taken", func(c *mcpbridge.Config) { c.UpstreamSessions = mcpbridge.UpstreamShared }, ""},
		{"per-session upstream sessions are taken", func(c *mcpbridge.Config) { c.UpstreamSessions = mcpbridge.UpstreamPerSession }, ""},
		{"an unknown upstream sessions mode is refused", func(c *mcpbridge.Config) { c.UpstreamSessions = "pooled" }, "mcp: upstream-sessions:"},
		{"no client sessions is refused", func(c *mcpbridge.Config) { c.ClientSessions = 0 }, "mcp: client-sessions:"},
		{"the most client sessions are taken", func(c *mcpbridge.Config) { c.ClientSessions = mcpbridge.MaxClientSessions }, ""},
		{"one client session more is refused", func(c *mcpbridge.Config) { c.ClientSessions = mcpbridge.MaxClientSessions + 1 }, "mcp: client-sessions:"},
		{"no client session idle is refused", func(c *mcpbridge.Config) { c.ClientSessionIdle = 0 }, "mcp: client-session-idle:"},
		{"a negative call timeout is refused", func(c *mcpbridge.Config) { c.CallTimeout = -time.Second }, "mcp: call-timeout:"},
		{"no start timeout is refused", func(c *mcpbridge.Config) { c.StartTimeout = 0 }, "mcp: start-timeout:"},
		{"a restart minimum over the maximum is refused", func(c *mcpbridge.Config) { c.RestartMin = 2 * c.RestartMax }, "mcp: restart:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := ok
			tt.edit(&c)
			err := c.Validate()
			if tt.want == "" && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if tt.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.want)) {
				t.Fatalf("Validate: %v, want an error starting %q", err, tt.want)
			}
		})
	}
}
