package edge

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/toolgate/toolgate/bus"
	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/oauth"
	"github.com/toolgate/toolgate/registry"
)

func init() {
	// gin's debug mode prints every route at start and warns on stdout; an edge logs
	// through slog only.
	if os.Getenv(gin.EnvGinMode) == "" {
		gin.SetMode(gin.ReleaseMode)
	}
}

// MCP serves the MCP transports of one tool. The edge has authenticated the caller
// (by link token or API key) and checked that the tool is visible to it before it
// calls any of these; the request body is already capped at the edge's limit.
type MCP interface {
	// ServeSSE opens a legacy HTTP+SSE stream; messagesPath is the path (without the
	// host) the client is told to POST its messages to.
	ServeSSE(w http.ResponseWriter, r *http.Request, p registry.Principal, tool, messagesPath string)
	// ServeMessages takes a message POSTed for a legacy SSE session.
	ServeMessages(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string)
	// ServeStreamable serves the Streamable HTTP transport (POST, GET and DELETE).
	ServeStreamable(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string)
	// Drain refuses new MCP requests, ends open streams (telling clients to reconnect,
	// to this or another edge) and waits for calls in flight, until ctx ends. Streams
	// never go idle on their own, so the HTTP server's shutdown waits for this.
	Drain(ctx context.Context) error
}

// Edge is one HTTP edge node.
type Edge struct {
	cfg      Config
	gw       *gateway.Gateway
	view     *registry.View
	store    *registry.Store
	signer   *registry.LinkSigner
	log      *slog.Logger
	base     string // BaseURL without a trailing slash
	basePath string // BaseURL's path, for paths handed to clients relative to the host
	maxBody  int64
	// maxPayload bounds a call's body: the deployment's payload limit with a payloads
	// bucket, the body's limit without one.
	maxPayload int64
	// relisting: the connections (account.tool) whose tools the edge is asking a
	// tool with per-account methods for (relist).
	relisting sync.Map
	adminHash []byte
	metrics   *metrics
	router    *gin.Engine
	draining  atomic.Bool
}

// New builds an edge that runs calls through gw, administers store, and shows links
// derived by signer.
func New(gw *gateway.Gateway, store *registry.Store, signer *registry.LinkSigner, cfg Config, log *slog.Logger) (*Edge, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if gw == nil || store == nil || signer == nil {
		return nil, errors.New("edge: a gateway, a registry store and a link signer are required")
	}
	if log == nil {
		log = slog.Default()
	}
	e := &Edge{
		cfg: cfg, gw: gw, view: gw.View(), store: store, signer: signer, log: log,
		base: cfg.baseURL(), basePath: cfg.basePath(), maxBody: cfg.MaxBodyBytes, metrics: newMetrics(),
	}
	if max := gw.Conn().MaxPayload(); max > 0 && e.maxBody > max-HeaderRoom {
		e.maxBody = max - HeaderRoom
		log.Info("edge: max-body-bytes lowered to fit the NATS server's max_payload",
			"configured", cfg.MaxBodyBytes, "max_payload", max, "max_body_bytes", e.maxBody)
	}
	e.maxPayload = e.maxBody
	if gw.Payloads() != nil {
		e.maxPayload = cfg.MaxPayloadBytes
	}
	if t := gw.Audit(); t != nil {
		e.metrics.countAuditFailures(t)
	}
	if cfg.AdminKeyHash != "" {
		e.adminHash, _ = hex.DecodeString(strings.ToLower(cfg.AdminKeyHash))
	}
	e.router = e.routes()
	return e, nil
}

// MaxBodyBytes is the largest request body this edge accepts.
func (e *Edge) MaxBodyBytes() int64 { return e.maxBody }

// MaxPayloadBytes is the largest tool call request or reply this edge accepts.
func (e *Edge) MaxPayloadBytes() int64 { return e.maxPayload }

// Handler serves every route of the edge.
func (e *Edge) Handler() http.Handler { return e.router }

func (e *Edge) routes() *gin.Engine {
	r := gin.New()
	r.HandleMethodNotAllowed = true
	r.RedirectTrailingSlash = false
	r.RedirectFixedPath = false
	_ = r.SetTrustedProxies(nil)
	r.Use(
		withRequestID,
		traceRequest,
		e.accessLog,
		e.recoverPanic,
		e.limitBody,
	)
	r.NoRoute(func(c *gin.Context) { e.fail(c, errRouteNotFound) })
	r.NoMethod(func(c *gin.Context) { e.fail(c, errMethodNotAllowed) })

	r.GET("/healthz", e.healthz)
	r.GET("/readyz", e.readyz)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(e.metrics.reg, promhttp.HandlerOpts{})))
	r.GET(OAuthCallbackPath, e.oauthCallback)
	r.GET(OAuthClientPath, e.oauthClientDocument)

	api := r.Group("", e.authKey)
	api.GET("/get-tools", e.getTools)
	api.POST("/tool-call/:tool/:method", e.toolCall)
	api.GET("/tools/:tool", e.getTool)
	api.GET("/tools/:tool/openapi.json", e.openAPI)
	api.POST("/tools/:tool/:method", e.toolCall)
	if e.cfg.Calls != nil {
		api.GET("/calls/:id", e.getCall)
		api.DELETE("/calls/:id", e.cancelCall)
		// A call another edge ran, and left working when it died, is finished here
		// from its stored answer, as that edge would have.
		e.cfg.Calls.Adopt(nil, "", e.adoptedOutcome)
	}

	if e.cfg.MCP != nil {
		link := r.Group("/mcp/:link", e.authLink)
		link.GET("/sse", e.mcpSSE)
		link.POST("/messages", e.mcpMessages)
		tools := r.Group("/tools/:tool", e.authToolCaller, e.authToolMCP)
		for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
			link.Handle(m, "", e.mcpStreamable)
			tools.Handle(m, "/mcp", e.mcpStreamable)
		}
		tools.GET("/sse", e.mcpSSE)
		tools.POST("/sse/messages", e.mcpMessages)
		if e.tokens() != nil {
			r.GET(oauth.ResourceWellKnown+"/*path", e.resourceMetadata)
		}
	}

	if e.cfg.Dashboard != nil {
		r.Any(DashboardPath+"*path", gin.WrapH(e.cfg.Dashboard))
		r.GET(strings.TrimSuffix(DashboardPath, "/"), func(c *gin.Context) {
			c.Redirect(http.StatusMovedPermanently, e.basePath+DashboardPath)
		})
	}

	if e.cfg.AuthServer != nil {
		h := gin.WrapH(e.cfg.AuthServer.Handler())
		for _, p := range oauth.Paths {
			r.Any(p, h)
		}
	}

	if e.adminHash != nil {
		e.adminRoutes(r.Group("/admin", e.authAdmin))
	}
	return r
}

func (e *Edge) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readyz says whether this edge should get traffic: NATS connected, the registry view
// loaded (New is only given a view once it has synced), and not shutting down.
func (e *Edge) readyz(c *gin.Context) {
	var reasons []string
	if st := e.gw.Conn().Status(); st != nats.CONNECTED {
		reasons = append(reasons, "nats: "+strings.ToLower(st.String()))
	}
	if e.draining.Load() {
		reasons = append(reasons, "edge: shutting down")
	}
	if len(reasons) > 0 {
		c.JSON(http.StatusServiceUnavailable, gin.H{"status": "not ready", "reasons": reasons})
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

// Serve answers requests on ln until ctx ends, then drains: /readyz answers 503 and
// every answer closes its connection while the edge goes on serving for DrainDelay (a
// balancer moves new requests elsewhere meanwhile); then it stops taking connections,
// ends MCP streams (their clients resume on another edge), lets in-flight requests
// and calls finish for up to ShutdownTimeout, and closes what is left (calls still
// running see their contexts end).
func (e *Edge) Serve(ctx context.Context, ln net.Listener) error {
	base, cancelBase := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelBase()
	srv := &http.Server{
		Handler:           e.router,
		ReadHeaderTimeout: e.cfg.ReadHeaderTimeout, // a body's time is bounded per request: limitBody
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(e.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	e.log.Info("edge: serving", "addr", ln.Addr().String(), "base_url", e.base)

	select {
	case err := <-errc:
		return fmt.Errorf("edge: serve: %w", err)
	case <-ctx.Done():
	}
	e.draining.Store(true)
	srv.SetKeepAlivesEnabled(false)
	if e.cfg.DrainDelay > 0 {
		e.log.Info("edge: draining: unready, serving on", "for", e.cfg.DrainDelay)
		select {
		case err := <-errc:
			return fmt.Errorf("edge: serve: %w", err)
		case <-time.After(e.cfg.DrainDelay):
		}
	}
	e.log.Info("edge: stopping: no new connections; waiting for requests in flight", "for at most", e.cfg.ShutdownTimeout)
	grace, cancel := context.WithTimeout(context.Background(), e.cfg.ShutdownTimeout)
	defer cancel()
	// The listener closes as MCP drains, not after: a request that reached a draining
	// MCP server would be refused with a 503, which a client does not resend, where a
	// connection refused sends it to another edge.
	mcpDone := make(chan error, 1)
	go func() {
		if e.cfg.MCP == nil {
			mcpDone <- nil
			return
		}
		mcpDone <- e.cfg.MCP.Drain(grace)
	}()
	err := srv.Shutdown(grace)
	if e.cfg.Calls != nil {
		// No call starts any more: those running get what is left of the grace, and
		// are then given up as lost, which their records say.
		e.cfg.Calls.Drain(grace, bus.ErrCallLost)
	}
	mcpErr := <-mcpDone
	if err != nil {
		e.log.Warn("edge: shutdown grace ran out; closing what is left", "err", err)
		cancelBase()
		err = srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return fmt.Errorf("edge: serve: %w", serr)
	}
	return errors.Join(mcpErr, err)
}
