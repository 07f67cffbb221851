package telemetry

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	noopmetric "go.opentelemetry.io/otel/metric/noop"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	collmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	colltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP endpoint that keeps what it receives.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []string          // span names received
	metrics []string          // metric names received
	service []string          // service.name of each resource received
	attrs   map[string]string // resource attributes received
	posts   int
}

func newCollector(t *testing.T) *collector {
	c := &collector{attrs: map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("reading an export: %v", err)
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		c.posts++
		switch r.URL.Path {
		case "/v1/traces":
			var req colltrace.ExportTraceServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("decoding a trace export: %v", err)
			}
			for _, rs := range req.GetResourceSpans() {
				for _, a := range rs.GetResource().GetAttributes() {
					c.attrs[a.GetKey()] = a.GetValue().GetStringValue()
					if a.GetKey() == "service.name" {
						c.service = append(c.service, a.GetValue().GetStringValue())
					}
				}
				for _, ss := range rs.GetScopeSpans() {
					for _, s := range ss.GetSpans() {
						c.spans = append(c.spans, s.GetName())
					}
				}
			}
			_, _ = w.Write(mustMarshal(t, &colltrace.ExportTraceServiceResponse{}))
		case "/v1/metrics":
			var req collmetrics.ExportMetricsServiceRequest
			if err := proto.Unmarshal(body, &req); err != nil {
				t.Errorf("decoding a metrics export: %v", err)
			}
			for _, rm := range req.GetResourceMetrics() {
				for _, sm := range rm.GetScopeMetrics() {
					for _, m := range sm.GetMetrics() {
						c.metrics = append(c.metrics, m.GetName())
					}
				}
			}
			_, _ = w.Write(mustMarshal(t, &collmetrics.ExportMetricsServiceResponse{}))
		default:
			t.Errorf("export to unexpected path %s", r.URL.Path)
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Error(err)
	}
	return b
}

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
		c := newCollector(t)
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
		c.mu.Lock()
		if c.posts != 0 {
			t.Errorf("%v: %d exports received; want none", env, c.posts)
		}
		c.mu.Unlock()
	}
}

// The real Setup, configured by the environment alone, exports spans and
// metrics over OTLP/HTTP when Shutdown flushes them, with the resource the
// environment names.
func TestOTLPHTTPExport(t *testing.T) {
	for _, service := range []string{"", "nightly-snapshots"} {
		c := newCollector(t)
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
		c.mu.Lock()
		if strings.Join(c.spans, ",") != "test.child,test.parent" {
			t.Errorf("spans received: %v", c.spans)
		}
		if strings.Join(c.metrics, ",") != "test.count" {
			t.Errorf("metrics received: %v", c.metrics)
		}
		if len(c.service) == 0 || c.service[0] != want || c.attrs["service.version"] != "v9.9.9" ||
			c.attrs["deployment.environment.name"] != "test" {
			t.Errorf("resource: service.name %v, attributes %v", c.service, c.attrs)
		}
		c.mu.Unlock()
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
