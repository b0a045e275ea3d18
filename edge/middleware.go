package edge

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

// Keys of the values middleware leaves in a gin.Context.
const (
	ctxRequestID = "toolgate.request_id"
	ctxPrincipal = "toolgate.principal"
	ctxErrorCode = "toolgate.error_code"
	// The tool an MCP route serves.
	ctxMCPTool = "toolgate.mcp_tool"
)

func requestID(c *gin.Context) string { return c.GetString(ctxRequestID) }

func principal(c *gin.Context) registry.Principal {
	p, _ := c.Get(ctxPrincipal)
	pr, _ := p.(registry.Principal)
	return pr
}

// saneRequestID accepts a caller's request id only if it can travel as a NATS subject
// token and a log field unchanged: ASCII letters, digits, '-' and '_', at most 64.
func saneRequestID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch b := id[i]; {
		case b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z', b >= '0' && b <= '9', b == '-', b == '_':
		default:
			return false
		}
	}
	return true
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	id := [len("req_") + 2*len(b)]byte{'r', 'e', 'q', '_'}
	hex.Encode(id[len("req_"):], b[:])
	return string(id[:])
}

// withRequestID names every request: the caller's X-Request-Id when it is sane,
// otherwise a fresh one. The id is echoed in the response, set on the trace span, put
// in error envelopes and sent to the tool.
func withRequestID(c *gin.Context) {
	id := c.GetHeader(headerRequestID)
	if !saneRequestID(id) {
		id = newRequestID()
	}
	c.Set(ctxRequestID, id)
	c.Header(headerRequestID, id)
	c.Next()
}

// secretRoute reports whether a route pattern holds a secret (a link token) in its
// path, and so must not be logged or traced with the raw path: a link's, or its
// protected resource metadata's.
func secretRoute(c *gin.Context) bool {
	route := c.FullPath()
	return strings.Contains(route, ":link") || strings.HasPrefix(route, oauth.ResourceWellKnown) ||
		(route == "" && strings.HasPrefix(c.Request.URL.Path, "/mcp/"))
}

var tracer = otel.Tracer("github.com/toolgate/toolgate/edge")

// traceRequest runs each request in a server span named by its route pattern,
// continuing the caller's trace when it sends one. The span records the path only on
// routes whose path holds no secret (link tokens sit in paths). Without a tracer
// provider, which is the default, no span is started (see wire.Tracing); a caller's
// trace context still goes on to the tool.
func traceRequest(c *gin.Context) {
	r := c.Request
	ctx := r.Context()
	if len(r.Header["Traceparent"]) > 0 || len(r.Header["Baggage"]) > 0 {
		ctx = wire.Propagator.Extract(ctx, propagation.HeaderCarrier(r.Header))
		c.Request = r.WithContext(ctx)
	}
	if !wire.Tracing() { // no span to record: the caller's trace context goes on as it is
		c.Next()
		return
	}
	route := c.FullPath()
	name := r.Method + " " + route
	if route == "" {
		name = "HTTP " + r.Method + " route not found"
	}
	ctx, span := tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
	defer span.End()
	if span.IsRecording() {
		span.SetAttributes(requestAttributes(c)...)
	}
	c.Request = c.Request.WithContext(ctx)
	c.Next()
	if span.IsRecording() {
		status := c.Writer.Status()
		span.SetAttributes(semconv.HTTPResponseStatusCode(status), semconv.HTTPResponseBodySize(max(c.Writer.Size(), 0)))
		span.SetAttributes(principalAttributes(principal(c))...)
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	}
}

// principalAttributes name who the request was made for: the account, and the OAuth
// client and user a token names.
func principalAttributes(p registry.Principal) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	for k, v := range map[string]string{"toolgate.account": p.Account, "toolgate.oauth_client": p.Client, "toolgate.user": p.User} {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	return attrs
}

// requestAttributes are the HTTP server span's attributes: the semantic conventions'
// and the request id.
func requestAttributes(c *gin.Context) []attribute.KeyValue {
	r := c.Request
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	attrs := []attribute.KeyValue{
		semconv.HTTPRequestMethodKey.String(r.Method),
		semconv.URLScheme(scheme),
		semconv.ClientAddress(c.RemoteIP()),
		semconv.NetworkProtocolVersion(fmt.Sprintf("%d.%d", r.ProtoMajor, r.ProtoMinor)),
		attribute.String("toolgate.request_id", requestID(c)),
	}
	if route := c.FullPath(); route != "" {
		attrs = append(attrs, semconv.HTTPRoute(route))
	}
	if !secretRoute(c) {
		attrs = append(attrs, semconv.URLPath(r.URL.Path))
	}
	if host, port, err := net.SplitHostPort(r.Host); err == nil {
		attrs = append(attrs, semconv.ServerAddress(host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.ServerPort(n))
		}
	} else if r.Host != "" {
		attrs = append(attrs, semconv.ServerAddress(r.Host))
	}
	if host, port, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		attrs = append(attrs, semconv.NetworkPeerAddress(host))
		if n, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, semconv.NetworkPeerPort(n))
		}
	}
	if ua := r.UserAgent(); ua != "" {
		attrs = append(attrs, semconv.UserAgentOriginal(ua))
	}
	return attrs
}

// accessLog writes one slog line per request. It names the route pattern, never the
// raw path or query (link tokens sit in paths), and never headers or bodies (keys and
// parameters).
func (e *Edge) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	status := c.Writer.Status()
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("request_id", requestID(c)),
		slog.String("method", c.Request.Method),
		slog.String("route", c.FullPath()),
		slog.Int("status", status),
		slog.Int("bytes", max(c.Writer.Size(), 0)),
		// An integer: slog's JSON handler encodes a float through encoding/json.
		slog.Int64("duration_us", time.Since(start).Microseconds()),
		slog.String("remote", c.RemoteIP()), // the edge trusts no proxy's headers: the peer is the client
	)
	if p := principal(c); p.Account != "" {
		attrs = append(attrs, slog.String("account", p.Account))
		if p.Client != "" {
			attrs = append(attrs, slog.String("oauth_client", p.Client))
		}
		if p.User != "" {
			attrs = append(attrs, slog.String("user", p.User))
		}
	}
	if !secretRoute(c) {
		if tool := c.Param("tool"); tool != "" {
			attrs = append(attrs, slog.String("tool", tool))
		}
		if m := c.Param("method"); m != "" {
			attrs = append(attrs, slog.String("tool_method", m))
		}
	}
	if code := c.GetString(ctxErrorCode); code != "" {
		attrs = append(attrs, slog.String("code", code))
	}
	if sc := trace.SpanContextFromContext(c.Request.Context()); sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	level := slog.LevelInfo
	if status >= 500 && status != http.StatusBadGateway && status != http.StatusServiceUnavailable && status != http.StatusGatewayTimeout {
		level = slog.LevelError
	}
	e.log.LogAttrs(c.Request.Context(), level, "http request", attrs...)
}

// recoverPanic turns a handler's panic into a 500 envelope, if nothing was written
// yet, and logs it with its stack. http.ErrAbortHandler keeps its meaning: the
// connection is dropped.
func (e *Edge) recoverPanic(c *gin.Context) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
			panic(v)
		}
		e.log.ErrorContext(c.Request.Context(), "edge: handler panicked",
			"request_id", requestID(c), "route", c.FullPath(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
		if c.Writer.Written() {
			c.Abort()
			return
		}
		e.fail(c, fmt.Errorf("edge: panic: %v", v))
	}()
	c.Next()
}

// apiKey reads the caller's key from SERVICE_API_KEY or Authorization: Bearer. Keys
// in query strings are not read: they would end up in logs and browser histories.
func apiKey(r *http.Request) string {
	if k := r.Header.Get(headerAPIKey); k != "" {
		return strings.TrimSpace(k)
	}
	return bearer(r)
}

func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// authKey authenticates the caller's API key against the registry view, and, while
// the view is behind, against the keys bucket's leader (registry.View.AuthenticateKey).
func (e *Edge) authKey(c *gin.Context) {
	secret := apiKey(c.Request)
	p, err := e.view.AuthenticateKey(c.Request.Context(), secret, time.Now())
	if err != nil {
		e.fail(c, err)
		return
	}
	c.Set(ctxPrincipal, p)
	c.Next()
}

// authAdmin compares the admin key's hash with the configured one in constant time.
func (e *Edge) authAdmin(c *gin.Context) {
	sum := sha256.Sum256([]byte(bearer(c.Request)))
	if subtle.ConstantTimeCompare(sum[:], e.adminHash) != 1 {
		e.fail(c, newHTTPError(gateway.KindUnauthenticated, "a valid admin key is required"))
		return
	}
	c.Next()
}
