package core

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/toolgate/toolgate/approvals"
	"github.com/toolgate/toolgate/calls"
)

// Config holds what an edge's MCP transports need to know.
type Config struct {
	// KeepAlive is how often an idle stream gets an SSE comment, so that proxies and
	// clients do not take a quiet stream for a dead one.
	KeepAlive time.Duration
	// SessionIdle is how long a session lives after its last request while its client
	// holds no stream and no request of it is in flight: a client that went away
	// without ending its session (no DELETE, as many do) frees its slot of the
	// account's sessions this long after its last request. A client that pauses
	// longer gets 404 and initializes a new session, as MCP asks clients to.
	SessionIdle time.Duration
	// SessionTTL is how long a session whose client holds its standalone stream
	// lives without the edge holding the stream refreshing it (it does every third
	// of it): the most a session outlives an edge that died. Sessions are registry
	// records, so it is the registry's session TTL (registry.Options.SessionTTL): 0
	// takes that, any other value must equal it.
	SessionTTL time.Duration
	// MaxSessionsPerAccount bounds the MCP sessions one account holds at once; an
	// account's Limits.Sessions overrides it. The bound holds across every edge.
	MaxSessionsPerAccount int
	// AllowedOrigins lists the browser origins (scheme://host[:port]) allowed to call,
	// besides the edge's own; "*" allows any.
	AllowedOrigins []string
	// AllowedHosts lists Host header values accepted besides localhost, 127.0.0.1 and
	// [::1] when the edge listens on a loopback address (DNS rebinding protection).
	AllowedHosts []string
	// EventRetention is how long stream events are kept for clients that reconnect
	// with Last-Event-ID. The event log is shared by every edge: 0 takes it as it
	// is (registry.DefaultEventRetention when this edge creates it); any other value
	// must be what it has, unless the registry was opened with Update.
	EventRetention time.Duration
	// MaxMessageBytes bounds the body of one POSTed JSON-RPC message.
	MaxMessageBytes int64
	// RetryAfter is the reconnection delay sent to clients in SSE retry fields.
	RetryAfter time.Duration
	// ResumeGrace is how long a call answered on a stream runs on after its client's
	// connection broke, waiting for the client to resume the stream (on any edge)
	// before taking its absence for a cancellation.
	ResumeGrace time.Duration
	// StreamAfter is how long a session's tools/call may run before its answer, to a
	// client that takes either JSON or a stream, turns into a stream: a call that
	// answers sooner, having sent its client nothing before (progress, a log message,
	// a request of its tool), is plain JSON (nothing kept in the event log); a longer one gets
	// a stream with a priming event, so that a client whose connection breaks
	// resumes it with Last-Event-ID instead of losing the answer.
	StreamAfter time.Duration
	// Tasks keeps the tasks of tools whose servers know nothing of tasks (kepttasks.go),
	// in the records of the calls that outlive their request; nil keeps none.
	Tasks *calls.Calls
	// MaxListenTasks bounds the task ids one subscriptions/listen stream follows
	// (the tasks extension's taskIds): each is a key the stream watches in tg-calls.
	MaxListenTasks int
	// Approvals holds the kept tasks an account's rules keep for a person's approval
	// (their records await it); nil refuses them, as the gateway refuses a held call
	// on an edge without approvals.
	Approvals *approvals.Approvals
	// ServerName and ServerVersion identify the gateway to MCP clients.
	ServerName    string
	ServerVersion string
}

// DefaultSessionIdle is Config.SessionIdle unless told otherwise: long enough for a
// person to read an answer and ask again, short enough that clients that leave
// without ending their sessions do not fill an account's limit.
const DefaultSessionIdle = 5 * time.Minute

// DefaultStreamAfter is Config.StreamAfter unless told otherwise: well above what a
// call through the bus costs, well below what a person notices.
const DefaultStreamAfter = 100 * time.Millisecond

// DefaultMaxListenTasks is Config.MaxListenTasks unless told otherwise.
const DefaultMaxListenTasks = 64

// DefaultConfig: keep-alives every 15 s, sessions without a stream ending 5 min
// after their last request, the registry's session TTL, 100 sessions per account, the
// event log's retention as it is, 4 MiB messages, clients told to reconnect after 1 s,
// given 10 s to resume a broken call stream, and calls that run past 100 ms
// answered as streams.
func DefaultConfig() Config {
	return Config{
		KeepAlive:             15 * time.Second,
		SessionIdle:           DefaultSessionIdle,
		MaxSessionsPerAccount: 100,
		MaxMessageBytes:       4 << 20,
		RetryAfter:            time.Second,
		ResumeGrace:           10 * time.Second,
		StreamAfter:           DefaultStreamAfter,
		MaxListenTasks:        DefaultMaxListenTasks,
		ServerName:            "toolgate",
		ServerVersion:         "dev",
	}
}

// Validate names the first field that is wrong.
func (c Config) Validate() error {
	switch {
	case c.KeepAlive <= 0:
		return errors.New("sse: keep-alive: must be positive")
	case c.SessionIdle < time.Second:
		return errors.New("sse: session-idle: must be at least 1s")
	case c.SessionTTL < 0:
		return errors.New("sse: session-ttl: must not be negative")
	case c.SessionTTL > 0 && c.SessionIdle > c.SessionTTL:
		return errors.New("sse: session-idle: must not be longer than the session TTL")
	case c.MaxSessionsPerAccount < 1:
		return errors.New("sse: max-sessions-per-account: must be at least 1")
	case c.EventRetention != 0 && c.EventRetention < time.Second:
		return errors.New("sse: event-retention: must be at least 1s (or 0 for the event log's own)")
	case c.MaxMessageBytes < 1024:
		return errors.New("sse: max-message-bytes: must be at least 1024")
	case c.RetryAfter <= 0:
		return errors.New("sse: retry-after: must be positive")
	case c.ResumeGrace < c.RetryAfter:
		return errors.New("sse: resume-grace: must be at least retry-after, or no client could resume in time")
	case c.StreamAfter <= 0:
		return errors.New("sse: stream-after: must be positive")
	case c.MaxListenTasks < 1:
		return errors.New("sse: listen-tasks: must be at least 1")
	case c.ServerName == "":
		return errors.New("sse: server-name: required")
	case c.ServerVersion == "":
		return errors.New("sse: server-version: required")
	}
	for _, o := range c.AllowedOrigins {
		if o == "*" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return fmt.Errorf("sse: allowed-origins: %q: must be scheme://host[:port] or *", o)
		}
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("sse: allowed-hosts: %q: must be a host[:port]", h)
		}
	}
	return nil
}
