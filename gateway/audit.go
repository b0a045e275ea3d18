package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
)

// WithAudit writes a record of every call the gateway answers, through Call, Forward
// or Refuse, to the trail. Writing never holds up the call (audit.Trail.Write).
func WithAudit(t *audit.Trail) Option {
	return func(g *Gateway) { g.trail = t }
}

// Audit returns the trail the gateway writes, nil when it writes none.
func (g *Gateway) Audit() *audit.Trail { return g.trail }

// Refuse records c, refused with err by the door it came in by before it reached Call
// (its body unreadable, its content type wrong), so that the trail holds every call
// answered; it returns err.
func (g *Gateway) Refuse(ctx context.Context, c *Call, err error) error {
	g.ended(ctx, c)
	g.audit(ctx, c, time.Now(), c.Params, nil, err)
	return err
}

// Answered records c, a call its door checked (Check) and sent (Send) itself, as a
// call that outlives its request is, answered with reply or err; params are its
// parameters as the caller sent them. Call and Forward record their own calls.
func (g *Gateway) Answered(ctx context.Context, c *Call, params []byte, reply *wire.Reply, err error) {
	g.ended(ctx, c)
	g.audit(ctx, c, time.Now(), params, reply, err)
}

// audit writes the record of c, a tool call or an MCP request forwarded, sent with
// params at began and answered with reply or err. Without a trail it does nothing.
func (g *Gateway) audit(ctx context.Context, c *Call, began time.Time, params []byte, reply *wire.Reply, err error) {
	if g.trail != nil {
		g.trail.Write(record(ctx, c, began, params, reply, err))
	}
}

// record is the audit record of c, sent with params at began and answered with reply
// or err.
func record(ctx context.Context, c *Call, began time.Time, params []byte, reply *wire.Reply, err error) audit.Record {
	now := time.Now()
	if !c.Arrived.IsZero() {
		began = c.Arrived
	}
	r := audit.Record{
		Time: now.UTC(), Kind: audit.KindCall, Account: c.Principal.Account, Link: c.Principal.Key == nil,
		Tool: c.Tool, Method: c.Method, Transport: c.Transport, RequestBytes: len(params),
		Outcome: audit.OutcomeOK, LatencyUS: now.Sub(began).Microseconds(), RequestID: c.RequestID,
	}
	if c.Principal.Key != nil {
		r.Key = c.Principal.Key.ID
	}
	if r.Transport == "" {
		r.Transport = audit.TransportMCP
	}
	if len(params) > 0 {
		sum := sha256.Sum256(params)
		r.ArgsSHA256 = hex.EncodeToString(sum[:])
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		r.TraceID = sc.TraceID().String()
	}
	status := 0
	if err != nil {
		f := Classify(err)
		r.Outcome, status = f.Code, f.HTTP
	} else if reply != nil {
		r.ResponseBytes, status = len(reply.Data), reply.Status
		r.Worker = reply.Header.Get(wire.HeaderInstance)
	}
	if answersHTTP(r.Transport) {
		r.Status = status
	}
	return r
}

// answersHTTP: a door that answers a call with the HTTP status of the gateway's
// table of failures (or the tool's), not inside a JSON-RPC message.
func answersHTTP(transport string) bool {
	switch transport {
	case audit.TransportREST, audit.TransportDirect, audit.TransportDashboard:
		return true
	}
	return false
}
