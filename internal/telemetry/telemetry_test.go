package telemetry

import (
	"context"
	"testing"
)

func TestExportersFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    int
		wantErr bool
	}{
		{"nothing set means no exporter", nil, 0, false},
		{"an OTLP endpoint alone turns OTLP on", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, 1, false},
		{"none wins", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, 0, false},
		{"a list gives each", map[string]string{"OTEL_TRACES_EXPORTER": "otlp, console"}, 2, false},
		{"the SDK can be disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, 0, false},
		{"an unknown exporter is an error", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, 0, true},
		{"OTLP over gRPC is an error", map[string]string{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
				"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
				t.Setenv(k, tc.env[k])
			}
			got, err := exportersFromEnv(context.Background())
			if (err != nil) != tc.wantErr || len(got) != tc.want {
				t.Fatalf("got %d exporters, err %v; want %d, error %v", len(got), err, tc.want, tc.wantErr)
			}
			for _, exp := range got {
				_ = exp.Shutdown(context.Background())
			}
		})
	}
}
