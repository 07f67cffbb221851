package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/logging"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/retry"
)

// A write's telemetry is OpenTelemetry's: one span per write or repair,
// with a child for each step under the lock (docs/observability.md lists
// them), and metrics named after OpenTelemetry's semantic conventions.
// They go to the providers given with WithTracerProvider and
// WithMeterProvider, by default the global ones, which are no-ops until a
// program installs an SDK (cmd/snapwriter does when OTEL_TRACES_EXPORTER
// or OTEL_METRICS_EXPORTER is set). The Firestore client traces its RPCs
// through the global TracerProvider, under the span of the step that made
// them. No attribute carries a lock key or a lockId: the key's hash only,
// as the logs do.

// instrumentationName names the tracer and the meter: the package.
const instrumentationName = "github.com/snapwriter/snapwriter/snapshot"

// The spans' names.
const (
	SpanWrite       = "snapwriter.write"        // a Write: validation, lock, root, chunks, finish, release
	SpanRepair      = "snapwriter.repair"       // a Repair, likewise
	SpanLockAcquire = "snapwriter.lock.acquire" // taking the lock, its wait included
	SpanGate        = "snapwriter.gate"         // the publication gate's check (WithGate)
	SpanRoot        = "snapwriter.root"         // the root transaction (a repair's takeover)
	SpanChunk       = "snapwriter.chunk"        // one chunk's transaction, all its attempts
	SpanRecord      = "snapwriter.record"       // one progress record in the root
	SpanFinish      = "snapwriter.finish"       // recording the outcome in the manifest
	SpanLockRelease = "snapwriter.lock.release" // handing the lock back
)

// The metrics' names.
const (
	MetricDistrictsWritten = "snapwriter.districts.written"        // counter, {district}
	MetricChunkDuration    = "snapwriter.chunk.commit.duration"    // histogram, s
	MetricRetries          = "snapwriter.retries"                  // counter, {retry}, by rpc.response.status_code
	MetricContentionWaits  = "snapwriter.contention.waits"         // counter, {wait}
	MetricLockWait         = "snapwriter.lock.wait.duration"       // histogram, s
	MetricWriteDuration    = "snapwriter.write.duration"           // histogram, s
	MetricWrites           = "snapwriter.writes"                   // counter, {write}, by outcome and error.type
	MetricWriteRateLimit   = "snapwriter.write_rate.limit"         // gauge, {write}/s
	MetricBudgetWait       = "snapwriter.write_rate.wait.duration" // histogram, s
	MetricPushBacks        = "snapwriter.store.pushbacks"          // counter, {answer}, by rpc.response.status_code
	MetricGateHeld         = "snapwriter.gate.held"                // counter, {snapshot}: 1 a held snapshot, 0 one that passed
)

// The attributes' keys of snapwriter's own (error.type and
// rpc.response.status_code are OpenTelemetry's).
const (
	attrSnapshotID    = attribute.Key("snapwriter.snapshot.id")
	attrOperation     = attribute.Key("snapwriter.operation")
	attrOutcome       = attribute.Key("snapwriter.outcome")
	attrLockBackend   = attribute.Key("snapwriter.lock.backend")
	attrLockKeyHash   = attribute.Key("snapwriter.lock.key_hash")
	attrLockAcquired  = attribute.Key("snapwriter.lock.acquired")
	attrFence         = attribute.Key("snapwriter.fence")
	attrAttempts      = attribute.Key("snapwriter.attempts")
	attrChunkIndex    = attribute.Key("snapwriter.chunk.index")
	attrChunkOps      = attribute.Key("snapwriter.chunk.ops")
	attrChunkOutcome  = attribute.Key("snapwriter.chunk.outcome")
	attrDistricts     = attribute.Key("snapwriter.districts")
	attrDistrictsDone = attribute.Key("snapwriter.districts.written")
	attrFailedChunks  = attribute.Key("snapwriter.chunks.failed")
	attrPages         = attribute.Key("snapwriter.pages")
	attrRootDecision  = attribute.Key("snapwriter.root.decision")
	attrTakeover      = attribute.Key("snapwriter.root.takeover")
)

// A chunk span's outcomes (snapwriter.chunk.outcome).
const (
	chunkCommitted    = "committed"
	chunkFailed       = "failed"
	chunkFencedOut    = "fenced_out"
	chunkNotAttempted = "not_attempted"
)

// otelOptions are the providers a Writer reports to; nil: the global one.
type otelOptions struct {
	tp trace.TracerProvider
	mp metric.MeterProvider
}

// WithTracerProvider sets the TracerProvider a Writer's spans go to
// (default: the global one, otel.GetTracerProvider, a no-op until a
// program installs one).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.otel.tp = tp }
}

// WithMeterProvider sets the MeterProvider a Writer's metrics go to
// (default: the global one, otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.otel.mp = mp }
}

// telemetry is a Writer's tracer and instruments.
type telemetry struct {
	tracer  trace.Tracer
	project string // of the traces that log lines name

	districts     metric.Int64Counter
	chunkDuration metric.Float64Histogram
	retries       metric.Int64Counter
	contention    metric.Int64Counter
	lockWait      metric.Float64Histogram
	writeDuration metric.Float64Histogram
	writes        metric.Int64Counter
	rateGauge     metric.Float64Gauge
	budgetWait    metric.Float64Histogram
	pushBacks     metric.Int64Counter
	gateHeld      metric.Int64Counter
}

// secondsBuckets are the bucket boundaries of the duration histograms, in
// seconds, as OpenTelemetry's semantic conventions advise for durations:
// the SDK's default ones are for milliseconds.
var secondsBuckets = metric.WithExplicitBucketBoundaries(0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 30, 60, 120)

// newTelemetry makes the tracer and instruments of a Writer from o, whose
// log lines name traces of project.
func newTelemetry(o otelOptions, project string) (*telemetry, error) {
	tp, mp := o.tp, o.mp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentationName)
	t := &telemetry{tracer: tp.Tracer(instrumentationName), project: project}
	var errs []error
	add := func(err error) { errs = append(errs, err) }
	var err error
	t.districts, err = m.Int64Counter(MetricDistrictsWritten, metric.WithUnit("{district}"),
		metric.WithDescription("District documents written (committed chunks' sets)."))
	add(err)
	t.chunkDuration, err = m.Float64Histogram(MetricChunkDuration, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Duration of a chunk's transaction, all its attempts."))
	add(err)
	t.retries, err = m.Int64Counter(MetricRetries, metric.WithUnit("{retry}"),
		metric.WithDescription("Transactions retried, by the gRPC status code of the failed attempt."))
	add(err)
	t.contention, err = m.Int64Counter(MetricContentionWaits, metric.WithUnit("{wait}"),
		metric.WithDescription("Retries after ABORTED: another transaction held a document this one needed."))
	add(err)
	t.lockWait, err = m.Float64Histogram(MetricLockWait, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Time taken to acquire a snapshot's lock, its wait for another writer included."))
	add(err)
	t.writeDuration, err = m.Float64Histogram(MetricWriteDuration, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Duration of a write or repair, its input's validation and its lock's acquisition and release included."))
	add(err)
	t.writes, err = m.Int64Counter(MetricWrites, metric.WithUnit("{write}"),
		metric.WithDescription("Writes and repairs, by outcome and error.type (the name of the snapshot sentinel their error matches)."))
	add(err)
	t.rateGauge, err = m.Float64Gauge(MetricWriteRateLimit, metric.WithUnit("{write}/s"),
		metric.WithDescription("The district write budget's rate: Firestore's ramp for a new key range, the writer's share of it, lowered while the store pushes back."))
	add(err)
	t.budgetWait, err = m.Float64Histogram(MetricBudgetWait, metric.WithUnit("s"), secondsBuckets,
		metric.WithDescription("Time a chunk attempt waited for the write budget before it was sent."))
	add(err)
	t.pushBacks, err = m.Int64Counter(MetricPushBacks, metric.WithUnit("{answer}"),
		metric.WithDescription("Chunk commits the store refused for load (RESOURCE_EXHAUSTED, ABORTED), by gRPC status code."))
	add(err)
	t.gateHeld, err = m.Int64Counter(MetricGateHeld, metric.WithUnit("{snapshot}"),
		metric.WithDescription("Snapshots the publication gate held; a snapshot it let through adds 0, so that every gated run exports a point and an alert on a held one clears on the next that passes."))
	add(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("snapshot: telemetry instruments: %w", err)
	}
	return t, nil
}

// logger is l with the fields that link its lines to the span in ctx in
// Cloud Logging (none when no span is recording).
func (t *telemetry) logger(ctx context.Context, l *zap.Logger) *zap.Logger {
	if f := logging.TraceFields(ctx, t.project); len(f) > 0 {
		return l.With(f...)
	}
	return l
}

// start starts span name, a child of the one in ctx.
func (t *telemetry) start(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// startRun starts the span of a write or repair of snapshot id. Its end
// function ends it with the run's Result and error, and records the run's
// metrics.
func (t *telemetry) startRun(ctx context.Context, op operation, id string) (context.Context, func(*Result, error)) {
	name := SpanWrite
	if op == opRepair {
		name = SpanRepair
	}
	t0 := time.Now()
	ctx, span := t.start(ctx, name, attrSnapshotID.String(id), attrOperation.String(string(op)))
	return ctx, func(res *Result, err error) {
		attrs := []attribute.KeyValue{attrOperation.String(string(op)), attrOutcome.String(outcomeName(res, err))}
		if err != nil {
			attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(err)))
		}
		if res != nil {
			span.SetAttributes(attrFence.String(res.Fence), attrDistrictsDone.Int(res.DistrictsWritten),
				attrFailedChunks.Int(res.FailedChunks))
		}
		span.SetAttributes(attrs...)
		endSpan(span, err)
		ctx := context.WithoutCancel(ctx)
		t.writeDuration.Record(ctx, time.Since(t0).Seconds(), metric.WithAttributes(attrs...))
		t.writes.Add(ctx, 1, metric.WithAttributes(attrs...))
	}
}

// outcomeName is the snapwriter.outcome of a run: its Result's Outcome,
// or "notWritten" when it ended before its root.
func outcomeName(res *Result, err error) string {
	switch {
	case res != nil && res.Outcome != 0:
		return res.Outcome.String()
	case err == nil:
		return OutcomeComplete.String()
	}
	return OutcomeNotWritten.String()
}

// endSpan ends span, with err recorded and the span's status an error when
// err is one: its error.type says which (errorType).
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
	}
	span.End()
}

// endStep ends the span of a step that ran under the job's retry: with
// its attempts, and err. A root transaction that found the snapshot
// complete or resumable decided, and did not fail.
func endStep(span trace.Span, st retry.Stats, err error) {
	span.SetAttributes(attrAttempts.Int(st.Retries + 1))
	switch {
	case errors.Is(err, errSkip):
		span.SetAttributes(attrRootDecision.String("skip"))
		err = nil
	case errors.Is(err, errResume):
		span.SetAttributes(attrRootDecision.String("resume"))
		err = nil
	}
	endSpan(span, err)
}

// errorType is an error's error.type: the name the table of endings
// gives it (internal/ending: the first ending it matches that has a
// name, the one its exit code is chosen by — ErrPartial is "Partial",
// model.ErrInvalid "InvalidInput", locking.ErrAcquisitionTimeout
// "LockHeld"), else its cause as the program tells failures apart — a
// context's end, a gRPC status code — else "_OTHER".
func errorType(err error) string {
	if name := ending.Name(err); name != "" {
		return name
	}
	switch {
	case errors.Is(err, context.Canceled):
		return "Canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return codeName(codes.DeadlineExceeded)
	}
	if s, ok := status.FromError(err); ok && s.Code() != codes.OK && s.Code() != codes.Unknown {
		return codeName(s.Code())
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// gated counts the gate's decision on a snapshot: 1 held, 0 passed. The
// 0 is exported too: it is the point that closes an alert a held run
// opened (docs/operations.md).
func (t *telemetry) gated(ctx context.Context, held bool) {
	n := int64(0)
	if held {
		n = 1
	}
	t.gateHeld.Add(context.WithoutCancel(ctx), n)
}

// retried counts a retry of an attempt that failed with err, by its gRPC
// code, and a contention wait when the code is ABORTED, and notes it on
// the span in ctx.
func (t *telemetry) retried(ctx context.Context, err error, wait time.Duration) {
	code := status.Code(err)
	t.retries.Add(ctx, 1, metric.WithAttributes(semconv.RPCResponseStatusCode(codeName(code))))
	if code == codes.Aborted {
		t.contention.Add(ctx, 1)
	}
	trace.SpanFromContext(ctx).AddEvent("retry", trace.WithAttributes(
		semconv.RPCResponseStatusCode(codeName(code)), attribute.Float64("snapwriter.retry.wait", wait.Seconds())))
}

// BudgetWaited records a chunk attempt's wait d for the write budget.
func (t *telemetry) BudgetWaited(ctx context.Context, d time.Duration) {
	t.budgetWait.Record(context.WithoutCancel(ctx), d.Seconds())
}

// RateLimit records the write budget's rate now.
func (t *telemetry) RateLimit(ctx context.Context, limit float64) {
	t.rateGauge.Record(context.WithoutCancel(ctx), limit)
}

// PushedBack counts a chunk commit the store refused with code.
func (t *telemetry) PushedBack(ctx context.Context, code codes.Code) {
	t.pushBacks.Add(context.WithoutCancel(ctx), 1, metric.WithAttributes(semconv.RPCResponseStatusCode(codeName(code))))
}

// codeName is a gRPC code as rpc.response.status_code spells it: the
// canonical name, "UNAVAILABLE".
func codeName(c codes.Code) string { return rpccode.Code(c).String() }

// acquired ends the span of a lock acquisition that took wait and ended
// with err, and records the wait.
func (t *telemetry) acquired(ctx context.Context, span trace.Span, wait time.Duration, lease *locking.Lease, err error) {
	if lease != nil {
		span.SetAttributes(attrFence.String(lease.Fence()))
	}
	got := attrLockAcquired.Bool(err == nil)
	span.SetAttributes(got)
	t.lockWait.Record(context.WithoutCancel(ctx), wait.Seconds(), metric.WithAttributes(got))
	endSpan(span, err)
}

// lockAttrs are the attributes of a lock acquisition of key on backend:
// the key's hash, never the key.
func lockAttrs(backend, key string) []attribute.KeyValue {
	return []attribute.KeyValue{attrLockBackend.String(backend), attrLockKeyHash.String(locking.HashKey(key))}
}

// chunkDone ends span, the span of chunk result r, with its outcome, and
// records the chunk's duration and the districts it wrote.
func (t *telemetry) chunkDone(ctx context.Context, span trace.Span, r BatchResult) {
	outcome, attempts := chunkCommitted, r.RetryAttempts+1
	switch {
	case r.Success:
	case r.notAttempted:
		outcome, attempts = chunkNotAttempted, 0
	case errors.Is(r.Err, ErrFencedOut):
		outcome = chunkFencedOut
	default:
		outcome = chunkFailed
	}
	span.SetAttributes(attrChunkOutcome.String(outcome), attrAttempts.Int(attempts), attrDistricts.Int(len(r.DistrictIDs)))
	ctx = context.WithoutCancel(ctx)
	if attempts > 0 {
		t.chunkDuration.Record(ctx, float64(r.DurationMs)/1000, metric.WithAttributes(attrChunkOutcome.String(outcome)))
	}
	if r.Success {
		t.districts.Add(ctx, int64(len(r.DistrictIDs)))
	}
	endSpan(span, r.Err)
}
