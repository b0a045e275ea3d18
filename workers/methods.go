package workers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/toolgate/toolgate/bus/wire"
)

// SetMethods replaces the tool's methods, for a tool whose methods change while it
// runs (a bridged MCP server that reports a new tool list). Before Run it replaces
// what Handle declared. While the worker serves, it checks the methods as Run does,
// serves the new ones, and then rewrites the tool's record, so a caller that sees a
// method in the registry finds it served. A call already running finishes with the
// handler it started with. A method no longer declared answers method_not_found; its
// endpoint stays in nats micro discovery until the worker stops, since micro cannot
// remove one endpoint. Between Run's start and Ready, SetMethods waits for Ready.
func (w *Worker) SetMethods(ctx context.Context, methods []Method) error {
	return w.SetAccountMethods(ctx, methods, nil)
}

// SetAccountMethods is SetMethods for a tool whose methods differ per account: each
// account sees and calls only those of methods its list in per names (an account
// without one, none); nil per: every account all of them.
func (w *Worker) SetAccountMethods(ctx context.Context, methods []Method, per *wire.AccountMethods) error {
	w.setMu.Lock()
	defer w.setMu.Unlock()
	w.mu.Lock()
	started, hasMCP := w.started, w.mcp != nil
	if !started {
		w.methods = slices.Clone(methods)
	}
	w.accountMethods = per
	w.mu.Unlock()
	if !started {
		return nil
	}
	select {
	case <-w.ready:
	case <-w.done:
		return fmt.Errorf("workers: tool %s: set methods: the worker has stopped", w.tool.ID)
	case <-ctx.Done():
		return ctx.Err()
	}
	rec, err := w.record(methods, hasMCP)
	if err != nil {
		return err
	}
	methods = slices.Clone(methods)
	if err := w.serveMethods(methods); err != nil {
		return err
	}
	if err := w.putTool(ctx, rec); err != nil {
		if ctx.Err() != nil { // stopped before serving anything: a clean stop, not a failure
			return nil
		}
		return fmt.Errorf("workers: tool %s: %w", w.tool.ID, err)
	}
	return nil
}

// serveMethods makes methods the ones calls are dispatched to, adding an endpoint for
// each that has none yet.
func (w *Worker) serveMethods(methods []Method) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.stopping {
		return fmt.Errorf("workers: tool %s: set methods: the worker is stopping", w.tool.ID)
	}
	table := make(map[string]*Method, len(methods))
	for i := range methods {
		if methods[i].input == nil {
			methods[i].input = &inputSchema{raw: methods[i].InputSchema, url: wire.SchemaURL(w.tool.ID, methods[i].Name)}
		}
		table[methods[i].Name] = &methods[i]
	}
	w.table.Store(&table)
	for i := range methods {
		name := methods[i].Name
		if w.served[name] {
			continue
		}
		if err := w.addEndpoint(w.svc, name, w.cfg.subjects.Call(w.tool.ID, name), w.lookup(name)); err != nil {
			return fmt.Errorf("workers: tool %s: method %s: %w", w.tool.ID, name, err)
		}
		w.served[name] = true
	}
	w.methods = methods
	return nil
}

// lookup finds the method a call of name goes to, or nil when it is declared no more.
func (w *Worker) lookup(name string) func() *Method {
	return func() *Method { return (*w.table.Load())[name] }
}

// record checks the declaration and returns the tool's registry record.
func (w *Worker) record(methods []Method, hasMCP bool) (wire.Tool, error) {
	fail := func(format string, args ...any) (wire.Tool, error) {
		return wire.Tool{}, fmt.Errorf("workers: tool %s: "+format, append([]any{w.tool.ID}, args...)...)
	}
	if err := wire.CheckToolID(w.tool.ID); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	if !wire.ValidToken(w.cfg.instance) {
		return fail("instance %q: must be 1 to 128 letters, digits, '-' and '_'", w.cfg.instance)
	}
	if w.cfg.concurrency < 1 {
		return fail("concurrency: must be at least 1")
	}
	if w.cfg.cancelWindow <= 0 || w.cfg.cancelMax < 1 {
		return fail("cancel memory: the window must be positive and the bound at least 1")
	}
	if w.cfg.presenceTTL < time.Second {
		return fail("presence TTL: must be at least a second")
	}
	if ttl := w.cfg.presenceTTL; w.cfg.heartbeat <= 0 || w.cfg.heartbeat >= ttl {
		return fail("heartbeat: must be positive and shorter than the presence TTL (%v)", ttl)
	}
	if caps := w.tool.Capabilities; (caps.Resources || caps.Prompts || caps.Completions) && !hasMCP {
		return fail("capabilities: resources, prompts and completions are served by an MCP handler; declare one with HandleMCP")
	}
	rec := wire.Tool{
		ID: w.tool.ID, Title: w.tool.Title, Description: w.tool.Description, Version: w.tool.Version,
		Owner: w.tool.Owner, Capabilities: w.tool.Capabilities, Methods: []wire.Method{},
		Holding: true, // see announceHolding
	}
	w.mu.Lock()
	rec.AccountMethods = w.accountMethods
	w.mu.Unlock()
	var err error
	if rec.Connection, err = w.connection(); err != nil {
		return fail("%v", err)
	}
	for _, m := range methods {
		switch {
		case m.err != nil:
			return fail("method %s: %v", m.Name, m.err)
		case m.Handler == nil:
			return fail("method %s: no handler", m.Name)
		}
		rec.Methods = append(rec.Methods, wire.Method{
			Name: m.Name, Title: m.Title, Description: m.Description, InputSchema: m.InputSchema,
			OutputSchema: m.OutputSchema, Annotations: m.Annotations, Timeout: wire.Duration(m.Timeout),
			MCPName: m.MCPName, TaskSupport: m.TaskSupport,
		})
	}
	// The edges refuse a record that breaks these rules: refuse it here first, where
	// the tool's team reads why.
	if err := wire.CheckTool(&rec); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	if err := wire.CheckSchemas(&rec); err != nil {
		return wire.Tool{}, fmt.Errorf("workers: %w", err)
	}
	return rec, nil
}

// connection is the tool's connection as its record declares it: the fields, and
// the public key of the seal key their values are sealed to; nil for a tool that
// declares no fields.
func (w *Worker) connection() (*wire.Connection, error) {
	if len(w.tool.Connection) == 0 && w.tool.OAuth == nil {
		return nil, nil
	}
	if w.cfg.sealKey == nil {
		return nil, errors.New("connection: no seal key")
	}
	pub, err := w.cfg.sealKey.PublicKey()
	if err != nil || !nkeys.IsValidPublicCurveKey(pub) {
		return nil, errors.New("connection: the seal key is not an X25519 (curve) key pair")
	}
	conn := &wire.Connection{Fields: w.tool.Connection, OAuth: w.tool.OAuth, SealKey: pub}
	if err := wire.CheckConnection(conn); err != nil {
		return nil, err
	}
	return conn, nil
}
