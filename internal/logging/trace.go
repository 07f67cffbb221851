package logging

import (
	"context"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// The keys under which Cloud Logging reads, from a JSON log line, the
// trace and span it belongs to, and links the line to them in Cloud Trace.
const (
	TraceKey        = "logging.googleapis.com/trace"
	SpanIDKey       = "logging.googleapis.com/spanId"
	TraceSampledKey = "logging.googleapis.com/trace_sampled"
)

// TraceFields are the fields that link a log line to the span active in
// ctx, in the form Cloud Logging reads: the trace as
// projects/PROJECT/traces/TRACE_ID, the span id, and whether the trace was
// sampled. There are none when no span is active (tracing is off) or the
// project is unknown, so that a log line never names a trace that does not
// exist.
func TraceFields(ctx context.Context, project string) []zap.Field {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || project == "" {
		return nil
	}
	return []zap.Field{
		zap.String(TraceKey, "projects/"+project+"/traces/"+sc.TraceID().String()),
		zap.String(SpanIDKey, sc.SpanID().String()),
		zap.Bool(TraceSampledKey, sc.IsSampled()),
	}
}
