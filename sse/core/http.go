package core

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// Guard applies the checks every MCP request passes before anything else: DNS
// rebinding protection (Host on a loopback listener, Origin always) and shutdown.
func (s *Server) Guard(w http.ResponseWriter, r *http.Request) bool {
	if onLoopback(r) && !s.hostAllowed(r.Host) {
		s.Refuse(w, http.StatusForbidden, fmt.Sprintf("Forbidden: host %q is not served here", r.Host))
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !s.originAllowed(o, r.Host) {
		s.Refuse(w, http.StatusForbidden, fmt.Sprintf("Forbidden: origin %q is not allowed", o))
		return false
	}
	return !s.refuseIfClosing(w)
}

// onLoopback reports whether the request came in on a loopback address, where a
// browser tricked by DNS rebinding would reach it.
func onLoopback(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return false
	}
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

func (s *Server) hostAllowed(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
	}
	name = strings.Trim(strings.ToLower(name), "[]")
	switch name {
	case "localhost", "127.0.0.1", "::1":
		return true
	}
	for _, h := range s.cfg.AllowedHosts {
		if strings.EqualFold(h, host) || strings.EqualFold(h, name) {
			return true
		}
	}
	return false
}

func (s *Server) originAllowed(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false // includes "null", the origin of sandboxed and file pages
	}
	if strings.EqualFold(u.Host, host) {
		return true // the edge's own pages
	}
	for _, o := range s.cfg.AllowedOrigins {
		if o == "*" || strings.EqualFold(strings.TrimSuffix(o, "/"), strings.TrimSuffix(origin, "/")) {
			return true
		}
	}
	return false
}

// Refuse answers a request that is turned away before any JSON-RPC message is read:
// a JSON-RPC error without an id, as MCP allows.
func (s *Server) Refuse(w http.ResponseWriter, status int, msg string) {
	code := int64(jsonrpc.CodeInvalidRequest)
	WriteJSON(w, status, EncodeError(jsonrpc.ID{}, &jsonrpc.Error{Code: code, Message: msg}))
}

// jsonContentType is shared by every JSON response; a header value is never
// changed in place.
var jsonContentType = []string{"application/json"}

// WriteJSON answers with a JSON body and status.
func WriteJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteRPCError answers a request with err mapped to JSON-RPC, with the HTTP status
// the error calls for.
func WriteRPCError(w http.ResponseWriter, id jsonrpc.ID, err error) {
	WriteJSON(w, HTTPStatus(err), EncodeError(id, RPCError(err)))
}

// Accepts is what a POST's Accept header allows. Clients that list only one of the
// two types MCP asks for are served in that type; no Accept at all means either.
type Accepts struct{ JSON, Events bool }

// ParseAccept reads a request's Accept header.
func ParseAccept(h string) Accepts {
	switch h {
	case "application/json, text/event-stream", "text/event-stream, application/json":
		return Accepts{true, true} // what clients send, read without parsing
	}
	if strings.TrimSpace(h) == "" {
		return Accepts{true, true}
	}
	var a Accepts
	for _, part := range strings.Split(h, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		switch mt {
		case "application/json":
			a.JSON = true
		case "text/event-stream":
			a.Events = true
		case "*/*", "application/*":
			a.JSON = true
			a.Events = a.Events || mt == "*/*"
		case "text/*":
			a.Events = true
		}
	}
	return a
}

// maxMessage bounds a POSTed message: MaxMessageBytes, or, when the gateway keeps
// payloads, as much as a call's request may be (a tools/call carries one).
func (s *Server) maxMessage() int64 {
	if s.gw.Payloads() != nil {
		return max(s.cfg.MaxMessageBytes, s.gw.MaxPayload())
	}
	return s.cfg.MaxMessageBytes
}

// ReadMessage reads a POSTed JSON-RPC message of principal p to tool, answering the
// request itself when it is not one (415, 413, 400). A message past one bus message is
// read as it arrives, a tools/call's arguments into the payloads bucket (readLarge).
func (s *Server) ReadMessage(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) (Posted, bool) {
	if ct := r.Header.Get("Content-Type"); ct != "" && ct != "application/json" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			s.Refuse(w, http.StatusUnsupportedMediaType, fmt.Sprintf("Unsupported Media Type: %q; send application/json", ct))
			return Posted{}, false
		}
	}
	body := http.MaxBytesReader(w, r.Body, s.maxMessage())
	var posted Posted
	var err error
	if s.gw.Payloads() == nil {
		posted.Raw, err = io.ReadAll(body)
	} else {
		posted.Raw, posted.Args, err = s.readHead(r.Context(), body, p, tool)
	}
	if err != nil {
		s.readFailure(w, err)
		return Posted{}, false
	}
	posted.Raw = bytes.TrimSpace(posted.Raw)
	if len(posted.Raw) > 0 && posted.Raw[0] == '[' {
		WriteRPCError(w, jsonrpc.ID{}, invalidRequest("JSON-RPC batches are not supported: send one message per POST"))
		return Posted{}, false
	}
	if posted.Msg, err = decodeMessage(posted.Raw); err != nil {
		posted.Args.Release()
		WriteRPCError(w, jsonrpc.ID{}, parseError("Parse error: not a JSON-RPC 2.0 message: %v", err))
		return Posted{}, false
	}
	if req, ok := posted.Msg.(*jsonrpc.Request); posted.Args != nil && (!ok || req.Method != MethodToolsCall || !req.IsCall()) {
		// Only a tools/call is sent with its arguments stored; anything else is
		// held whole, as a message within the bound always was.
		if posted, err = s.wholeMessage(r.Context(), posted.Args); err != nil {
			s.readFailure(w, err)
			return Posted{}, false
		}
	}
	return posted, true
}

// readHead reads a message, whole when it fits one bus message, else by readLarge.
// What it holds grows with what arrived, never with the length a caller declared: a
// message is past one bus message once that much of it came.
func (s *Server) readHead(ctx context.Context, body io.Reader, p registry.Principal, tool string) ([]byte, *StoredArgs, error) {
	threshold := wire.PayloadThreshold(s.nc.MaxPayload())
	var head bytes.Buffer
	if _, err := head.ReadFrom(io.LimitReader(body, threshold+1)); err != nil {
		return nil, nil, err
	}
	if int64(head.Len()) <= threshold || bytes.HasPrefix(bytes.TrimSpace(head.Bytes()), []byte("[")) {
		rest, err := io.ReadAll(body) // the end, or a batch, held whole as before
		return append(head.Bytes(), rest...), nil, err
	}
	return s.readLarge(ctx, head.Bytes(), body, p, tool)
}

// wholeMessage is the message with its stored arguments read back into it, which
// are removed from the bucket.
func (s *Server) wholeMessage(ctx context.Context, args *StoredArgs) (Posted, error) {
	defer args.Release()
	raw, err := args.whole(ctx)
	if err != nil {
		return Posted{}, err
	}
	msg, err := decodeMessage(raw)
	return Posted{Raw: raw, Msg: msg}, err
}

// Answer writes a request's answer as JSON, or as a one-event stream to a client
// that takes only streams.
func (s *Server) Answer(w http.ResponseWriter, accept Accepts, id jsonrpc.ID, result []byte, err error) {
	var body []byte
	status := http.StatusOK
	if err != nil {
		body, status = EncodeError(id, RPCError(err)), HTTPStatus(err)
	} else {
		body = EncodeResult(id, result)
	}
	if accept.JSON || status != http.StatusOK {
		WriteJSON(w, status, body)
		return
	}
	_ = StartEvents(w, status).Event("", "message", body)
}
