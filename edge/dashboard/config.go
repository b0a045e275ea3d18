package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/oauth"
)

// Config is the dashboard's configuration.
type Config struct {
	// Prefix is the path the dashboard is served under, with a slash at both ends.
	Prefix string
	// BaseURL is how clients reach the edge; the links, commands and examples the
	// dashboard shows are built on it.
	BaseURL string
	// SessionLifetime is how long a sign-in lasts. A session also ends as soon as the
	// key it was opened with is revoked or expires.
	SessionLifetime time.Duration
	// CookieName names the session cookie.
	CookieName string
	// SecureCookie marks the cookies Secure even when the request did not arrive over
	// TLS (behind a proxy that terminates it). They are Secure anyway under TLS or
	// when BaseURL is https.
	SecureCookie bool
	// Connector begins an account's authorization of a tool at the tool's OAuth
	// provider, and sets its connection's fields (credentials.Vault); nil: no tool
	// page offers to connect or set them.
	Connector Connector
	// Approvals, when set, serves the approvals page: the account's calls waiting for
	// a person's approval, which its key holder approves or denies.
	Approvals *approvals.Approvals
	// SignIn is the deployment's authorization server, whose sign-in and consent
	// are the dashboard's pages; nil: none.
	SignIn *oauth.Server
	// IdP is the issuer of the deployment's OpenID provider (--oidc-issuer), where MCP
	// clients sign in instead; the pages that would sign them in here name it.
	IdP string
}

// Connector begins OAuth authorizations, reads the connections' records and sets
// their fields (credentials.Vault).
type Connector interface {
	OAuth() bool
	BeginOAuth(ctx context.Context, account string, t *wire.Tool, browser string) (string, error)
	Lookup(ctx context.Context, account string, t *wire.Tool) (*credentials.Record, uint64, error)
	// Update sets values of account's connection to tool (credentials.Vault.Update).
	Update(ctx context.Context, account, tool string, conn *wire.Connection, values map[string]*string, replace bool) (*credentials.Record, error)
}

// DefaultConfig serves /dashboard/ for the edge of `toolgate dev`, with sessions of
// 12 hours.
func DefaultConfig() Config {
	return Config{
		Prefix:          "/dashboard/",
		BaseURL:         "http://127.0.0.1:8080",
		SessionLifetime: 12 * time.Hour,
		CookieName:      "tg_dashboard",
	}
}

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	if !strings.HasPrefix(c.Prefix, "/") || !strings.HasSuffix(c.Prefix, "/") || strings.ContainsAny(c.Prefix, "{}?#% ") {
		return fmt.Errorf("dashboard: prefix: %q must be a path that starts and ends with /", c.Prefix)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("dashboard: base-url: %q must be an absolute http(s) URL without query, fragment or user", c.BaseURL)
	}
	if c.SessionLifetime < time.Minute {
		return errors.New("dashboard: session-lifetime: must be at least a minute")
	}
	if c.CookieName == "" || !validCookieName(c.CookieName) {
		return fmt.Errorf("dashboard: cookie-name: %q is not a valid cookie name", c.CookieName)
	}
	return nil
}

// validCookieName reports whether name survives the trip through Set-Cookie and
// Cookie unchanged.
func validCookieName(name string) bool {
	c := &http.Cookie{Name: name, Value: "x"}
	return c.Valid() == nil
}

// base is BaseURL without a trailing slash, ready to have paths appended.
func (c Config) base() string { return strings.TrimRight(c.BaseURL, "/") }
