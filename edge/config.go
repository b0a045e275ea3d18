package edge

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/calls"
	"github.com/toolgate/toolgate/credentials"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// DefaultMaxBodyBytes is the largest request body the edge reads: 1 MiB, the NATS
// server's default max_payload.
const DefaultMaxBodyBytes = 1 << 20

// HeaderRoom is what the edge keeps free of a NATS message's max_payload for the
// headers it adds to a tool call (request id, account, deadline, trace context).
const HeaderRoom = 4 << 10

// Config is one edge node's configuration.
type Config struct {
	// Listen is the address Serve's listener is opened on by the command.
	Listen string
	// BaseURL is how clients reach this edge; links and API URLs are built from it.
	BaseURL string
	// MaxBodyBytes bounds a request body. The edge lowers it, with a log line, when the
	// NATS server's max_payload less HeaderRoom is smaller.
	MaxBodyBytes int64
	// MaxPayloadBytes bounds a tool call's request and its reply, past one NATS
	// message, when the gateway keeps payloads (gateway.WithPayloads, with the same
	// limit); an account's own limit may be lower. Without payloads, MaxBodyBytes
	// bounds calls too.
	MaxPayloadBytes int64
	// AdminKeyHash is the hex sha256 (registry.Hash) of the admin key. Empty turns the
	// admin API off.
	AdminKeyHash string
	// TimeoutHeader names the request header in which a caller shortens a call's deadline.
	TimeoutHeader string
	// DrainDelay is how long Serve goes on serving, with /readyz answering 503, once its
	// context ends, before it stops taking connections: the time a balancer (a
	// Kubernetes Service, a proxy checking /readyz) takes to send new requests
	// elsewhere. Meanwhile every answer closes its connection, so that clients open
	// their next one where the balancer sends them.
	DrainDelay time.Duration
	// ShutdownTimeout is how long Serve waits for in-flight requests and MCP streams
	// once it stops taking connections.
	ShutdownTimeout time.Duration
	// ReadHeaderTimeout bounds how long a client may take to send a request's headers.
	ReadHeaderTimeout time.Duration
	// ReadBodyTimeout bounds how long a client may take to send a request's body, from
	// the end of its headers; a body still arriving then is a 408 and the connection is
	// closed. A request without a body, or one whose body has been read, is not
	// bounded by it: a stream may stay open for hours.
	ReadBodyTimeout time.Duration
	// MCP serves the MCP routes; nil leaves them answering 404.
	MCP MCP
	// Calls keeps the tool calls that outlive their request (Prefer: respond-async, GET
	// and DELETE /calls/{id}); nil serves every call synchronously and leaves /calls
	// answering 404.
	Calls *calls.Calls
	// Approvals holds the calls an account's rules keep for a person's approval
	// (package approvals), and serves /admin/approvals; nil refuses such calls.
	Approvals *approvals.Approvals
	// Credentials keeps the connections' values (package credentials): the admin
	// routes that set them, and each tool's connection state in get-tools; nil turns
	// them off (every connection that needs values shows needs_credentials).
	Credentials *credentials.Vault
	// Dashboard serves every path under DashboardPath (package edge/dashboard, whose
	// prefix must be DashboardPath); nil leaves them answering 404.
	Dashboard http.Handler
	// SignIn issues and checks the OAuth access tokens of links and MCP endpoints
	// (package oauth); nil leaves them bearer URLs and API-key routes as before, and
	// an account's require_sign_in without effect.
	SignIn *oauth.Issuer
	// IdP, when set, checks the access tokens of links and MCP endpoints instead of
	// SignIn: the deployment's own OpenID provider issues them, and the resources'
	// metadata names it (oauth.External).
	IdP *oauth.External
	// AuthServer is the deployment's own authorization server, served at
	// oauth.Paths; nil: none (tokens come only from elsewhere).
	AuthServer *oauth.Server
	// MaxUsers bounds the users of one account (POST /admin/accounts/{id}/users).
	MaxUsers int
}

// DashboardPath is where the deployment dashboard is served.
const DashboardPath = "/dashboard/"

// The default bounds on how long a client may take to send a request: its headers,
// then its body. The body's allows a 1 MiB body at about 35 KB/s.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadBodyTimeout   = 30 * time.Second
)

// DefaultDrainDelay is Config.DrainDelay by default: a readiness probe checked every
// few seconds sees the edge unready within it.
const DefaultDrainDelay = 5 * time.Second

// DefaultConfig serves on 127.0.0.1:8080 with 1 MiB bodies and no admin API.
func DefaultConfig() Config {
	return Config{
		Listen:            "127.0.0.1:8080",
		BaseURL:           "http://127.0.0.1:8080",
		MaxBodyBytes:      DefaultMaxBodyBytes,
		MaxPayloadBytes:   DefaultMaxPayloadBytes,
		TimeoutHeader:     "Tg-Timeout",
		DrainDelay:        DefaultDrainDelay,
		ShutdownTimeout:   15 * time.Second,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadBodyTimeout:   DefaultReadBodyTimeout,
		MaxUsers:          registry.DefaultMaxUsers,
	}
}

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("edge: listen: %w", err)
	}
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("edge: base-url: must be an absolute http(s) URL")
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return errors.New("edge: base-url: must not carry a query, fragment or user")
	}
	if c.MaxBodyBytes <= 0 {
		return errors.New("edge: max-body-bytes: must be positive")
	}
	if c.MaxPayloadBytes <= 0 {
		return errors.New("edge: max-payload-bytes: must be positive")
	}
	if c.AdminKeyHash != "" && !isHexSHA256(c.AdminKeyHash) {
		return errors.New("edge: admin-key-hash: must be 64 hex digits (the sha256 of the admin key)")
	}
	if !httpguts.ValidHeaderFieldName(c.TimeoutHeader) {
		return errors.New("edge: timeout-header: must be a valid header name")
	}
	if c.DrainDelay < 0 {
		return errors.New("edge: drain-delay: must not be negative")
	}
	if c.ShutdownTimeout < 0 {
		return errors.New("edge: shutdown-timeout: must not be negative")
	}
	if c.ReadHeaderTimeout <= 0 {
		return errors.New("edge: read-header-timeout: must be positive")
	}
	if c.ReadBodyTimeout <= 0 {
		return errors.New("edge: read-body-timeout: must be positive")
	}
	if c.MaxUsers < 0 {
		return errors.New("edge: max-users-per-account: must be at least 1")
	}
	return nil
}

// baseURL is BaseURL without a trailing slash, ready to append paths to.
func (c Config) baseURL() string { return strings.TrimRight(c.BaseURL, "/") }

// basePath is the path part of BaseURL, for paths handed to clients relative to the host.
func (c Config) basePath() string {
	u, _ := url.Parse(c.baseURL())
	return u.Path
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b >= '0' && b <= '9', b >= 'a' && b <= 'f', b >= 'A' && b <= 'F':
		default:
			return false
		}
	}
	return true
}

// the canonical form of the headers the edge reads.
var (
	headerAPIKey    = http.CanonicalHeaderKey("SERVICE_API_KEY")
	headerRequestID = "X-Request-Id"
)
