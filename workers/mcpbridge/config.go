package mcpbridge

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/toolgate/toolgate/bus/wire"
)

// Config says which MCP server to deploy, and as which tool.
type Config struct {
	Tool  string // the tool's id
	Title string // the tool's title; the server's own title (or name) when empty

	// Command runs a stdio server: the program and its arguments. Exactly one of
	// Command and URL is set.
	Command []string
	// URL is a remote server's endpoint, spoken to with Streamable HTTP, or with the
	// legacy HTTP+SSE transport when the endpoint does not take Streamable HTTP.
	URL string
	// Header is sent with every HTTP request to URL (an Authorization header, say).
	// A value may name fields of the calling account's connection, {field} (see Env).
	Header http.Header
	// OAuth makes the bridge an MCP OAuth client of the remote server at URL for
	// each account (see oauthaccounts.go): the tool's connection is the server's
	// OAuth provider (DiscoverOAuth), and each account's requests carry its own
	// access token. nil for a server that takes no OAuth.
	OAuth *OAuthClient
	// Env sets variables of a stdio server's environment, "NAME=value". A value that
	// names fields of the calling account's connection, {field}, makes the server act
	// per account: each such field is a secret field of the tool's connection
	// (ConnectionFields), every account's calls go to upstream sessions (processes)
	// of that account's own, whose environment has the account's values, and the
	// shared sessions, which list the tools, run without those variables.
	Env []string
	// AccountSessions bounds the upstream sessions (for a stdio server, processes)
	// held at once for accounts' calls that come without an MCP session, when a
	// template names a field: an account's call beyond it is refused
	// (upstream_session_limit) until one ends. Each MCP client session has its own
	// anyway, within ClientSessions.
	AccountSessions int
	// AccountIdle ends an account's upstream session that has taken no call for this
	// long.
	AccountIdle time.Duration
	// AccountLists bounds the accounts whose tool lists a server that requires
	// OAuth keeps at once (each account sees and calls only what the server lists to
	// its token); past it the least recently listed is forgotten, and that account
	// sees no method until its next tools/list.
	AccountLists int

	// Sessions is how many shared upstream sessions there are (for a stdio server,
	// child processes): the calls that come without an MCP session (the HTTP API)
	// are spread over them, the tool's list is read from them, and, when the server
	// keeps no state per session (a remote Streamable HTTP server that names no
	// session), so is every call.
	Sessions int
	// UpstreamSessions is how MCP client sessions map to upstream sessions:
	// UpstreamShared (every client's requests spread over the Sessions of the
	// pool), UpstreamPerSession (each client session has its own, within
	// ClientSessions), or UpstreamAuto (empty too), which decides from what the
	// server and each client declare (resolveSharing).
	UpstreamSessions string
	// ClientSessions bounds how many upstream sessions the bridge holds for MCP
	// client sessions at once. Each client session has one of its own for as long as
	// it lives, so that what the server keeps per session stays the client's; a
	// client session beyond the bound is refused (upstream_session_limit) until one
	// ends.
	ClientSessions int
	// ClientSessionIdle ends the upstream session of a client session that has made
	// no request for this long: its end, which edges announce, may have gone unheard.
	ClientSessionIdle time.Duration
	// CallTimeout is the timeout of every one of the server's tools, for servers whose
	// tools run longer than the gateway's default; 0 leaves it to the gateway.
	CallTimeout time.Duration
	// TaskSupport is the task support of the server's tools by their MCP name
	// (wire.TaskOptional, wire.TaskRequired, wire.TaskForbidden): for a server that
	// knows nothing of tasks, the gateway keeps its calls' tasks, and this says which
	// tools a client must, or must not, call as tasks. A tool not named is optional.
	TaskSupport map[string]string
	// StartTimeout bounds the start of a session: the process's start (a package
	// that npx fetches first takes a while), initialize and the first tools/list.
	StartTimeout time.Duration
	// RestartMin and RestartMax bound the backoff between restarts of a session that
	// ended: it starts at RestartMin and doubles up to RestartMax while the session
	// keeps failing.
	RestartMin, RestartMax time.Duration

	// Subjects names the bus subjects (wire.DefaultSubjects unless set).
	Subjects wire.Subjects
}

// DefaultConfig is four shared sessions, up to 64 sessions of clients each ended
// after 30 minutes idle, a minute to start, and restarts from 100ms backing off to
// 30s.
func DefaultConfig() Config {
	return Config{
		Sessions:          4,
		UpstreamSessions:  UpstreamAuto,
		ClientSessions:    64,
		ClientSessionIdle: 30 * time.Minute,
		AccountSessions:   DefaultAccountSessions,
		AccountIdle:       DefaultAccountIdle,
		AccountLists:      DefaultAccountLists,
		StartTimeout:      time.Minute,
		RestartMin:        100 * time.Millisecond,
		RestartMax:        30 * time.Second,
		Subjects:          wire.DefaultSubjects,
	}
}

// DefaultAccountSessions, DefaultAccountIdle and DefaultAccountLists are Config's
// AccountSessions, AccountIdle and AccountLists by default.
const (
	DefaultAccountSessions = 64
	DefaultAccountIdle     = 10 * time.Minute
	DefaultAccountLists    = 10000
)

// MaxAccountLists is the most AccountLists may be: the lists travel in the tool's
// record.
const MaxAccountLists = 100000

// MaxClientSessions is the most ClientSessions (and AccountSessions) may be.
const MaxClientSessions = 4096

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	if err := wire.CheckToolID(c.Tool); err != nil {
		return fmt.Errorf("mcp: tool: %w", err)
	}
	switch {
	case len(c.Command) == 0 && c.URL == "":
		return errors.New("mcp: command: give the server's command (after --) or its --url")
	case len(c.Command) > 0 && c.URL != "":
		return errors.New("mcp: url: give a command or a URL, not both")
	case len(c.Command) > 0 && c.Command[0] == "":
		return errors.New("mcp: command: the program is empty")
	}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("mcp: url: %q: must be an absolute http(s) URL", c.URL)
		}
	} else if len(c.Header) > 0 {
		return errors.New("mcp: header: headers go to a --url server; a command takes none")
	}
	if err := c.checkOAuth(); err != nil {
		return err
	}
	if len(c.Env) > 0 && c.URL != "" {
		return errors.New("mcp: env: the environment is a command's; a --url server takes headers")
	}
	if err := checkEnv(c.Env); err != nil {
		return err
	}
	switch c.UpstreamSessions {
	case "", UpstreamAuto, UpstreamShared, UpstreamPerSession:
	default:
		return fmt.Errorf("mcp: upstream-sessions: %q: must be %s, %s or %s", c.UpstreamSessions, UpstreamAuto, UpstreamShared, UpstreamPerSession)
	}
	switch {
	case c.Sessions < 1 || c.Sessions > 64:
		return errors.New("mcp: sessions: must be from 1 to 64")
	case c.ClientSessions < 1 || c.ClientSessions > MaxClientSessions:
		return fmt.Errorf("mcp: client-sessions: must be from 1 to %d", MaxClientSessions)
	case c.ClientSessionIdle <= 0:
		return errors.New("mcp: client-session-idle: must be positive")
	case c.AccountSessions < 1 || c.AccountSessions > MaxClientSessions:
		return fmt.Errorf("mcp: account-sessions: must be from 1 to %d", MaxClientSessions)
	case c.AccountIdle <= 0:
		return errors.New("mcp: account-idle: must be positive")
	case c.AccountLists < 1 || c.AccountLists > MaxAccountLists:
		return fmt.Errorf("mcp: account-lists: must be from 1 to %d", MaxAccountLists)
	case c.CallTimeout < 0:
		return errors.New("mcp: call-timeout: must not be negative")
	case badTaskSupport(c.TaskSupport) != "":
		return fmt.Errorf("mcp: task-support: %s", badTaskSupport(c.TaskSupport))
	case c.StartTimeout <= 0:
		return errors.New("mcp: start-timeout: must be positive")
	case c.RestartMin <= 0 || c.RestartMax < c.RestartMin:
		return errors.New("mcp: restart: the minimum must be positive and at most the maximum")
	}
	return nil
}

// badTaskSupport says what is wrong with a TaskSupport, "" when nothing.
func badTaskSupport(ts map[string]string) string {
	for name, v := range ts {
		switch v {
		case wire.TaskOptional, wire.TaskRequired, wire.TaskForbidden:
		default:
			return fmt.Sprintf("%s=%s: must be %s, %s or %s", name, v, wire.TaskOptional, wire.TaskRequired, wire.TaskForbidden)
		}
	}
	return ""
}

// checkOAuth checks the OAuth settings: a remote server's, the gateway's URL given,
// and no header of the token's own (Authorization) or naming connection fields.
func (c Config) checkOAuth() error {
	switch {
	case c.OAuth == nil:
		return nil
	case c.URL == "":
		return errors.New("mcp: oauth: OAuth is a --url server's; a command takes none")
	case c.OAuth.GatewayURL == "":
		return errors.New("mcp: oauth: give the gateway's public URL (its edges' --base-url): the server's authorization server redirects there")
	case c.Header.Get("Authorization") != "":
		return errors.New("mcp: oauth: the Authorization header carries each account's token; give no other")
	case len(c.ConnectionFields()) > 0:
		return errors.New("mcp: oauth: a header naming {field} would make the connection a set of fields; with --oauth it is the provider's grant")
	}
	return nil
}
