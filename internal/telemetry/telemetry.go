// Package telemetry sets up OpenTelemetry for the snapwriter command from
// the standard OTEL_* environment variables, exporting through the
// OpenTelemetry SDK and its autoexport package (OTLP by default), and is
// off unless the environment asks for it.
//
// Traces are exported when OTEL_TRACES_EXPORTER is set to an exporter
// (otlp, console); metrics when OTEL_METRICS_EXPORTER is (otlp, console,
// prometheus). Unset, empty or "none", that signal is off, and
// OTEL_SDK_DISABLED=true turns both off. The other variables —
// OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf
// by default, or grpc), OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES,
// OTEL_TRACES_SAMPLER… — configure a signal that is on and turn nothing
// on by themselves: autoexport alone would export OTLP when
// OTEL_TRACES_EXPORTER is unset, and a job that exported to localhost
// because some OTEL_ variable was set for another program would be a
// surprise.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/contrib/exporters/autoexport"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
)

// The environment variables that turn the signals on (see the package
// documentation), and the one that turns both off.
const (
	TracesExporterEnv  = "OTEL_TRACES_EXPORTER"
	MetricsExporterEnv = "OTEL_METRICS_EXPORTER"
	SDKDisabledEnv     = "OTEL_SDK_DISABLED"
)

// ServiceName is the service.name of the resource unless OTEL_SERVICE_NAME
// or OTEL_RESOURCE_ATTRIBUTES names another.
const ServiceName = "snapwriter"

// ErrConfig is what Setup's errors wrap when the environment asks for
// something it cannot do (an unknown exporter or protocol, a malformed
// OTEL_RESOURCE_ATTRIBUTES): a usage error, which a program reports before
// doing anything.
var ErrConfig = errors.New("OpenTelemetry configuration")

// Providers are the SDK providers Setup made for the signals that are on,
// kept for Shutdown to flush. The program reaches them through the global
// ones Setup installs, so they are not exported.
type Providers struct {
	tp *sdktrace.TracerProvider // nil: traces off
	mp *sdkmetric.MeterProvider // nil: metrics off
}

// Shutdown exports what is buffered — the spans ended since the last
// batch, the metrics since the last period — and stops the exporters. A
// program calls it on every exit, a failing or signalled one included,
// with a short deadline of its own: the run is over, and a collector that
// does not answer must not hold the exit up for long.
func (p *Providers) Shutdown(ctx context.Context) error {
	var errs []error
	if p.tp != nil {
		if err := p.tp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flushing traces: %w", err))
		}
	}
	if p.mp != nil {
		if err := p.mp.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("flushing metrics: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Setup makes the providers the OTEL_* environment asks for, and installs
// those that are on as the global ones (otel.SetTracerProvider,
// otel.SetMeterProvider) — which the Firestore client traces its RPCs
// through, and which snapshot.Writer reports to by default — with the W3C
// trace-context propagator. With no signal on it installs nothing, and
// returns Providers whose Shutdown does nothing. version is the
// service.version. Errors wrap ErrConfig.
func Setup(ctx context.Context, version string) (*Providers, error) {
	p := &Providers{}
	traces, metrics := on(TracesExporterEnv), on(MetricsExporterEnv)
	if strings.EqualFold(strings.TrimSpace(os.Getenv(SDKDisabledEnv)), "true") || !traces && !metrics {
		return p, nil
	}
	// service.name snapwriter, unless the environment names another:
	// resources merged later win.
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(ServiceName), semconv.ServiceVersion(version)),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	// A malformed attribute leaves the rest (the SDK says which on
	// stderr), as OpenTelemetry's SDKs do.
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("%w: resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", ErrConfig, err)
	}
	if traces {
		exp, err := autoexport.NewSpanExporter(ctx)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%q: %w", ErrConfig, TracesExporterEnv, os.Getenv(TracesExporterEnv), err)
		}
		p.tp = sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	}
	if metrics {
		r, err := autoexport.NewMetricReader(ctx)
		if err != nil {
			err = fmt.Errorf("%w: %s=%q: %w", ErrConfig, MetricsExporterEnv, os.Getenv(MetricsExporterEnv), err)
			return nil, errors.Join(err, p.Shutdown(ctx))
		}
		p.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r), sdkmetric.WithResource(res))
	}
	if p.tp != nil {
		otel.SetTracerProvider(p.tp)
		otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	}
	if p.mp != nil {
		otel.SetMeterProvider(p.mp)
	}
	return p, nil
}

// on reports whether the exporter variable env turns its signal on: set,
// and not "none".
func on(env string) bool {
	v := strings.TrimSpace(os.Getenv(env))
	return v != "" && v != "none"
}
