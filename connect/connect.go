// Package connect serves MCP on a local stream (stdin and stdout) and relays every
// message to a remote MCP link, for clients that can only start stdio servers. It
// relays JSON-RPC messages as they are, both ways, so requests, notifications and
// server-initiated requests (sampling, elicitation) pass through whatever the remote
// server supports. The link is reached over Streamable HTTP, or legacy HTTP+SSE when
// the link refuses Streamable HTTP.
package connect

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcphttp"
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
		client: cfg.HTTPClient,
		header: cfg.Header,
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
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
	link   *url.URL
	redact redactor
	log    *slog.Logger
	client *http.Client
	header http.Header

	local  mcp.Connection
	remote mcp.Connection
}

func (r *relay) run(ctx context.Context, cancel context.CancelFunc) error {
	first, err := r.local.Read(ctx)
	if err != nil {
		return r.localEnded(ctx, err)
	}
	cfg := mcphttp.Config{Endpoint: r.link.String(), Header: r.header, HTTPClient: r.client, Logger: r.log}
	// A legacy SSE stream may be at the link itself, as the specification suggests,
	// or at the link's /sse, where the toolgate edge serves it.
	var legacy bool
	r.remote, legacy, err = mcphttp.Open(ctx, cfg, first, sseEndpoints(r.link)...)
	if err != nil {
		r.reject(ctx, first, err)
		return fmt.Errorf("connect: %w", r.redact.err(err))
	}
	if legacy {
		r.log.Info("relaying over legacy SSE: the link refused Streamable HTTP")
	}

	var wg sync.WaitGroup
	defer func() {
		cancel()
		r.remote.Close()
		wg.Wait()
	}()
	remoteDone := make(chan error, 1)
	wg.Go(func() { remoteDone <- r.pumpRemote(ctx) })
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

// sseEndpoints are where a legacy SSE stream may be: the link itself, then the
// link's /sse.
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

// pumpLocal forwards the client's messages until its input ends. A message the
// link does not take fails alone: a call is answered with the error, anything else
// is logged, and the relay goes on.
func (r *relay) pumpLocal(ctx context.Context, wg *sync.WaitGroup) error {
	for {
		msg, err := r.local.Read(ctx)
		if err != nil {
			return r.localEnded(ctx, err)
		}
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

// pumpRemote forwards the link's messages until the connection ends.
func (r *relay) pumpRemote(ctx context.Context) error {
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
		if err := r.local.Write(ctx, msg); err != nil {
			return r.localEnded(ctx, err)
		}
	}
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
