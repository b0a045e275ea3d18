package wire

import (
	"strings"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// Propagator moves W3C trace context and baggage across the bus. It is fixed rather
// than taken from otel's global, which is a no-op until a program sets one, so that a
// trace crosses the bus whether or not an exporter is configured.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(
	propagation.TraceContext{}, propagation.Baggage{})

// HeaderCarrier adapts nats.Header to otel's TextMapCarrier. NATS headers are case
// sensitive; W3C names them in lower case, so keys are stored and looked up lower-case.
type HeaderCarrier nats.Header

// Get returns the value for key.
func (c HeaderCarrier) Get(key string) string { return nats.Header(c).Get(strings.ToLower(key)) }

// Set stores value under the lower-case key.
func (c HeaderCarrier) Set(key, value string) { nats.Header(c).Set(strings.ToLower(key), value) }

// Keys lists the keys present.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// unset is otel's global tracer provider as it is before a program installs one: every
// span it starts records nothing.
var unset = otel.GetTracerProvider()

// Tracing reports whether a program has installed a tracer provider (telemetry.Start
// does when an exporter is configured). Without one a span records nothing, yet
// starting it still costs allocations on every call, so the call path starts its spans
// only when Tracing is true. Skipping them changes nothing that leaves the process: the
// trace context a request came with is in its context either way, and goes on across
// the bus (see Request.Msg).
func Tracing() bool { return otel.GetTracerProvider() != unset }
