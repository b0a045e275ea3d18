package edge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the edge's Prometheus series. Tool and method labels take only names
// the registry knows ("unknown" otherwise), so a caller cannot grow the series without
// bound by inventing names.
type metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	inFlight prometheus.Gauge
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
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolgate_tool_calls_in_flight",
			Help: "Tool calls this edge is serving now.",
		}),
	}
	m.reg.MustRegister(m.calls, m.latency, m.inFlight,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) observe(tool, method, code string, took time.Duration) {
	m.calls.WithLabelValues(tool, method, code).Inc()
	m.latency.WithLabelValues(tool, method).Observe(took.Seconds())
}
