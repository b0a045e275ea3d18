// Package telemetry sets up what a toolgate process tells of itself: OpenTelemetry
// tracing from the standard OTEL_* environment variables, in one call a command makes
// at start (with none set, no exporter runs: trace context still crosses the bus,
// nothing is sent), and the JSON logs, written in batches.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/toolgate/toolgate/bus/wire"
)

// Start installs the global propagator (W3C trace context and baggage, as on the bus)
// and, when the environment names an exporter, a global tracer provider that sends to
// it. service is the default service.name; OTEL_SERVICE_NAME overrides it.
//
// Understood: OTEL_SDK_DISABLED; OTEL_TRACES_EXPORTER (otlp, console, none; a
// comma-separated list); the OTLP exporter's own variables (OTEL_EXPORTER_OTLP_ENDPOINT,
// ..._HEADERS, ...), of which an endpoint alone turns OTLP on; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES; OTEL_TRACES_SAMPLER and OTEL_BSP_*, read by the SDK. OTLP
// goes over HTTP (http/protobuf).
//
// The returned shutdown flushes and stops the exporters.
func Start(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	otel.SetTextMapPropagator(wire.Propagator)
	exporters, err := exportersFromEnv(ctx)
	if err != nil || len(exporters) == 0 {
		return func(context.Context) error { return nil }, err
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", service)),
		resource.WithTelemetrySDK(),
		resource.WithFromEnv(), // last, so OTEL_SERVICE_NAME wins
	)
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	opts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	for _, exp := range exporters {
		opts = append(opts, sdktrace.WithBatcher(exp))
	}
	tp := sdktrace.NewTracerProvider(opts...)
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

func exportersFromEnv(ctx context.Context) ([]sdktrace.SpanExporter, error) {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return nil, nil
	}
	names := os.Getenv("OTEL_TRACES_EXPORTER")
	if names == "" {
		if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
			return nil, nil // none by default
		}
		names = "otlp"
	}
	var out []sdktrace.SpanExporter
	for _, name := range strings.Split(names, ",") {
		switch name = strings.TrimSpace(name); name {
		case "none":
			return nil, nil
		case "otlp":
			proto := firstSet("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
			if proto != "" && proto != "http/protobuf" {
				return nil, fmt.Errorf("telemetry: OTLP protocol %q: only http/protobuf is supported", proto)
			}
			exp, err := otlptracehttp.New(ctx)
			if err != nil {
				return nil, fmt.Errorf("telemetry: otlp exporter: %w", err)
			}
			out = append(out, exp)
		case "console":
			exp, err := stdouttrace.New(stdouttrace.WithWriter(os.Stdout))
			if err != nil {
				return nil, fmt.Errorf("telemetry: console exporter: %w", err)
			}
			out = append(out, exp)
		default:
			return nil, errors.New("telemetry: OTEL_TRACES_EXPORTER: " + name + ": want otlp, console or none")
		}
	}
	return out, nil
}

func firstSet(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}
