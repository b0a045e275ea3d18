package workers

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// serve starts the nats micro service with one endpoint per method, and one for the
// tool's MCP requests when it has an MCP handler.
func (w *Worker) serve(methods []Method, mcpHandler MCPHandler) (micro.Service, error) {
	version := strings.TrimPrefix(w.tool.Version, "v")
	if version == "" {
		version = "0.0.0"
	}
	svc, err := micro.AddService(w.nc, micro.Config{
		Name:         w.tool.ID,
		Version:      version,
		Description:  w.tool.Description,
		Metadata:     map[string]string{"instance": w.cfg.instance},
		QueueGroup:   w.cfg.subjects.QueueGroup(w.tool.ID),
		StatsHandler: w.endpointStats,
	})
	if err != nil {
		return nil, fmt.Errorf("workers: tool %s: nats micro: %w", w.tool.ID, err)
	}
	w.mu.Lock()
	w.svc = svc
	w.mu.Unlock()
	if err := w.serveMethods(methods); err != nil {
		_ = svc.Stop()
		return nil, err
	}
	if mcpHandler != nil {
		m := &Method{Name: "mcp", mcp: true, Handler: func(ctx context.Context, c *Call) (any, error) {
			return mcpHandler(ctx, c, c.Method)
		}}
		w.mu.Lock()
		w.mcpMethod = m
		w.mu.Unlock()
		if err := w.addEndpoint(svc, m.Name, w.cfg.subjects.MCP(w.tool.ID), func() *Method { return m }); err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("workers: tool %s: MCP endpoint: %w", w.tool.ID, err)
		}
	}
	if w.tool.Capabilities.SessionState {
		sub, err := w.nc.Subscribe(w.cfg.subjects.InstanceAll(w.tool.ID, w.cfg.instance), w.onDirect)
		if err != nil {
			_ = svc.Stop()
			return nil, fmt.Errorf("workers: tool %s: subscribe to the instance's requests: %w", w.tool.ID, err)
		}
		w.direct = sub
	}
	return svc, nil
}

// addEndpoint serves subject with the handler of the method lookup finds. Statistics
// are kept by subject: the MCP endpoint is named "mcp", which a method may be named
// too. The caller holds w.mu.
func (w *Worker) addEndpoint(svc micro.Service, name, subject string, lookup func() *Method) error {
	st := &methodStats{}
	w.stats[subject] = st
	return svc.AddEndpoint(name, w.intake(lookup, st), micro.WithEndpointSubject(subject))
}

// intake is the endpoint's micro handler. nats micro calls it for one message at a
// time per endpoint; see accept.
func (w *Worker) intake(lookup func() *Method, st *methodStats) micro.Handler {
	return micro.HandlerFunc(func(req micro.Request) {
		w.accept(inbound{subject: req.Subject(), reply: req.Reply(), data: req.Data(), header: nats.Header(req.Headers())}, lookup(), st)
	})
}

type methodStats struct {
	inFlight, calls, errors, nanos atomic.Int64
}

// count counts a call that took since start and failed with err, if not nil.
func (st *methodStats) count(start time.Time, err error) {
	st.calls.Add(1)
	st.nanos.Add(int64(time.Since(start)))
	if err != nil {
		st.errors.Add(1)
	}
}

// EndpointStats is the data a method's endpoint adds to nats micro STATS. The
// standard fields count what the endpoint took in; these count what the handlers did.
type EndpointStats struct {
	InFlight       int64         `json:"in_flight"`
	Calls          int64         `json:"calls"`
	Errors         int64         `json:"errors"`
	ProcessingTime time.Duration `json:"processing_time"`
}

func (w *Worker) endpointStats(e *micro.Endpoint) any {
	w.mu.Lock()
	st := w.stats[e.Subject]
	w.mu.Unlock()
	if st == nil {
		return nil
	}
	return EndpointStats{
		InFlight: st.inFlight.Load(), Calls: st.calls.Load(), Errors: st.errors.Load(),
		ProcessingTime: time.Duration(st.nanos.Load()),
	}
}
