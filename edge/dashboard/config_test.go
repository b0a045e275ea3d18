package dashboard

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*Config)
		field string // "" when valid
	}{
		{"the default is valid", func(*Config) {}, ""},
		{"an https base URL with a path is valid", func(c *Config) { c.BaseURL = "https://gw.example.com/toolgate" }, ""},
		{"a prefix without its final slash is refused", func(c *Config) { c.Prefix = "/dashboard" }, "prefix"},
		{"a relative prefix is refused", func(c *Config) { c.Prefix = "dashboard/" }, "prefix"},
		{"a base URL that is not http is refused", func(c *Config) { c.BaseURL = "ftp://example.com" }, "base-url"},
		{"a base URL without a host is refused", func(c *Config) { c.BaseURL = "http://" }, "base-url"},
		{"a base URL with a query is refused", func(c *Config) { c.BaseURL = "http://example.com/?a=b" }, "base-url"},
		{"a session shorter than a minute is refused", func(c *Config) { c.SessionLifetime = time.Second }, "session-lifetime"},
		{"an empty cookie name is refused", func(c *Config) { c.CookieName = "" }, "cookie-name"},
		{"a cookie name with a space is refused", func(c *Config) { c.CookieName = "tg session" }, "cookie-name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.field != "" && (err == nil || !strings.HasPrefix(err.Error(), "dashboard: "+tc.field+": ")):
				t.Fatalf("error %v, want one naming %s", err, tc.field)
			}
		})
	}
}

func TestLinksAreBuiltOnTheBaseURL(t *testing.T) {
	c := DefaultConfig()
	c.BaseURL = "https://gw.example.com/"
	if got, want := c.base(), "https://gw.example.com"; got != want {
		t.Errorf("base %q, want %q", got, want)
	}
	curl := c.curlExample("email", "send", `{"to":"a@example.com"}`)
	if want := "curl -X POST https://gw.example.com/tool-call/email/send \\\n"; !strings.HasPrefix(curl, want) {
		t.Errorf("curl example %q, want it to start with %q", curl, want)
	}
}

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"https://gw.example.com:8443/x", "https://gw.example.com:8443/x"},
		{"http://h/a&b", "'http://h/a&b'"},
		{`{"a":"it's"}`, `'{"a":"it'\''s"}'`},
		{"", "''"},
	}
	for _, tc := range tests {
		if got := shellQuote(tc.in); got != tc.want {
			t.Errorf("shellQuote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}
