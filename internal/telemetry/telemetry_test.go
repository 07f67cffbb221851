package telemetry

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"go.opentelemetry.io/otel"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/snapwriter/snapwriter/internal/telemetry/otlptest"
)

// cleanEnv clears every OTEL_ variable of the test's environment, and
// sets env; the global providers are reset after the test.
func cleanEnv(t *testing.T, env map[string]string) {
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "")
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	t.Cleanup(func() {
		otel.SetTracerProvider(nooptrace.NewTracerProvider())
		otel.SetMeterProvider(noopmetric.NewMeterProvider())
	})
}

// emit makes a span with a child and a counter's point through the global
// providers, as the snapshot package and the Firestore client do.
func emit(ctx context.Context, t *testing.T) {
	ctx, span := otel.Tracer("test").Start(ctx, "test.parent")
	_, child := otel.Tracer("test").Start(ctx, "test.child")
	child.End()
	span.End()
	c, err := otel.Meter("test").Int64Counter("test.count")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(ctx, 3)
}

// With no OTEL_ variable that turns a signal on, Setup installs nothing
// and nothing is exported — not even with an OTLP endpoint set, which
// autoexport alone would export to.
func TestOffByDefault(t *testing.T) {
	for _, env := range []map[string]string{
		{},
		{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none", "OTEL_SERVICE_NAME": "x"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"},
	} {
		c := otlptest.NewCollector(t)
		env["OTEL_EXPORTER_OTLP_ENDPOINT"] = c.URL
		cleanEnv(t, env)
		ctx := context.Background()
		before := otel.GetTracerProvider()
		p, err := Setup(ctx, "test")
		if err != nil {
			t.Fatal(err)
		}
		if p.tp != nil || p.mp != nil {
			t.Errorf("%v: traces on %v, metrics on %v; want both off", env, p.tp != nil, p.mp != nil)
		}
		if otel.GetTracerProvider() != before {
			t.Errorf("%v: Setup replaced the global TracerProvider", env)
		}
		emit(ctx, t)
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		if n := c.Requests(); n != 0 {
			t.Errorf("%v: %d exports received; want none", env, n)
		}
	}
}

// The real Setup, configured by the environment alone, exports spans and
// metrics over OTLP/HTTP when Shutdown flushes them, with the resource the
// environment names.
func TestOTLPHTTPExport(t *testing.T) {
	for _, service := range []string{"", "nightly-snapshots"} {
		c := otlptest.NewCollector(t)
		cleanEnv(t, map[string]string{
			"OTEL_TRACES_EXPORTER": "otlp", "OTEL_METRICS_EXPORTER": "otlp",
			"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf", "OTEL_EXPORTER_OTLP_ENDPOINT": c.URL,
			"OTEL_SERVICE_NAME": service, "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=test",
		})
		ctx := context.Background()
		p, err := Setup(ctx, "v9.9.9")
		if err != nil {
			t.Fatal(err)
		}
		if p.tp == nil || p.mp == nil {
			t.Fatalf("traces on %v, metrics on %v; want both on", p.tp != nil, p.mp != nil)
		}
		if otel.GetTracerProvider() != p.tp || otel.GetMeterProvider() != p.mp {
			t.Error("Setup did not install its providers as the global ones")
		}
		emit(ctx, t)
		if err := p.Shutdown(ctx); err != nil {
			t.Fatal(err)
		}
		want := service
		if want == "" {
			want = ServiceName
		}
		var spans []string
		for _, s := range c.Spans() {
			spans = append(spans, s.GetName())
		}
		if strings.Join(spans, ",") != "test.child,test.parent" {
			t.Errorf("spans received: %v", spans)
		}
		if metrics := c.MetricNames(); strings.Join(metrics, ",") != "test.count" {
			t.Errorf("metrics received: %v", metrics)
		}
		services, attrs := c.ServiceNames(), c.ResourceAttributes()
		if len(services) == 0 || services[0] != want || attrs["service.version"] != "v9.9.9" ||
			attrs["deployment.environment.name"] != "test" {
			t.Errorf("resource: service.name %v, attributes %v", services, attrs)
		}
	}
}

// A configuration Setup cannot follow is an ErrConfig, so that the
// program stops before it does anything.
func TestBadConfig(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "jaeger"},
		{"OTEL_METRICS_EXPORTER": "statsd"},
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "carrier-pigeon"},
	} {
		cleanEnv(t, env)
		p, err := Setup(context.Background(), "test")
		if !errors.Is(err, ErrConfig) {
			t.Errorf("%v: err = %v, want ErrConfig", env, err)
		}
		if p != nil {
			t.Errorf("%v: providers returned beside an error", env)
		}
	}
}
