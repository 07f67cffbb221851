package logging

import (
	"context"
	"encoding/json"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A line logged with TraceFields names the active span's trace and span as
// Cloud Logging reads them; with no span active, it names none.
func TestTraceFields(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "op")
	defer span.End()
	log, buf := logger(t, "json", "info")
	log.Info("traced", TraceFields(ctx, "proj")...)
	log.Info("untraced", TraceFields(context.Background(), "proj")...)
	log.Info("no project", TraceFields(ctx, "")...)
	dec := json.NewDecoder(buf)
	var lines []map[string]any
	for dec.More() {
		var l map[string]any
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	sc := span.SpanContext()
	if got := lines[0]; got[TraceKey] != "projects/proj/traces/"+sc.TraceID().String() ||
		got[SpanIDKey] != sc.SpanID().String() || got[TraceSampledKey] != true {
		t.Errorf("traced line: %v", got)
	}
	for _, l := range lines[1:] {
		if _, ok := l[TraceKey]; ok {
			t.Errorf("%v names a trace", l["message"])
		}
	}
}
