package mcpbridge

//lint:file-ignore SA1019 log messages are forwarded for the revisions that have them (deprecated only from 2026-07-28).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/nats-io/nuid"
)

// The SDK hands a server's notifications to its handlers on a goroutine of their own,
// but gives a response to the waiting caller at once: a tools/call can return before
// the progress and log notifications the server sent ahead of its result have been
// handled, and those would be lost to the caller. So the bridge reads them itself, in
// the order they arrive, before the SDK does: from a stdio server's connection, and
// from the bytes of an HTTP server's event streams.

// observe forwards a notification of s's server to the call it belongs to.
func (b *Bridge) observe(s *session, msg jsonrpc.Message) {
	if resp, ok := msg.(*jsonrpc.Response); ok {
		s.raw.received(resp)
		return
	}
	req, ok := msg.(*jsonrpc.Request)
	if !ok || req.IsCall() {
		return
	}
	switch req.Method {
	case "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(req.Params, &p) == nil {
			b.onProgress(&p)
		}
	case "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(req.Params, &p) == nil {
			b.onLog(s, &p, req.Params)
		}
	case "notifications/cancelled":
		// The SDK's.
	case "notifications/tools/list_changed":
		// A shared session's list makes the tool's methods, whose changes edges
		// announce; a client's session's list is what its client sees (SessionTools).
		if s.client != "" {
			b.toClient(s, req.Method, req.Params)
		}
	default:
		// Anything else (resource updates, the other lists' changes, the end of a
		// URL elicitation) is for the client of a client's session, as it came.
		if s.client != "" && strings.HasPrefix(req.Method, "notifications/") {
			b.toClient(s, req.Method, req.Params)
		}
	}
}

// observed wraps a transport so that see gets each message its connection reads,
// and sent each it writes; opened gets the connection, for requests the SDK cannot
// make (see rawCall).
type observed struct {
	mcp.Transport
	see    func(jsonrpc.Message)
	sent   func(context.Context, jsonrpc.Message)
	opened func(*observedConn)
}

func (t observed) Connect(ctx context.Context) (mcp.Connection, error) {
	oc := &observedConn{see: t.see, sent: t.sent, waits: map[string]*rawWait{}, closed: make(chan struct{})}
	if st, ok := t.Transport.(*stdioTransport); ok {
		st.divert = oc.divert
	}
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	oc.Connection = c
	if t.opened != nil {
		t.opened(oc)
	}
	return oc, nil
}

type observedConn struct {
	mcp.Connection
	see  func(jsonrpc.Message)
	sent func(context.Context, jsonrpc.Message)

	mu    sync.Mutex
	waits map[string]*rawWait // the bridge's own requests, by id

	closed  chan struct{} // closed once a read failed: no response comes any more
	closing sync.Once
}

func (c *observedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	c.sent(ctx, msg)
	return c.Connection.Write(ctx, msg)
}

func (c *observedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	for {
		msg, err := c.Connection.Read(ctx)
		if err != nil {
			c.closing.Do(func() { close(c.closed) })
			return msg, err
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			if id, ok := resp.ID.Raw().(string); ok && strings.HasPrefix(id, rawIDPrefix) {
				c.mu.Lock()
				w := c.waits[id]
				delete(c.waits, id)
				c.mu.Unlock()
				if w != nil {
					w.ch <- resp // buffered for one
				}
				continue // the bridge's own: the SDK never asked
			}
		}
		c.see(msg)
		return msg, nil
	}
}

// rawIDPrefix starts the ids of the bridge's own requests; the SDK's ids are numbers.
const rawIDPrefix = "tg-raw-"

// rawWait is a request of the bridge's own awaiting its response.
type rawWait struct {
	ch chan *jsonrpc.Response // buffered for one
	// early: the response may reach the request as soon as it is read (divert),
	// ahead of the messages read before it, which then go on to the SDK: nothing the
	// server sends about the request (progress, log messages) is followed.
	early bool
}

// divert hands a response read from a stdio server to the request of the bridge's own
// awaiting it, if that takes it early, and reports whether it did.
func (c *observedConn) divert(resp *jsonrpc.Response) bool {
	id, _ := resp.ID.Raw().(string)
	c.mu.Lock()
	w := c.waits[id]
	if w == nil || !w.early {
		c.mu.Unlock()
		return false
	}
	delete(c.waits, id)
	c.mu.Unlock()
	w.ch <- resp
	return true
}

// rawCall makes a request on the connection, with params as they are, and returns the
// server's result as it is, which the SDK never sees: a request the SDK has no method
// for (the tasks of 2025-11-25), or one whose result the bridge passes on untouched
// (tools/call). With early, nothing the server sends about the request before its
// response is followed, so the response may be taken as soon as it is read.
func (c *observedConn) rawCall(ctx context.Context, method string, params json.RawMessage, early bool) (json.RawMessage, error) {
	id := rawIDPrefix + nuid.Next()
	jid, err := jsonrpc.MakeID(id)
	if err != nil {
		return nil, err
	}
	ch := make(chan *jsonrpc.Response, 1)
	c.mu.Lock()
	c.waits[id] = &rawWait{ch: ch, early: early}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waits, id)
		c.mu.Unlock()
	}()
	if err := c.Connection.Write(ctx, &jsonrpc.Request{ID: jid, Method: method, Params: params}); err != nil {
		return nil, err
	}
	answered := func(resp *jsonrpc.Response) (json.RawMessage, error) {
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	}
	select {
	case resp := <-ch:
		return answered(resp)
	case <-c.closed:
		select {
		case resp := <-ch: // read before the connection failed
			return answered(resp)
		default:
			return nil, fmt.Errorf("%s: the connection to the server closed before its answer", method)
		}
	case <-ctx.Done():
		_ = c.Connection.Write(context.WithoutCancel(ctx), &jsonrpc.Request{Method: "notifications/cancelled",
			Params: json.RawMessage(fmt.Sprintf(`{"requestId":%q,"reason":"the caller left"}`, id))})
		return nil, ctx.Err()
	}
}

// httpTransport is the round tripper of one session with a remote server: it adds the
// configured headers, and shows see the messages of every event stream the server
// answers with, as the SDK reads them. (A Streamable HTTP connection cannot be
// wrapped like a stdio one: the SDK needs to reach the connection itself.)
type httpTransport struct {
	header http.Header
	base   http.RoundTripper
	see    func(jsonrpc.Message)
	sent   func(context.Context, jsonrpc.Message)
	// refused is told of a 401 or 403 answer, for a server that requires OAuth.
	refused func(*http.Response)
}

func (t httpTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			req.Header[k] = vs
		}
	}
	wantsRaw := req.Context().Value(rawKey{}) != nil
	if wantsRaw && req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			data, err := io.ReadAll(io.LimitReader(body, maxEvent))
			body.Close()
			if msg, derr := jsonrpc.DecodeMessage(data); err == nil && derr == nil {
				t.sent(req.Context(), msg)
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	if t.refused != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
		t.refused(resp)
	}
	switch ct := resp.Header.Get("Content-Type"); {
	case strings.HasPrefix(ct, "text/event-stream"):
		resp.Body = &eventTee{ReadCloser: resp.Body, see: t.see}
	case wantsRaw && strings.HasPrefix(ct, "application/json"):
		resp.Body = &jsonTee{ReadCloser: resp.Body, see: t.see}
	}
	return resp, err
}

// eventTee parses the server-sent events passing through it. A message is seen when
// the blank line that ends its event passes, before the reader gets those bytes.
type eventTee struct {
	io.ReadCloser
	see func(jsonrpc.Message)

	line  []byte // the line being read
	data  []byte // the data of the event being read
	event string
}

// maxEvent bounds what the tee keeps of one event; a larger one is not looked at
// (progress and log messages are small).
const maxEvent = 1 << 20

func (t *eventTee) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	for _, c := range p[:n] {
		if c != '\n' {
			if len(t.line) < maxEvent {
				t.line = append(t.line, c)
			}
			continue
		}
		t.endLine(bytes.TrimSuffix(t.line, []byte("\r")))
		t.line = t.line[:0]
	}
	return n, err
}

func (t *eventTee) endLine(line []byte) {
	if len(line) == 0 {
		if len(t.data) > 0 && (t.event == "" || t.event == "message") && isNotification(t.data) {
			if msg, err := jsonrpc.DecodeMessage(t.data); err == nil {
				t.see(msg)
			}
		}
		t.data, t.event = t.data[:0], ""
		return
	}
	field, value, _ := bytes.Cut(line, []byte(":"))
	value = bytes.TrimPrefix(value, []byte(" "))
	switch string(field) {
	case "data":
		if len(t.data) > 0 {
			t.data = append(t.data, '\n')
		}
		if len(t.data)+len(value) <= maxEvent {
			t.data = append(t.data, value...)
		}
	case "event":
		t.event = string(value)
	}
}

// isNotification is a cheap look for what observe handles, before decoding: the
// notifications, and the responses whose raw results may be wanted.
func isNotification(data []byte) bool {
	return bytes.Contains(data, []byte(`"notifications/`)) || bytes.Contains(data, []byte(`"result"`))
}
