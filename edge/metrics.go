package edge

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/toolgate/toolgate/audit"
)

// metrics are the edge's Prometheus series. Tool and method labels take only names
// the registry knows ("unknown" otherwise), so a caller cannot grow the series without
// bound by inventing names.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	toolTime *prometheus.HistogramVec
	inFlight prometheus.Gauge

	// The series of each tool, method and code, found once: a label lookup hashes
	// every value and takes the vector's lock, on every call.
	mu     sync.RWMutex
	series map[[3]string]*callSeries // tool, method, code
}

// callSeries are where one call is counted: its tool, method and code's counter, and
// its tool and method's latency.
type callSeries struct {
	calls    prometheus.Counter
	latency  prometheus.Observer
	toolTime prometheus.Observer
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolgate_tool_calls_total",
			Help: "Tool calls answered by this edge, by tool, method and outcome code (ok, or the error envelope's code).",
		}, []string{"tool", "method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "toolgate_tool_call_duration_seconds",
			Help:    "Time from a tool call's arrival at the edge to its answer, by tool and method.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "method"}),
		toolTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolgate_tool_duration_seconds",
			Help: "The tool's part of a call the tool answered: the round trip on the bus from the edge's request to the worker's reply, by tool and method. " +
				"What toolgate_tool_call_duration_seconds adds to it is the gateway's.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300},
		}, []string{"tool", "method"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_tool_calls_in_flight",
			Help: "Tool calls this edge is serving now.",
		}),
		series: map[[3]string]*callSeries{},
	}
	m.reg.MustRegister(m.calls, m.latency, m.toolTime, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observe counts one call of method of tool, answered with code ("ok" or an envelope
// code) after took, of which toolTime on the bus (0 when the tool did not answer).
// Tool and method are names the registry knows, or "unknown", and codes are the
// envelope's, so the series kept are bounded.
func (m *metrics) observe(tool, method, code string, took, toolTime time.Duration) {
	s := m.seriesOf(tool, method, code)
	s.calls.Inc()
	s.latency.Observe(took.Seconds())
	if toolTime > 0 {
		s.toolTime.Observe(toolTime.Seconds())
	}
}

// countAuditFailures exports how many records t could not write.
func (m *metrics) countAuditFailures(t *audit.Trail) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "toolgate_audit_write_failures_total",
		Help: "Audit records this edge could not write (refused by the stream, or not acknowledged in time); the calls they describe were served, unless their account requires audit.",
	}, func() float64 { return float64(t.Failures()) }))
}

func (m *metrics) seriesOf(tool, method, code string) *callSeries {
	k := [3]string{tool, method, code}
	m.mu.RLock()
	s := m.series[k]
	m.mu.RUnlock()
	if s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s = m.series[k]; s == nil {
		s = &callSeries{calls: m.calls.WithLabelValues(tool, method, code),
			latency: m.latency.WithLabelValues(tool, method), toolTime: m.toolTime.WithLabelValues(tool, method)}
		m.series[k] = s
	}
	return s
}
