package mcphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Config says which endpoint to reach, and how.
type Config struct {
	// Endpoint is the MCP endpoint's URL.
	Endpoint string
	// Header is sent with every request (an Authorization header, say).
	Header http.Header
	// HTTPClient makes the requests; nil means http.DefaultClient.
	HTTPClient *http.Client
	// Logger gets what the connection has to say; nil discards it.
	Logger *slog.Logger
}

func (c Config) client() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return http.DefaultClient
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// StatusError is an endpoint's answer to a message that is an HTTP error without a
// JSON-RPC message in its body: the endpoint refused the request before reading it
// as MCP (no such endpoint, a proxy, a transport it does not speak).
type StatusError struct {
	Status int
	Body   string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("%d %s", e.Status, http.StatusText(e.Status))
	if b := strings.TrimSpace(e.Body); b != "" {
		msg += ": " + b
	}
	return msg
}

// resumeAttempts bounds how often a call's broken stream is resumed in a row
// without a new event.
const resumeAttempts = 5

// defaultRetry is the reconnection delay when the server names none.
const defaultRetry = time.Second

// Streamable is a connection over the Streamable HTTP transport, as mcp.Connection
// has it: every message written is POSTed, and what the endpoint answers (a JSON
// message, or an event stream of them) is read with Read, as are the messages of the
// session's standalone stream, which it holds once the session is initialized.
//
// No answer of the endpoint breaks it. An HTTP error that carries a JSON-RPC error
// for a call is read like any answer; one that carries none fails that Write with a
// *StatusError. A session the endpoint ended (404) is forgotten, so the client can
// initialize a new one on the same connection.
//
// Messages of revision 2026-07-28 get the headers that revision requires (the
// version, Mcp-Method, Mcp-Name, and the Mcp-Param headers of the arguments the
// tool's schema mirrors, as a tools/list through the connection showed it); the
// client's notifications/cancelled, which that revision replaces with the closing of
// the request's stream, closes it.
type Streamable struct {
	cfg      Config
	log      *slog.Logger
	incoming chan jsonrpc.Message
	ctx      context.Context // ends at Close: every request and stream
	stop     context.CancelFunc
	wg       sync.WaitGroup

	mu        sync.Mutex
	sessionID string
	version   string     // negotiated with initialize, or the last 2026-07-28 request's
	initID    jsonrpc.ID // the initialize request whose answer names the version
	listening bool
	calls     map[string]context.CancelFunc // calls in flight, by idKey
	closed    bool
	// The tools/list requests in flight, by idKey, and what their answers said of
	// each tool's arguments mirrored in headers, by tool name.
	lists  map[string]bool
	params map[string][]ParamBinding
}

// NewStreamable returns a connection to cfg.Endpoint; nothing is sent until the
// first Write.
func NewStreamable(cfg Config) *Streamable {
	ctx, stop := context.WithCancel(context.Background())
	return &Streamable{
		cfg: cfg, log: cfg.logger(), incoming: make(chan jsonrpc.Message, 64),
		ctx: ctx, stop: stop, calls: map[string]context.CancelFunc{},
		lists: map[string]bool{}, params: map[string][]ParamBinding{},
	}
}

// SessionID is the session the endpoint gave, or "".
func (c *Streamable) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

// Version is the protocol revision initialize negotiated, or "".
func (c *Streamable) Version() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version
}

// Read returns the next message from the endpoint; io.EOF once the connection is
// closed.
func (c *Streamable) Read(ctx context.Context) (jsonrpc.Message, error) {
	select {
	case m := <-c.incoming:
		return m, nil
	case <-c.ctx.Done():
		return nil, io.EOF
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close ends the session (DELETE) and every stream and request of the connection.
func (c *Streamable) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	session, version := c.sessionID, c.version
	c.mu.Unlock()
	if session != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.cfg.Endpoint, nil)
		if err == nil {
			c.setHeaders(req.Header, session, version, nil)
			if resp, err := c.cfg.client().Do(req); err == nil {
				resp.Body.Close()
			}
		}
		cancel()
	}
	c.stop()
	c.wg.Wait()
	return nil
}

// Write sends msg. For a call it returns once the endpoint has answered it (or gave
// up on it); the answer, and whatever came before it, is read with Read. It fails
// when the message could not be sent, or the endpoint refused it without a JSON-RPC
// error (*StatusError).
func (c *Streamable) Write(ctx context.Context, msg jsonrpc.Message) error {
	req, isReq := msg.(*jsonrpc.Request)
	version := c.messageVersion(msg)
	if isReq && !req.IsCall() && req.Method == "notifications/cancelled" && IsStateless(version) {
		c.cancelCall(req.Params)
		return nil
	}
	if isReq && req.IsCall() && req.Method == "initialize" {
		// A new session: the old one, if any, is the client's to have ended.
		c.mu.Lock()
		c.sessionID, c.version, c.initID = "", "", req.ID
		c.mu.Unlock()
		version = ""
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("mcphttp: encode: %w", err)
	}
	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.ctx, cancel)
	defer stop()
	var call *jsonrpc.Request
	if isReq && req.IsCall() {
		call = req
		defer c.track(req, cancel)()
	}

	httpReq, err := c.newPost(reqCtx, data, version, msg)
	if err != nil {
		return err
	}
	resp, err := c.cfg.client().Do(httpReq)
	if err != nil {
		if errors.Is(reqCtx.Err(), context.Canceled) && ctx.Err() == nil && c.ctx.Err() == nil {
			return nil // the client cancelled the call: no answer is owed
		}
		return fmt.Errorf("mcphttp: POST: %w", err)
	}
	defer resp.Body.Close()
	return c.answer(reqCtx, resp, msg, call)
}

// track keeps call's cancel while it runs, for a cancellation of it to stop its POST,
// and marks a tools/list, whose answer is read for the tools' headers; the function
// it returns forgets the call.
func (c *Streamable) track(call *jsonrpc.Request, cancel context.CancelFunc) (forget func()) {
	key := IDKey(call.ID)
	c.mu.Lock()
	c.calls[key] = cancel
	if call.Method == "tools/list" {
		c.lists[key] = true
	}
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.calls, key)
		delete(c.lists, key)
		c.mu.Unlock()
	}
}

// newPost is the POST that sends msg, encoded as data.
func (c *Streamable) newPost(ctx context.Context, data []byte, version string, msg jsonrpc.Message) (*http.Request, error) {
	httpReq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Endpoint, bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("mcphttp: %w", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json, text/event-stream")
	c.setHeaders(httpReq.Header, c.SessionID(), version, msg)
	return httpReq, nil
}

// answer reads the endpoint's answer to the POST of msg (call when msg is a call):
// an initialize's session, a refusal, the answer itself, as JSON or an event stream.
// Once the client said it is initialized, the connection listens for what the
// endpoint sends on its own.
func (c *Streamable) answer(ctx context.Context, resp *http.Response, msg jsonrpc.Message, call *jsonrpc.Request) error {
	if call != nil && call.Method == "initialize" && resp.StatusCode < 300 {
		if id := resp.Header.Get(HeaderSessionID); id != "" {
			c.mu.Lock()
			c.sessionID = id
			c.mu.Unlock()
		}
	}
	if resp.StatusCode >= 300 {
		return c.refused(resp, call)
	}
	ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case ctype == "text/event-stream":
		return c.callStream(ctx, resp, call)
	case ctype == "application/json":
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("mcphttp: reading the answer: %w", err)
		}
		if len(bytes.TrimSpace(body)) == 0 {
			break
		}
		m, err := jsonrpc.DecodeMessage(body)
		if err != nil {
			return fmt.Errorf("mcphttp: the endpoint answered something that is not JSON-RPC: %w", err)
		}
		c.deliver(m)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && !req.IsCall() && req.Method == "notifications/initialized" {
		c.listen()
	}
	return nil
}

// refused handles an HTTP error: the JSON-RPC error in its body is read as the
// call's answer (with the call's id if the endpoint gave none); without one it is a
// *StatusError. A 404 for a session means the endpoint ended it.
func (c *Streamable) refused(resp *http.Response, call *jsonrpc.Request) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode == http.StatusNotFound {
		c.mu.Lock()
		if c.sessionID != "" {
			c.log.Info("the endpoint ended the session; the client may initialize a new one")
			c.sessionID, c.version = "", ""
		}
		c.mu.Unlock()
	}
	if m, err := jsonrpc.DecodeMessage(body); err == nil {
		if r, ok := m.(*jsonrpc.Response); ok && r.Error != nil {
			if call == nil {
				c.log.Warn("the endpoint refused a message", "status", resp.StatusCode, "error", r.Error.Error())
				return nil
			}
			c.deliver(&jsonrpc.Response{ID: call.ID, Error: r.Error})
			return nil
		}
	}
	// A JSON-RPC error without an id fails DecodeMessage; read its error alone.
	var bare struct {
		Error *jsonrpc.Error `json:"error"`
	}
	if call != nil && json.Unmarshal(body, &bare) == nil && bare.Error != nil {
		c.deliver(&jsonrpc.Response{ID: call.ID, Error: bare.Error})
		return nil
	}
	return &StatusError{Status: resp.StatusCode, Body: string(body)}
}

// callStream reads the event stream answering a POST. A call's stream that breaks
// before its answer is resumed with Last-Event-ID, as the transport allows, where the
// endpoint gave event ids and a session.
func (c *Streamable) callStream(ctx context.Context, resp *http.Response, call *jsonrpc.Request) error {
	lastID, retry, answered := c.readStream(resp.Body, call)
	for attempt := 0; call != nil && !answered; {
		if lastID == "" || c.SessionID() == "" || ctx.Err() != nil {
			if ctx.Err() != nil {
				return nil
			}
			return errors.New("mcphttp: the call's stream ended before its answer")
		}
		if attempt++; attempt > resumeAttempts {
			return fmt.Errorf("mcphttp: the call's stream broke %d times before its answer", resumeAttempts)
		}
		select {
		case <-time.After(retry):
		case <-ctx.Done():
			return nil
		}
		r, err := c.get(ctx, lastID)
		if err != nil {
			continue
		}
		if r.StatusCode >= 300 {
			r.Body.Close()
			return fmt.Errorf("mcphttp: resuming the call's stream: %d %s", r.StatusCode, http.StatusText(r.StatusCode))
		}
		var got string
		got, retry, answered = c.readStream(r.Body, call)
		r.Body.Close()
		if got != lastID && got != "" {
			lastID, attempt = got, 0
		}
	}
	return nil
}

// readStream delivers the messages of one event stream and returns the id of the
// last event, the reconnection delay, and whether call's answer came.
func (c *Streamable) readStream(body io.Reader, call *jsonrpc.Request) (lastID string, retry time.Duration, answered bool) {
	retry = defaultRetry
	for ev, err := range events(body) {
		if err != nil {
			break
		}
		if ev.id != "" {
			lastID = ev.id
		}
		if ev.retry > 0 {
			retry = ev.retry
		}
		if len(bytes.TrimSpace(ev.data)) == 0 || ev.name != "" && ev.name != "message" {
			continue
		}
		m, err := jsonrpc.DecodeMessage(ev.data)
		if err != nil {
			c.log.Warn("the endpoint sent an event that is not JSON-RPC", "error", err.Error())
			continue
		}
		c.deliver(m)
		if r, ok := m.(*jsonrpc.Response); ok && call != nil && r.ID == call.ID {
			answered = true
		}
	}
	return lastID, retry, answered
}

// deliver hands a message to Read, noting the version initialize negotiated and the
// arguments a tools/list says its tools mirror in headers.
func (c *Streamable) deliver(m jsonrpc.Message) {
	if r, ok := m.(*jsonrpc.Response); ok && r.Error == nil {
		c.mu.Lock()
		if c.lists[IDKey(r.ID)] {
			var res struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if json.Unmarshal(r.Result, &res) == nil {
				for _, t := range res.Tools {
					if b := ParamBindings(t.InputSchema); b != nil {
						c.params[t.Name] = b
					} else {
						delete(c.params, t.Name)
					}
				}
			}
		}
		if c.initID.IsValid() && r.ID == c.initID {
			var res struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(r.Result, &res) == nil {
				c.version = res.ProtocolVersion
			}
			c.initID = jsonrpc.ID{}
		}
		c.mu.Unlock()
	}
	select {
	case c.incoming <- m:
	case <-c.ctx.Done():
	}
}

// messageVersion is the revision a message is sent at: the one its _meta names
// (2026-07-28 requests carry it), else the session's. Without a session, a client
// that sent a request of 2026-07-28 speaks that revision: its notifications and
// pings, which carry no _meta, are of it too.
func (c *Streamable) messageVersion(msg jsonrpc.Message) string {
	if req, ok := msg.(*jsonrpc.Request); ok {
		if v := MetaVersion(req.Params); v != "" {
			if IsStateless(v) {
				c.mu.Lock()
				if c.sessionID == "" {
					c.version = v
				}
				c.mu.Unlock()
			}
			return v
		}
	}
	return c.Version()
}

// setHeaders sets the configured headers and those of the transport.
func (c *Streamable) setHeaders(h http.Header, session, version string, msg jsonrpc.Message) {
	for k, vs := range c.cfg.Header {
		h[k] = vs
	}
	if session != "" && !IsStateless(version) {
		h.Set(HeaderSessionID, session)
	}
	if version != "" {
		h.Set(HeaderProtocolVersion, version)
	}
	if req, ok := msg.(*jsonrpc.Request); ok && IsStateless(version) {
		h.Set(HeaderMethod, req.Method)
		if name, ok := Name(req.Method, req.Params); ok {
			h.Set(HeaderName, EncodeHeaderValue(name))
			if req.Method == "tools/call" {
				c.mu.Lock()
				bindings := c.params[name]
				c.mu.Unlock()
				SetParamHeaders(h, bindings, req.Params)
			}
		}
	}
}

// cancelCall closes the request of the call a notifications/cancelled names.
func (c *Streamable) cancelCall(params json.RawMessage) {
	var p struct {
		RequestID any `json:"requestId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	id, err := jsonrpc.MakeID(p.RequestID)
	if err != nil {
		return
	}
	c.mu.Lock()
	cancel := c.calls[IDKey(id)]
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// get opens the session's stream: the standalone one, or with lastID the one that
// event belongs to.
func (c *Streamable) get(ctx context.Context, lastID string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.cfg.Endpoint, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	c.setHeaders(req.Header, c.SessionID(), c.Version(), nil)
	if lastID != "" {
		req.Header.Set(HeaderLastEventID, lastID)
	}
	return c.cfg.client().Do(req)
}

// listenRetries bounds reconnections of the standalone stream without progress.
const listenRetries = 5

// listen holds the session's standalone stream open, so that what the endpoint
// sends outside any request (list changes, its own requests) is read, resuming it
// where it broke.
func (c *Streamable) listen() {
	c.mu.Lock()
	if c.listening || c.sessionID == "" || IsStateless(c.version) || c.closed {
		c.mu.Unlock()
		return
	}
	c.listening = true
	session := c.sessionID
	c.mu.Unlock()
	c.wg.Go(func() {
		defer func() {
			c.mu.Lock()
			c.listening = false
			c.mu.Unlock()
		}()
		lastID := ""
		failures := 0
		for c.ctx.Err() == nil && c.SessionID() == session {
			resp, err := c.get(c.ctx, lastID)
			progressed := false
			if err == nil {
				ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
				if resp.StatusCode >= 400 && resp.StatusCode < 500 || resp.StatusCode < 300 && ctype != "text/event-stream" {
					// 405 is how an endpoint says it offers no such stream; some
					// say it otherwise.
					resp.Body.Close()
					return
				}
				if resp.StatusCode < 300 {
					var got string
					got, _, _ = c.readStream(resp.Body, nil)
					if got != "" && got != lastID {
						lastID, progressed = got, true
					}
				}
				resp.Body.Close()
			}
			if progressed {
				failures = 0
			} else if failures++; failures > listenRetries {
				c.log.Warn("the session's stream keeps failing; what the endpoint sends outside requests is no longer read")
				return
			}
			select {
			case <-c.ctx.Done():
			case <-time.After(time.Duration(max(failures, 1)) * defaultRetry):
			}
		}
	})
}

// IDKey names a JSON-RPC id as a string; its type matters (1 and "1" are
// different ids).
func IDKey(id jsonrpc.ID) string {
	switch v := id.Raw().(type) {
	case string:
		return "s:" + v
	case int64:
		return fmt.Sprintf("n:%d", v)
	}
	return fmt.Sprintf("?:%v", id.Raw())
}

var _ mcp.Connection = (*Streamable)(nil)
