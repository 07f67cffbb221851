package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	nooptrace "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/logging"
	"github.com/snapwriter/snapwriter/locking"
)

// observed is a TracerProvider whose spans land in memory and a
// MeterProvider read on demand, as a Writer's options.
type observed struct {
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

func newObserved() *observed {
	o := &observed{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(o.spans))
	return o
}

func (o *observed) options() []Option {
	return []Option{WithTracerProvider(o.tp), WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader)))}
}

// run is the one span named name (a write or repair), and its children in
// the order they started.
func (o *observed) run(t *testing.T, name string) (tracetest.SpanStub, []tracetest.SpanStub) {
	t.Helper()
	var runs []tracetest.SpanStub
	all := o.spans.GetSpans()
	for _, s := range all {
		if s.Name == name {
			runs = append(runs, s)
		}
	}
	if len(runs) != 1 {
		t.Fatalf("%d %s spans, want 1", len(runs), name)
	}
	run := runs[0]
	if run.Parent.IsValid() {
		t.Errorf("%s has a parent", name)
	}
	var kids []tracetest.SpanStub
	for _, s := range all {
		if s.SpanContext.SpanID() == run.SpanContext.SpanID() {
			continue
		}
		if s.Parent.SpanID() != run.SpanContext.SpanID() || s.SpanContext.TraceID() != run.SpanContext.TraceID() {
			t.Errorf("span %s is not a child of %s", s.Name, name)
			continue
		}
		kids = append(kids, s)
	}
	sort.SliceStable(kids, func(i, k int) bool { return kids[i].StartTime.Before(kids[k].StartTime) })
	return run, kids
}

// attr is span s's attribute key, "" when it has none.
func attr(s tracetest.SpanStub, key attribute.Key) string {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.String()
		}
	}
	return ""
}

// named are the spans of kids named name.
func named(kids []tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, k := range kids {
		if k.Name == name {
			out = append(out, k)
		}
	}
	return out
}

// checkSteps asserts the order of a write's steps — acquire, root, the
// chunks, finish, release — and that the spans carry no lock key.
func checkSteps(t *testing.T, e *env, run tracetest.SpanStub, kids []tracetest.SpanStub, chunks int) {
	t.Helper()
	var order []string
	for _, k := range kids {
		if k.Name != SpanRecord && (len(order) == 0 || order[len(order)-1] != k.Name) {
			order = append(order, k.Name)
		}
	}
	want := []string{SpanLockAcquire, SpanRoot, SpanChunk, SpanFinish, SpanLockRelease}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("steps %v, want %v", order, want)
	}
	if n := len(named(kids, SpanChunk)); n != chunks {
		t.Errorf("%d chunk spans, want %d", n, chunks)
	}
	key := e.lockKey(day)
	for _, s := range append(kids, run) {
		for _, a := range s.Attributes {
			if strings.Contains(a.Value.String(), key) {
				t.Errorf("span %s attribute %s carries the lock key", s.Name, a.Key)
			}
		}
		if s.EndTime.Before(s.StartTime) || s.EndTime.After(run.EndTime) {
			t.Errorf("span %s ends outside its write", s.Name)
		}
	}
	acq := named(kids, SpanLockAcquire)[0]
	if attr(acq, attrLockKeyHash) != locking.HashKey(key) || attr(acq, attrLockAcquired) != "true" {
		t.Errorf("lock acquire attributes %v", acq.Attributes)
	}
}

// sum is the sum of metric name's points whose attributes include want
// (a histogram's count).
func (o *observed) sum(t *testing.T, name string, want ...attribute.KeyValue) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	has := func(set attribute.Set) bool {
		for _, kv := range want {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				return false
			}
		}
		return true
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						n += p.Value
					}
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					if has(p.Attributes) {
						n += int64(p.Count)
					}
				}
			}
		}
	}
	return n
}

// A complete write is one span with a child for each step, in order: the
// lock, the root, each chunk (its index, operations, one attempt,
// committed), the records, the finish, the release; its metrics count
// its districts and chunks.
func TestTraceOfCompleteWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := newObserved()
	core, logs := observer.New(zap.DebugLevel)
	res := mustWrite(t, e.writer(append(o.options(), WithLogger(zap.New(core)))...), day, gen(120, 1))
	run, kids := o.run(t, SpanWrite)
	checkSteps(t, e, run, kids, 3)
	// Every line of the write names its trace and span, as Cloud Logging
	// links them.
	trace := "projects/" + e.project + "/traces/" + run.SpanContext.TraceID().String()
	if len(logs.All()) == 0 {
		t.Error("nothing logged")
	}
	for _, l := range logs.All() {
		if f := l.ContextMap(); f[logging.TraceKey] != trace || f[logging.SpanIDKey] != run.SpanContext.SpanID().String() {
			t.Errorf("log line %q: trace %v span %v, want %s %s", l.Message, f[logging.TraceKey], f[logging.SpanIDKey], trace, run.SpanContext.SpanID())
		}
	}
	if attr(run, attrOutcome) != "complete" || attr(run, "error.type") != "" || run.Status.Code != otelcodes.Unset ||
		attr(run, attrSnapshotID) != day || attr(run, attrFence) != res.Fence {
		t.Errorf("write span: status %v, attributes %v", run.Status, run.Attributes)
	}
	ops := 0
	for i, c := range named(kids, SpanChunk) {
		var n int
		fmt.Sscan(attr(c, attrChunkOps), &n)
		ops += n
		if attr(c, attrChunkOutcome) != chunkCommitted || attr(c, attrAttempts) != "1" || c.Status.Code != otelcodes.Unset {
			t.Errorf("chunk %d: status %v, attributes %v", i, c.Status, c.Attributes)
		}
	}
	if ops != 120 {
		t.Errorf("chunks' operations add up to %d, want 120", ops)
	}
	for name, want := range map[string]int64{MetricDistrictsWritten: 120, MetricChunkDuration: 3, MetricWrites: 1, MetricWriteDuration: 1, MetricLockWait: 1, MetricRetries: 0,
		MetricBudgetWait: 3, MetricPushBacks: 0} {
		if got := o.sum(t, name); got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
	if got := o.sum(t, MetricWrites, attrOutcome.String("complete"), attrOperation.String("write")); got != 1 {
		t.Errorf("complete writes = %d, want 1", got)
	}
	if got, ok := o.gauge(t, MetricWriteRateLimit); !ok || got != 500 {
		t.Errorf("%s = %v (recorded %v), want 500", MetricWriteRateLimit, got, ok)
	}
}

// gauge is the last value of gauge metric name, and whether it was
// recorded.
func (o *observed) gauge(t *testing.T, name string) (float64, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if g, ok := m.Data.(metricdata.Gauge[float64]); ok && m.Name == name && len(g.DataPoints) > 0 {
				return g.DataPoints[len(g.DataPoints)-1].Value, true
			}
		}
	}
	return 0, false
}

// A partial write: the chunk refused for good is an error span
// (PERMISSION_DENIED), the chunk that met contention once retried it
// (its span notes the retry; the metrics count it by code), and the
// write's span ends in error with the kind its exit code comes from. The
// repair that completes it is traced as a repair.
func TestTraceOfPartialWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := newObserved()
	snap := gen(120, 2)
	denied, contended := snap.Payload.Districts[60].DistrictID, snap.Payload.Districts[10].DistrictID
	var aborted atomic.Bool
	e.f.setRule(func(c *commitCall) error {
		switch {
		case c.has(denied):
			return status.Error(codes.PermissionDenied, "injected")
		case c.has(contended) && aborted.CompareAndSwap(false, true): // the first chunk's first commit
			return status.Error(codes.Aborted, "injected contention")
		}
		return nil
	})
	res := mustPartial(t)(e.writer(o.options()...).Write(context.Background(), day, snap))
	run, kids := o.run(t, SpanWrite)
	checkSteps(t, e, run, kids, 3)
	if attr(run, attrOutcome) != "partial" || attr(run, "error.type") != "Partial" || run.Status.Code != otelcodes.Error {
		t.Errorf("write span: status %v, attributes %v", run.Status, run.Attributes)
	}
	chunks := named(kids, SpanChunk)
	byIndex := map[string]tracetest.SpanStub{}
	for _, c := range chunks {
		byIndex[attr(c, attrChunkIndex)] = c
	}
	first, second := byIndex["1"], byIndex["2"]
	if attr(first, attrChunkOutcome) != chunkCommitted || attr(first, attrAttempts) != "2" ||
		len(first.Events) != 1 || first.Events[0].Name != "retry" {
		t.Errorf("contended chunk: attributes %v, events %v", first.Attributes, first.Events)
	}
	if attr(second, attrChunkOutcome) != chunkFailed || attr(second, "error.type") != "PERMISSION_DENIED" ||
		second.Status.Code != otelcodes.Error || len(second.Events) == 0 {
		t.Errorf("refused chunk: status %v, attributes %v", second.Status, second.Attributes)
	}
	if got := o.sum(t, MetricDistrictsWritten); got != int64(res.DistrictsWritten) || got != 70 {
		t.Errorf("%s = %d, want 70 (the Result's %d)", MetricDistrictsWritten, got, res.DistrictsWritten)
	}
	if got := o.sum(t, MetricWrites, attrOutcome.String("partial"), attribute.String("error.type", "Partial")); got != 1 {
		t.Errorf("partial writes = %d, want 1", got)
	}
	if got := o.sum(t, MetricRetries, attribute.String("rpc.response.status_code", "ABORTED")); got != 1 {
		t.Errorf("ABORTED retries = %d, want 1", got)
	}
	if got := o.sum(t, MetricContentionWaits); got != 1 {
		t.Errorf("contention waits = %d, want 1", got)
	}
	if got := o.sum(t, MetricPushBacks, attribute.String("rpc.response.status_code", "ABORTED")); got != 1 || res.WriteRate.Aborted != 1 {
		t.Errorf("push-backs = %d, WriteRate %+v: want the one ABORTED", got, res.WriteRate)
	}
	if got := o.sum(t, MetricChunkDuration, attrChunkOutcome.String(chunkFailed)); got != 1 {
		t.Errorf("failed chunk durations = %d, want 1", got)
	}

	// Its repair is a span of its own: the takeover, then the one chunk
	// that was missing.
	e.f.setRule(nil)
	r := newObserved()
	if _, err := e.writer(r.options()...).Repair(context.Background(), day, snap); err != nil {
		t.Fatalf("Repair: %v", err)
	}
	run, kids = r.run(t, SpanRepair)
	checkSteps(t, e, run, kids, 1)
	if attr(run, attrOutcome) != "complete" || attr(run, attrOperation) != "repair" ||
		attr(named(kids, SpanRoot)[0], attrTakeover) != "true" {
		t.Errorf("repair span %v, root %v", run.Attributes, named(kids, SpanRoot)[0].Attributes)
	}
	if got := r.sum(t, MetricDistrictsWritten); got != 50 {
		t.Errorf("repair: %s = %d, want 50", MetricDistrictsWritten, got)
	}
}

// A fenced-out write (a newer writer took the snapshot over while it
// stalled after its root): its chunks are refused, and its span ends in
// error with the kind FencedOut.
func TestTraceOfFencedOutWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := newObserved()
	ctx := context.Background()
	resume, rootDone := make(chan struct{}), make(chan struct{})
	a := e.writer(append(o.options(), WithLockTTL(time.Minute),
		withBeforeChunks(func(context.Context) { close(rootDone); <-resume }))...)
	done := make(chan error, 1)
	go func() {
		_, err := a.Write(ctx, day, gen(120, 3))
		done <- err
	}()
	<-rootDone
	e.deleteLock(t) // A's lock "expires" behind its back
	mustWrite(t, e.writer(), day, gen(80, 4))
	close(resume)
	if err := <-done; !errors.Is(err, ErrFencedOut) {
		t.Fatalf("A: err = %v, want ErrFencedOut", err)
	}
	run, kids := o.run(t, SpanWrite)
	if attr(run, attrOutcome) != "fencedOut" || attr(run, "error.type") != "FencedOut" || run.Status.Code != otelcodes.Error {
		t.Errorf("write span: status %v, attributes %v", run.Status, run.Attributes)
	}
	fenced := 0
	for _, c := range named(kids, SpanChunk) {
		switch attr(c, attrChunkOutcome) {
		case chunkFencedOut:
			fenced++
			if attr(c, "error.type") != "FencedOut" || c.Status.Code != otelcodes.Error {
				t.Errorf("fenced-out chunk: status %v, attributes %v", c.Status, c.Attributes)
			}
		case chunkNotAttempted:
		default:
			t.Errorf("chunk %s: outcome %s", attr(c, attrChunkIndex), attr(c, attrChunkOutcome))
		}
	}
	if fenced == 0 {
		t.Error("no chunk span says fenced_out")
	}
	if got := o.sum(t, MetricDistrictsWritten); got != 0 {
		t.Errorf("%s = %d, want 0", MetricDistrictsWritten, got)
	}
	if got := o.sum(t, MetricWrites, attrOutcome.String("fencedOut"), attribute.String("error.type", "FencedOut")); got != 1 {
		t.Errorf("fenced-out writes = %d, want 1", got)
	}
}

// With no provider given and none installed, a write makes no span that
// records, and its log lines name no trace.
func TestNoTelemetryByDefault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	core, logs := observer.New(zap.DebugLevel)
	w := e.writer(WithLogger(zap.New(core)))
	_, span := w.tel.start(context.Background(), "probe")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Error("a Writer without providers records spans")
	}
	span.End()
	mustWrite(t, w, day, gen(10, 6))
	for _, l := range logs.All() {
		if _, ok := l.ContextMap()[logging.TraceKey]; ok {
			t.Errorf("log line %q names a trace", l.Message)
		}
	}
}

// TestPrintWriteTrace prints the trace of one write of 200 districts (4
// chunks) on the emulator as a tree of span names and durations, the
// Firestore client's own spans included (the global TracerProvider is
// ours for the test): docs/observability.md shows its output. Not
// parallel, so that no other test's client spans join it.
func TestPrintWriteTrace(t *testing.T) {
	e := newEnv(t)
	// The chunks' API client as the CLI dials the emulator, traced like
	// the Firestore client's connection.
	api, err := DialAPI(context.Background(), emu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer api.Close()
	// A write of another date first, untraced, so that the trace is not
	// of a cold emulator's first requests.
	mustWrite(t, e.writer(WithAPIClient(api)), "2026-11-19", gen(200, 4))
	o := newObserved()
	otel.SetTracerProvider(o.tp)
	defer otel.SetTracerProvider(nooptrace.NewTracerProvider())
	mustWrite(t, e.writer(append(o.options(), WithAPIClient(api))...), day, gen(200, 5))
	run, _ := o.runAll(t)
	var b strings.Builder
	printTree(&b, o.spans.GetSpans(), run, "")
	t.Logf("trace of one write:\n%s", b.String())
	if !strings.Contains(b.String(), "cloud.google.com/go/firestore.Client.RunTransaction") {
		t.Error("the Firestore client's spans do not nest under the write's")
	}
	// Nor do the client's own spans carry the lock key: not in an
	// attribute, an event or a status.
	key := e.lockKey(day)
	for _, sp := range o.spans.GetSpans() {
		texts := []string{sp.Name, sp.Status.Description}
		for _, a := range sp.Attributes {
			texts = append(texts, a.Value.String())
		}
		for _, ev := range sp.Events {
			texts = append(texts, ev.Name)
			for _, a := range ev.Attributes {
				texts = append(texts, a.Value.String())
			}
		}
		for _, x := range texts {
			if strings.Contains(x, key) {
				t.Errorf("span %s carries the lock key: %q", sp.Name, x)
			}
		}
	}
}

// runAll is the write span, and every span.
func (o *observed) runAll(t *testing.T) (tracetest.SpanStub, tracetest.SpanStubs) {
	all := o.spans.GetSpans()
	for _, s := range all {
		if s.Name == SpanWrite {
			return s, all
		}
	}
	t.Fatal("no write span")
	return tracetest.SpanStub{}, nil
}

// printTree writes s and its descendants in all, one a line, indented by
// depth, each with its duration and a few attributes.
func printTree(b *strings.Builder, all tracetest.SpanStubs, s tracetest.SpanStub, indent string) {
	var extra []string
	for _, k := range []attribute.Key{attrChunkIndex, attrChunkOps, attrAttempts, attrChunkOutcome, attrOutcome, attrDistricts} {
		if v := attr(s, k); v != "" {
			extra = append(extra, strings.TrimPrefix(string(k), "snapwriter.")+"="+v)
		}
	}
	fmt.Fprintf(b, "%s%-*s %7.1f ms  %s\n", indent, 60-len(indent), s.Name,
		float64(s.EndTime.Sub(s.StartTime).Microseconds())/1000, strings.Join(extra, " "))
	var kids []tracetest.SpanStub
	for _, k := range all {
		if k.Parent.SpanID() == s.SpanContext.SpanID() && k.SpanContext.TraceID() == s.SpanContext.TraceID() {
			kids = append(kids, k)
		}
	}
	sort.SliceStable(kids, func(i, k int) bool { return kids[i].StartTime.Before(kids[k].StartTime) })
	for _, k := range kids {
		printTree(b, all, k, indent+"  ")
	}
}

// A write stopped after its root (its context cancelled before any chunk
// started): every chunk span says not_attempted with no attempt, and no
// chunk's duration is recorded.
func TestTraceOfStoppedWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := newObserved()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := e.writer(append(o.options(), WithBatchSize(10), withBeforeChunks(func(context.Context) { cancel() }))...)
	if _, err := w.Write(ctx, day, gen(40, 5)); !errors.Is(err, ErrPartial) {
		t.Fatalf("stopped write: %v, want ErrPartial", err)
	}
	_, kids := o.run(t, SpanWrite)
	chunks := named(kids, SpanChunk)
	if len(chunks) != 4 {
		t.Fatalf("%d chunk spans, want 4", len(chunks))
	}
	for _, c := range chunks {
		if attr(c, attrChunkOutcome) != chunkNotAttempted || attr(c, attrAttempts) != "0" {
			t.Errorf("chunk %s: outcome %s, attempts %s; want not_attempted, 0",
				attr(c, attrChunkIndex), attr(c, attrChunkOutcome), attr(c, attrAttempts))
		}
	}
	if got := o.sum(t, MetricChunkDuration); got != 0 {
		t.Errorf("%s has %d samples, want none", MetricChunkDuration, got)
	}
}
