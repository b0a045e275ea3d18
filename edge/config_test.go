package edge_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/edge"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	if err := edge.DefaultConfig().Validate(); err != nil {
		t.Fatalf("the default config: %v", err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*edge.Config)
		field string
	}{
		{"a listen address without port", func(c *edge.Config) { c.Listen = "localhost" }, "edge: listen:"},
		{"a relative base URL", func(c *edge.Config) { c.BaseURL = "/gw" }, "edge: base-url: must be an absolute http(s) URL"},
		{"a base URL of another scheme", func(c *edge.Config) { c.BaseURL = "ftp://gw.example.com" }, "edge: base-url:"},
		{"a base URL with a query", func(c *edge.Config) { c.BaseURL = "https://gw.example.com/?a=1" }, "edge: base-url:"},
		{"no body at all", func(c *edge.Config) { c.MaxBodyBytes = 0 }, "edge: max-body-bytes:"},
		{"an admin key instead of its hash", func(c *edge.Config) { c.AdminKeyHash = "tg_abc" }, "edge: admin-key-hash:"},
		{"a timeout header with a space", func(c *edge.Config) { c.TimeoutHeader = "Tg Timeout" }, "edge: timeout-header:"},
		{"a negative shutdown timeout", func(c *edge.Config) { c.ShutdownTimeout = -1 }, "edge: shutdown-timeout:"},
		{"no time for headers", func(c *edge.Config) { c.ReadHeaderTimeout = 0 }, "edge: read-header-timeout:"},
		{"no time for a body", func(c *edge.Config) { c.ReadBodyTimeout = 0 }, "edge: read-body-timeout:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := edge.DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
				t.Fatalf("Validate() = %v, want an error starting %q", err, tc.field)
			}
		})
	}
}
