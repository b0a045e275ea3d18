package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/audit"
	"github.com/toolgate/toolgate/bus/wire"
	"github.com/toolgate/toolgate/registry"
)

// CodeAuditUnavailable: the account requires every call's audit record, and the
// trail cannot be written.
const CodeAuditUnavailable = "audit_unavailable"

// KindAuditUnavailable is a call of an account that requires audit (its audit
// settings' required) refused because its record could not be written: refused
// before it is sent while the trail fails, or answered so, the tool's answer held
// back, when its record fails after it ran.
var KindAuditUnavailable = &Kind{Code: CodeAuditUnavailable, Status: http.StatusServiceUnavailable, RPC: RPCInternalError, InResult: true,
	Text: "the account requires an audit record of every call, and the audit trail cannot be written now", RetryAfter: UnavailableRetryAfter}

// errAuditUnavailable refuses a call of KindAuditUnavailable.
var errAuditUnavailable = &Error{Kind: KindAuditUnavailable}

// WithAudit writes a record of every call the gateway answers, through Call, Forward
// or Refuse, to the trail, and answers the call once the stream has stored it.
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
	_ = g.audit(ctx, c, time.Now(), c.Params, nil, err)
	return err
}

// Answered records c, a call its door checked (Check) and sent (Send) itself, as a
// call that outlives its request is, answered with reply or err; params are its
// parameters as the caller sent them. Call and Forward record their own calls. It
// returns the failure of KindAuditUnavailable when the account requires the record
// and it could not be written: the door answers that instead.
func (g *Gateway) Answered(ctx context.Context, c *Call, params []byte, reply *wire.Reply, err error) error {
	g.ended(ctx, c)
	return g.audit(ctx, c, time.Now(), params, reply, err)
}

// audited records c as audit does and returns the answer to give: reply and err, or
// the failure of KindAuditUnavailable.
func (g *Gateway) audited(ctx context.Context, c *Call, began time.Time, params []byte, reply *wire.Reply, err error) (*wire.Reply, error) {
	if aerr := g.audit(ctx, c, began, params, reply, err); aerr != nil {
		return nil, aerr
	}
	return reply, err
}

// audit writes the record of c, a tool call or an MCP request forwarded, sent with
// params at began and answered with reply or err, and waits for the stream to store
// it. It fails only for an account that requires audit: any other's call is answered
// whatever became of its record (counted when lost). While the trail fails, neither
// a call of another account nor one refused for the trail waits for the stream.
func (g *Gateway) audit(ctx context.Context, c *Call, began time.Time, params []byte, reply *wire.Reply, err error) error {
	a := g.view.Snapshot().Account(c.Principal.Account)
	required := a != nil && a.Audit.Required
	if g.trail == nil {
		if required {
			return errAuditUnavailable
		}
		return nil
	}
	r := record(ctx, c, began, params, reply, err)
	if a != nil {
		g.keepData(&r, c, a.Audit, params, reply)
	}
	if !g.trail.Ready() && (!required || errors.Is(err, errAuditUnavailable)) {
		// The answer does not wait on a trail that fails: the call is served, or was
		// refused for it already. The record's acknowledgement, should it come, finds
		// the trail writable again.
		g.trail.Send(r)
		return nil
	}
	if werr := g.trail.Write(r); werr != nil && required {
		return errAuditUnavailable // the trail logs and counts the failure
	}
	return nil
}

// keepData puts in r the call's arguments (params) and the tool's answer (reply)
// where the account's settings ask, without what the method's schemas mark secret
// (audit.Keep), each cut at the settings' size.
func (g *Gateway) keepData(r *audit.Record, c *Call, set registry.AuditSettings, params []byte, reply *wire.Reply) {
	if !set.IncludeArguments && !set.IncludeResult {
		return
	}
	max := cmp.Or(set.MaxDataSize, registry.DefaultAuditDataSize)
	var in, out []byte
	m := c.Entry
	if m == nil {
		m, _ = g.view.Snapshot().Method(c.Principal, c.Tool, c.Method) // none for an MCP request forwarded
	}
	if m != nil {
		in, out = m.Method.InputSchema, m.Method.OutputSchema
	}
	if set.IncludeArguments && len(params) > 0 {
		k := audit.Keep(params, in, max, false)
		r.Arguments, r.ArgumentsCut = k.Data, k.Cut
		for _, p := range k.Secret {
			r.Secret = append(r.Secret, "/arguments"+p)
		}
	}
	if set.IncludeResult && reply != nil && len(reply.Data) > 0 {
		k := audit.Keep(reply.Data, out, max, reply.MCPResult)
		r.Result, r.ResultCut = k.Data, k.Cut
		for _, p := range k.Secret {
			r.Secret = append(r.Secret, "/result"+p)
		}
	}
}

// auditRequired says account requires a record of each of its calls.
func (g *Gateway) auditRequired(account string) bool {
	a := g.view.Snapshot().Account(account)
	return a != nil && a.Audit.Required
}

// checkAudit refuses, before it is sent, a call of an account that requires audit
// while its record could not be written: this edge keeps no trail, or the trail's
// last write failed. The refusal's own record, when it is stored, finds the trail
// writable again.
func (g *Gateway) checkAudit(account string) error {
	if g.auditRequired(account) && !g.trail.Ready() {
		return errAuditUnavailable
	}
	return nil
}

// record is the audit record of c, sent with params at began and answered with reply
// or err.
func record(ctx context.Context, c *Call, began time.Time, params []byte, reply *wire.Reply, err error) audit.Record {
	now := time.Now()
	if !c.Arrived.IsZero() {
		began = c.Arrived
	}
	r := audit.Record{
		ID: c.CallID, Time: now.UTC(), Kind: audit.KindCall, Account: c.Principal.Account, Link: c.Principal.Key == nil,
		User: c.Principal.User, Client: c.Principal.Client,
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
	r.TraceID = audit.TraceID(ctx)
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
