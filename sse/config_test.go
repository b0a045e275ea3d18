package sse_test

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/sse"
)

func TestConfigValidateNamesTheField(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*sse.Config)
		field string // "" for a valid config
	}{
		{"the defaults are valid", func(*sse.Config) {}, ""},
		{"keep-alives need an interval", func(c *sse.Config) { c.KeepAlive = 0 }, "keep-alive"},
		{"a session without a stream lives a while", func(c *sse.Config) { c.SessionIdle = 500 * time.Millisecond }, "session-idle"},
		{"a session without a stream lives no longer than one with", func(c *sse.Config) { c.SessionTTL = time.Minute; c.SessionIdle = 2 * time.Minute }, "session-idle"},
		{"an account may hold a session", func(c *sse.Config) { c.MaxSessionsPerAccount = 0 }, "max-sessions-per-account"},
		{"events are kept a while", func(c *sse.Config) { c.EventRetention = time.Millisecond }, "event-retention"},
		{"a client gets time to resume", func(c *sse.Config) { c.ResumeGrace = c.RetryAfter / 2 }, "resume-grace"},
		{"a call turns into a stream after a while", func(c *sse.Config) { c.StreamAfter = 0 }, "stream-after"},
		{"origins are scheme://host", func(c *sse.Config) { c.AllowedOrigins = []string{"example.com"} }, "allowed-origins"},
		{"any origin may be allowed", func(c *sse.Config) { c.AllowedOrigins = []string{"*"} }, ""},
		{"the server has a name", func(c *sse.Config) { c.ServerName = "" }, "server-name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sse.DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Fatalf("got %v, want no error", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), "sse: "+tt.field+":") {
				t.Fatalf("got %v, want an error naming %s", err, tt.field)
			}
		})
	}
}
