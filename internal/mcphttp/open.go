package mcphttp

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Open connects to cfg.Endpoint with the client's first message: over Streamable
// HTTP, or over legacy HTTP+SSE when the endpoint refuses that POST with a 4xx that
// says nothing in JSON-RPC, as the MCP specification's backwards-compatibility
// section describes. The legacy stream is looked for at each of sseEndpoints in turn
// (the endpoint itself when none are given). legacy reports which transport it is.
func Open(ctx context.Context, cfg Config, first jsonrpc.Message, sseEndpoints ...string) (conn mcp.Connection, legacy bool, err error) {
	st := NewStreamable(cfg)
	werr := st.Write(ctx, first)
	if werr == nil {
		return st, false, nil
	}
	st.Close()
	var se *StatusError
	if !errors.As(werr, &se) || !refusesStreamable(se.Status) {
		return nil, false, fmt.Errorf("the endpoint did not answer over Streamable HTTP: %w", werr)
	}
	cfg.logger().Info("the endpoint refused Streamable HTTP; trying legacy SSE", "status", se.Status)
	if len(sseEndpoints) == 0 {
		sseEndpoints = []string{cfg.Endpoint}
	}
	client := &http.Client{Transport: headerTransport{base: cfg.client().Transport, header: cfg.Header}, Timeout: cfg.client().Timeout}
	var errs []error
	for _, endpoint := range sseEndpoints {
		c, err := (&mcp.SSEClientTransport{Endpoint: endpoint, HTTPClient: client}).Connect(ctx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.Write(ctx, first); err != nil {
			c.Close()
			return nil, true, fmt.Errorf("legacy SSE: %w", err)
		}
		return c, true, nil
	}
	return nil, true, fmt.Errorf("the endpoint refused Streamable HTTP (%v) and legacy SSE: %w", se, errors.Join(errs...))
}

// refusesStreamable reports whether a POST's status means the endpoint does not
// speak Streamable HTTP there, rather than that it refused the caller.
func refusesStreamable(status int) bool {
	switch status {
	case http.StatusBadRequest, http.StatusNotFound, http.StatusMethodNotAllowed,
		http.StatusNotAcceptable, http.StatusUnsupportedMediaType:
		return true
	}
	return false
}

// headerTransport adds the configured headers to every request of the legacy
// transport, whose requests the SDK makes.
type headerTransport struct {
	base   http.RoundTripper
	header http.Header
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.header) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.header {
			req.Header[k] = vs
		}
	}
	base := t.base
	if base == nil {
		base = http.DefaultTransport
	}
	return base.RoundTrip(req)
}
