package sse

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/toolgate/toolgate/gateway"
	"github.com/toolgate/toolgate/registry"
	"github.com/toolgate/toolgate/sse/core"
	"github.com/toolgate/toolgate/sse/legacy"
	"github.com/toolgate/toolgate/sse/stateless"
	"github.com/toolgate/toolgate/sse/streamable"
)

// Server serves MCP for tools' links. The edge authenticates a request, finds the
// principal and the tool the link reaches, and hands the request to ServeSSE,
// ServeMessages or ServeStreamable. One Server per edge; the state it shares with
// other edges (sessions, stream events) lives in NATS.
type Server struct {
	core       *core.Server
	legacy     *legacy.Transport
	streamable *streamable.Transport
}

// Config holds what an edge's MCP transports need to know.
type Config = core.Config

// DefaultConfig is the configuration an edge starts from (core.DefaultConfig).
func DefaultConfig() Config { return core.DefaultConfig() }

// New starts serving MCP on this edge: it creates (or joins) the event log, follows
// the sessions of every edge and the registry's tool changes, and is ready when it
// returns.
func New(ctx context.Context, gw *gateway.Gateway, store *registry.Store, cfg Config, log *slog.Logger) (*Server, error) {
	c, err := core.New(ctx, gw, store, cfg, log)
	if err != nil {
		return nil, err
	}
	return &Server{core: c, legacy: legacy.New(c), streamable: streamable.New(c, stateless.New(c))}, nil
}

// ServeSSE opens a legacy HTTP+SSE stream (legacy.Transport.ServeSSE); messagesPath
// is where its client POSTs its messages.
func (s *Server) ServeSSE(w http.ResponseWriter, r *http.Request, p registry.Principal, tool, messagesPath string) {
	s.legacy.ServeSSE(w, r, p, tool, messagesPath)
}

// ServeMessages takes a message POSTed for a legacy SSE session
// (legacy.Transport.ServeMessages).
func (s *Server) ServeMessages(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s.legacy.ServeMessages(w, r, p, tool)
}

// ServeStreamable serves a link's Streamable HTTP endpoint, sessions and the
// stateless revision alike (streamable.Transport.Serve).
func (s *Server) ServeStreamable(w http.ResponseWriter, r *http.Request, p registry.Principal, tool string) {
	s.streamable.Serve(w, r, p, tool)
}

// Drain ends this edge's part gracefully (core.Server.Drain): new requests are
// refused, open streams closed with a reconnection delay, and calls in flight run to
// their answer until ctx ends; then it closes the server.
func (s *Server) Drain(ctx context.Context) error { return s.core.Drain(ctx) }

// Close stops at once: streams end and calls in flight are cancelled.
func (s *Server) Close() error { return s.core.Close() }
