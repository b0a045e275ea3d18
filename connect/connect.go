// Package connect serves MCP on a local stream (stdin and stdout) and relays every
// message to a remote MCP link, for clients that can only start stdio servers. It
// relays JSON-RPC messages as they are, both ways, so requests, notifications and
// server-initiated requests (sampling, elicitation) pass through whatever the remote
// server supports. The link is reached over Streamable HTTP, or legacy HTTP+SSE when
// the link refuses Streamable HTTP.
package connect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config says where to relay to.
type Config struct {
	// Link is the remote MCP endpoint. Its path carries a secret, so it is never
	// logged or shown in an error.
	Link string
	// Header is sent with every request to the link.
	Header http.Header
	// HTTPClient makes the requests; nil means a default client.
	HTTPClient *http.Client
	// Logger gets what the relay has to say (on stderr: stdout carries MCP).
	Logger *slog.Logger
}

// Validate checks the link, naming the field at fault.
func (c Config) Validate() error {
	u, err := url.Parse(c.Link)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("connect: link: must be an absolute http(s) URL")
	}
	return nil
}

// protocolVersionStateless is the first MCP revision without the standalone GET
// stream.
const protocolVersionStateless = "2026-07-28"

// Run relays between the local transport and cfg.Link until the local side closes
// its input (a clean exit, nil) or the remote connection fails.
func Run(ctx context.Context, local mcp.Transport, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	link, _ := url.Parse(cfg.Link)
	r := &relay{
		link:   link,
		redact: newRedactor(link),
		log:    cfg.Logger,
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	base := http.DefaultTransport
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		base = cfg.HTTPClient.Transport
	}
	r.headers = &headerTransport{base: base, header: cfg.Header}
	r.client = &http.Client{Transport: r.headers}
	if cfg.HTTPClient != nil {
		r.client.Timeout = cfg.HTTPClient.Timeout
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lconn, err := local.Connect(ctx)
	if err != nil {
		return fmt.Errorf("connect: local transport: %w", err)
	}
	defer lconn.Close()
	r.local = lconn
	return r.run(ctx, cancel)
}

type relay struct {
	link    *url.URL
	redact  redactor
	log     *slog.Logger
	client  *http.Client
	headers *headerTransport

	local      mcp.Connection
	remote     mcp.Connection
	streamable bool

	mu     sync.Mutex
	initID jsonrpc.ID // the client's initialize request, whose answer names the protocol version
}

func (r *relay) run(ctx context.Context, cancel context.CancelFunc) error {
	first, err := r.local.Read(ctx)
	if err != nil {
		return r.localEnded(ctx, err)
	}
	r.observeLocal(first)
	r.remote, err = r.open(ctx, first)
	if err != nil {
		r.reject(ctx, first, err)
		return fmt.Errorf("connect: %w", r.redact.err(err))
	}

	var wg sync.WaitGroup
	defer func() {
		cancel()
		r.remote.Close()
		wg.Wait()
	}()
	remoteDone := make(chan error, 1)
	wg.Go(func() { remoteDone <- r.pumpRemote(ctx, &wg) })
	localDone := make(chan error, 1)
	wg.Go(func() { localDone <- r.pumpLocal(ctx, &wg) })

	select {
	case err := <-localDone:
		return err
	case err := <-remoteDone:
		return err
	}
}

// localEnded turns the end of the local input into Run's result: closing stdin is
// how a client stops a stdio server.
func (r *relay) localEnded(ctx context.Context, err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, mcp.ErrConnectionClosed) || ctx.Err() != nil {
		return nil
	}
	return fmt.Errorf("connect: reading the client: %w", err)
}

// open connects to the link with the client's first message: over Streamable HTTP,
// or over legacy SSE when the link refuses that POST with a 4xx, as the MCP
// specification's backwards-compatibility section describes.
func (r *relay) open(ctx context.Context, first jsonrpc.Message) (mcp.Connection, error) {
	st := &mcp.StreamableClientTransport{Endpoint: r.link.String(), HTTPClient: r.client}
	conn, err := st.Connect(ctx)
	if err != nil {
		return nil, err
	}
	werr := conn.Write(ctx, first)
	if werr == nil {
		r.streamable = true
		return conn, nil
	}
	conn.Close()
	status := r.headers.lastPostStatus()
	if !refusesStreamable(status) {
		return nil, fmt.Errorf("the link did not answer over Streamable HTTP: %w", werr)
	}
	r.log.Info("the link refused Streamable HTTP; trying legacy SSE", "status", status)
	var errs []error
	for _, endpoint := range sseEndpoints(r.link) {
		sc := &mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: r.client}
		conn, err := sc.Connect(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := conn.Write(ctx, first); err != nil {
			conn.Close()
			return nil, fmt.Errorf("legacy SSE: %w", err)
		}
		return conn, nil
	}
	return nil, fmt.Errorf("the link refused Streamable HTTP (%d %s) and legacy SSE: %w",
		status, http.StatusText(status), errors.Join(errs...))
}

// refusesStreamable reports whether a POST's status means the server does not
// speak Streamable HTTP there, rather than that it refused the caller.
func refusesStreamable(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// sseEndpoints are where a legacy SSE stream may be: the link itself, as the
// specification suggests, then the link's /sse, where the toolgate edge serves it.
func sseEndpoints(link *url.URL) []string {
	out := []string{link.String()}
	if !strings.HasSuffix(link.Path, "/sse") {
		u := *link
		u.Path = strings.TrimSuffix(u.Path, "/") + "/sse"
		u.RawPath = ""
		out = append(out, u.String())
	}
	return out
}

// pumpLocal forwards the client's messages until its input ends.
func (r *relay) pumpLocal(ctx context.Context, wg *sync.WaitGroup) error {
	for {
		msg, err := r.local.Read(ctx)
		if err != nil {
			return r.localEnded(ctx, err)
		}
		r.observeLocal(msg)
		if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
			// A call's POST may be held open until its result is ready, so it must
			// not hold up the messages behind it (a cancellation, say). Other
			// messages go in order: a server expects notifications/initialized
			// before the calls that follow it.
			wg.Go(func() {
				if err := r.remote.Write(ctx, req); err != nil && ctx.Err() == nil {
					r.reject(ctx, req, err)
				}
			})
			continue
		}
		if err := r.remote.Write(ctx, msg); err != nil && ctx.Err() == nil {
			r.log.Warn("a message to the link was not delivered", "error", r.redact.err(err).Error())
		}
	}
}

// pumpRemote forwards the server's messages until the connection ends.
func (r *relay) pumpRemote(ctx context.Context, wg *sync.WaitGroup) error {
	for {
		msg, err := r.remote.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, io.EOF) {
				return errors.New("connect: the link closed the session")
			}
			return fmt.Errorf("connect: the link's connection failed: %w", r.redact.err(err))
		}
		if version, ok := r.initialized(msg); ok {
			r.headers.setVersion(version)
			if r.streamable && version < protocolVersionStateless {
				sessionID := r.remote.SessionID()
				wg.Go(func() { r.listen(ctx, sessionID) })
			}
		}
		if err := r.local.Write(ctx, msg); err != nil {
			return r.localEnded(ctx, err)
		}
	}
}

// observeLocal notes the client's initialize request.
func (r *relay) observeLocal(msg jsonrpc.Message) {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() && req.Method == "initialize" {
		r.mu.Lock()
		r.initID = req.ID
		r.mu.Unlock()
	}
}

// initialized reports the protocol version when msg answers the client's
// initialize request.
func (r *relay) initialized(msg jsonrpc.Message) (string, bool) {
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error != nil {
		return "", false
	}
	r.mu.Lock()
	match := r.initID.IsValid() && resp.ID == r.initID
	r.mu.Unlock()
	if !match {
		return "", false
	}
	var result struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(resp.Result, &result); err != nil || result.ProtocolVersion == "" {
		return "", false
	}
	return result.ProtocolVersion, true
}

// reject answers a call that could not be delivered, so that the client does not
// wait for it forever. A JSON-RPC error the server sent is passed on as it is.
func (r *relay) reject(ctx context.Context, msg jsonrpc.Message, err error) {
	req, ok := msg.(*jsonrpc.Request)
	if !ok || !req.IsCall() {
		r.log.Warn("a message to the link was not delivered", "error", r.redact.err(err).Error())
		return
	}
	wire := &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: r.redact.err(err).Error()}
	var remote *jsonrpc.Error
	if errors.As(err, &remote) && remote.Code != codeRejected {
		wire = remote
	}
	if werr := r.local.Write(ctx, &jsonrpc.Response{ID: req.ID, Error: wire}); werr != nil {
		r.log.Warn("answering the client failed", "error", werr.Error())
	}
}

// codeRejected is the code of the SDK's own "rejected by transport" error, which
// says nothing the wrapped error does not.
const codeRejected = -32005

// headerTransport adds the user's headers to every request, and the negotiated
// protocol version where the SDK would add it itself had its own client
// initialized the session. It remembers the status of the last POST, which tells
// a link that refuses Streamable HTTP from one that refuses the caller.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header

	mu       sync.Mutex
	version  string
	postCode int
}

const protocolVersionHeader = "Mcp-Protocol-Version"

func (t *headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, vs := range t.header {
		if req.Header.Get(k) == "" {
			req.Header[k] = vs
		}
	}
	t.mu.Lock()
	version := t.version
	t.mu.Unlock()
	if version != "" && req.Header.Get(protocolVersionHeader) == "" {
		req.Header.Set(protocolVersionHeader, version)
	}
	resp, err := t.base.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost {
		t.mu.Lock()
		t.postCode = resp.StatusCode
		t.mu.Unlock()
	}
	return resp, err
}

func (t *headerTransport) setVersion(v string) {
	t.mu.Lock()
	t.version = v
	t.mu.Unlock()
}

func (t *headerTransport) lastPostStatus() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.postCode
}

// redactor hides the link's secret path in text meant for logs and errors.
type redactor struct{ secrets []string }

func newRedactor(link *url.URL) redactor {
	var r redactor
	for _, p := range []string{link.EscapedPath(), link.Path} {
		p = strings.TrimSuffix(strings.TrimSuffix(p, "/"), "/sse")
		if strings.Trim(p, "/") != "" {
			r.secrets = append(r.secrets, p)
		}
	}
	if link.RawQuery != "" {
		r.secrets = append(r.secrets, link.RawQuery)
	}
	return r
}

func (r redactor) string(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "/<link>")
	}
	return s
}

// err rewrites err's text without the secret.
func (r redactor) err(err error) error {
	return errors.New(r.string(err.Error()))
}

// listenRetries bounds reconnections of the standalone stream without progress.
const listenRetries = 5

// listen holds the standalone GET stream of a Streamable HTTP session open, so
// that messages the server sends outside any request (tools/list_changed, say)
// reach the client. The SDK opens this stream only for sessions its own client
// initialized, and here the client is at the other end of stdin.
func (r *relay) listen(ctx context.Context, sessionID string) {
	lastID := ""
	failures := 0
	for ctx.Err() == nil {
		progressed, done := r.listenOnce(ctx, sessionID, &lastID)
		if done || ctx.Err() != nil {
			return
		}
		if progressed {
			failures = 0
		} else if failures++; failures > listenRetries {
			r.log.Warn("the link's event stream keeps failing; server-initiated messages outside requests are no longer relayed")
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

// listenOnce reads one GET stream. done is set when the server offers no stream.
func (r *relay) listenOnce(ctx context.Context, sessionID string, lastID *string) (progressed, done bool) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.link.String(), nil)
	if err != nil {
		return false, true
	}
	req.Header.Set("Accept", "text/event-stream")
	if sessionID != "" {
		req.Header.Set("Mcp-Session-Id", sessionID)
	}
	if *lastID != "" {
		req.Header.Set("Last-Event-ID", *lastID)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	ctype, _, _ := strings.Cut(resp.Header.Get("Content-Type"), ";")
	if resp.StatusCode >= 400 && resp.StatusCode < 500 || resp.StatusCode < 300 && strings.TrimSpace(ctype) != "text/event-stream" {
		// 405 is how a server says it offers no such stream; some say it otherwise.
		return false, true
	}
	if resp.StatusCode >= 300 {
		return false, false
	}
	for ev, err := range events(resp.Body) {
		if err != nil {
			break
		}
		if ev.id != "" {
			*lastID = ev.id
			progressed = true
		}
		if len(ev.data) == 0 || ev.name != "" && ev.name != "message" {
			continue
		}
		msg, err := jsonrpc.DecodeMessage(ev.data)
		if err != nil {
			r.log.Warn("the link sent a message that is not JSON-RPC", "error", err.Error())
			continue
		}
		progressed = true
		if err := r.local.Write(ctx, msg); err != nil {
			return progressed, true
		}
	}
	return progressed, false
}
