package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/model"
)

// docState is every document of snapshot id as stored (leftOf): its data
// and when it was last written, by path. Two equal states mean nothing was
// written in between, not even the same bytes again.
func (e *env) docState(id string) map[string]string {
	e.t.Helper()
	out := map[string]string{}
	for _, path := range e.leftOf(id) {
		doc, err := e.clean.Doc(DefaultCollection + "/" + path).Get(context.Background())
		if err != nil {
			e.t.Fatal(err)
		}
		out[path] = fmt.Sprintf("%v@%v", doc.Data(), doc.UpdateTime.UnixNano())
	}
	return out
}

// dayOf is a generated snapshot of date, n districts, with seed.
func dayOf(date string, n int, seed int64) *model.Snapshot { return model.Generate(date, n, seed) }

// setCounter sets district i's membership.total in s to v.
func setCounter(t *testing.T, s *model.Snapshot, i int, v int64) (old int64) {
	t.Helper()
	data, err := s.Payload.Districts[i].Data()
	if err != nil {
		t.Fatal(err)
	}
	m := data["membership"].(map[string]any)
	old = m["total"].(int64)
	m["total"] = v
	return old
}

// heldReport checks that err is a held write's, with Result res, and
// returns the gate's report.
func heldReport(t *testing.T, res *Result, err error) *gate.Report {
	t.Helper()
	var he *HeldError
	if !errors.Is(err, ErrHeld) || !errors.As(err, &he) {
		t.Fatalf("err %v, want ErrHeld", err)
	}
	if res == nil || res.Outcome != OutcomeHeld || res.Gate != he.Report || !res.Gate.Held || res.DistrictsWritten != 0 {
		t.Fatalf("result %+v, want held with the error's report", res)
	}
	return he.Report
}

// holdOf is the report's hold of rule r.
func holdOf(rep *gate.Report, r gate.Rule) *gate.Hold {
	for i := range rep.Holds {
		if rep.Holds[i].Rule == r {
			return &rep.Holds[i]
		}
	}
	return nil
}

// A gated write of a date with fewer districts than the newest complete
// snapshot before it is held: nothing of it is stored, the report names
// the missing districts. One with them all (and more) passes, and its
// Result carries the report.
func TestGateCountRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.writer(WithGate(gate.Options{}))
	mustWrite(t, w, "2026-11-19", dayOf("2026-11-19", 6, 1))
	fewer := dayOf("2026-11-20", 6, 2)
	fewer.Payload.Districts = slices.Delete(fewer.Payload.Districts, 2, 3) // district "3"
	fewer.Payload.Metadata.DistrictCount = 5
	res, err := w.Write(context.Background(), "2026-11-20", fewer)
	rep := heldReport(t, res, err)
	h := holdOf(rep, gate.RuleCount)
	if h == nil || !slices.Equal(h.Districts, []string{"3"}) || rep.Baseline.SnapshotID != "2026-11-19" {
		t.Errorf("report %+v, want the count rule holding for district 3 against 2026-11-19", rep)
	}
	if got := e.docState("2026-11-20"); len(got) != 0 {
		t.Errorf("a held write stored %d documents", len(got))
	}
	more := dayOf("2026-11-20", 7, 2)
	res = mustWrite(t, w, "2026-11-20", more)
	if res.Gate == nil || res.Gate.Held || res.Outcome != OutcomeComplete || len(res.Gate.Districts.Added) != 1 {
		t.Errorf("result %+v gate %+v, want complete with a report of one district added", res, res.Gate)
	}
	// A date older than every stored one has nothing to compare with.
	res = mustWrite(t, w, "2026-11-01", dayOf("2026-11-01", 2, 3))
	if res.Gate == nil || res.Gate.Held || res.Gate.Baseline.SnapshotID != "" {
		t.Errorf("gate %+v, want passed without a baseline", res.Gate)
	}
}

// A held rewrite of a stored complete date leaves every document of it as
// it was, byte for byte and write time for write time. Changed values
// hold unless allowed; a removed district holds even then.
func TestGateValueRuleHeldWritesNothing(t *testing.T) {
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		mustWrite(t, e.writer(), day, gen(30, 1))
		before := e.docState(day)

		changed := gen(30, 1)
		old := setCounter(t, changed, 4, 9999)
		res, err := e.writer(WithGate(gate.Options{})).Write(ctx, day, changed)
		rep := heldReport(t, res, err)
		h := holdOf(rep, gate.RuleValue)
		if h == nil || !slices.Equal(h.Districts, []string{changed.Payload.Districts[4].DistrictID}) || rep.Compared != day {
			t.Errorf("report %+v, want the value rule holding for one district", rep)
		}
		if len(rep.Changes) != 1 || len(rep.Changes[0].Changes) != 1 || rep.Changes[0].Changes[0].Field != "data.membership.total" ||
			rep.Changes[0].Changes[0].Old.V != old || rep.Changes[0].Changes[0].New.V != int64(9999) {
			t.Errorf("changes %+v, want data.membership.total %d → 9999", rep.Changes, old)
		}
		if after := e.docState(day); !maps.Equal(before, after) {
			t.Errorf("a held write changed what is stored (%d documents before, %d after)", len(before), len(after))
		}

		removed := gen(30, 1)
		removed.Payload.Districts = removed.Payload.Districts[:29]
		removed.Payload.Metadata.DistrictCount = 29
		res, err = e.writer(WithGate(gate.Options{AllowValueChanges: true})).Write(ctx, day, removed)
		if rep := heldReport(t, res, err); holdOf(rep, gate.RuleRemoved) == nil {
			t.Errorf("holds %+v, want the removed rule, allowed value changes or not", rep.Holds)
		}
		if after := e.docState(day); !maps.Equal(before, after) {
			t.Error("a held write changed what is stored")
		}

		res = mustWrite(t, e.writer(WithGate(gate.Options{AllowValueChanges: true})), day, changed)
		if res.Gate == nil || res.Gate.Held || len(res.Gate.Districts.Changed) != 1 {
			t.Errorf("gate %+v, want passed with one district changed", res.Gate)
		}
		if got := e.get(day); !model.Equal(got, changed) {
			t.Errorf("stored after the allowed rewrite: %s", model.Diff(got, changed))
		}
	})
}

// closingDay is 2026-10-31 as the source reconciles it on 2026-11-05: a
// month-end closing input.
func closingDay(n int, seed int64) *model.Snapshot {
	s := dayOf("2026-10-31", n, seed)
	closing := true
	s.Payload.Metadata.IsClosingPeriodData = &closing
	s.Payload.Metadata.CollectionDate = "2026-11-05"
	return s
}

// At a month-end closing, counters may move within their bound: the write
// passes by the closing rule and records the deltas it allowed beside the
// root, where Reader.Provenance finds them; past the bound it holds. A
// later write of the date that is not a closing one leaves no provenance
// that describes it.
func TestGateClosingRuleProvenance(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const date = "2026-10-31"
	mustWrite(t, e.writer(), date, closingDay(8, 1))
	gated := e.writer(WithGate(gate.Options{}))
	r := NewReader(e.clean, "")

	within := closingDay(8, 1)
	old := setCounter(t, within, 2, 0)
	bound := int64(gate.CounterBound(float64(old)))
	setCounter(t, within, 2, old+bound)
	res := mustWrite(t, gated, date, within)
	if res.Gate == nil || !res.Gate.PassedByClosingRule || len(res.Gate.Allowed()) != 1 {
		t.Fatalf("gate %+v, want passed by the closing rule with one delta", res.Gate)
	}
	p, err := r.Provenance(ctx, date)
	if err != nil || p == nil || p.PassedBy != "closing" || p.AllowedDeltas != 1 || len(p.Deltas) != 1 ||
		p.Deltas[0].Field != "data.membership.total" || p.Deltas[0].New.V != old+bound || p.Compared != date {
		t.Fatalf("provenance %+v, %v", p, err)
	}
	if time.Since(p.CheckedAt) > time.Hour {
		t.Errorf("checked at %v", p.CheckedAt)
	}
	if rep, err := r.Verify(ctx, date, nil); err != nil || !rep.Intact || rep.Provenance == nil || rep.Provenance.AllowedDeltas != 1 {
		t.Errorf("verify: %+v, %v; want intact with the provenance", rep, err)
	}

	// Past the bound of the value now stored.
	past := closingDay(8, 1)
	stored := old + bound
	setCounter(t, past, 2, stored+int64(gate.CounterBound(float64(stored)))+1)
	before := e.docState(date)
	res, err = gated.Write(ctx, date, past)
	if rep := heldReport(t, res, err); holdOf(rep, gate.RuleClosing) == nil || !rep.ClosingPeriod {
		t.Errorf("holds %+v, want the closing rule", rep.Holds)
	}
	if !maps.Equal(before, e.docState(date)) {
		t.Error("a held write changed what is stored")
	}

	mustWrite(t, e.writer(), date, closingDay(8, 1))
	if p, err := r.Provenance(ctx, date); err != nil || p != nil {
		t.Errorf("after an ungated rewrite: provenance %+v, %v; want none", p, err)
	}
	if _, err := r.Provenance(ctx, "2026-10-30"); !errors.Is(err, ErrNotFound) {
		t.Errorf("provenance of a snapshot not stored: %v", err)
	}
}

// The gate reads what it compares; a failed read holds, and writes nothing.
func TestGateFailedComparisonHolds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mustWrite(t, e.writer(), day, gen(5, 1))
	// A district the manifest records written whose document is gone:
	// the comparison cannot be made.
	if _, err := e.clean.Collection(DefaultCollection).Doc(day).Collection("districts").Doc("district_2").Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	before := e.docState(day)
	res, err := e.writer(WithGate(gate.Options{})).Write(context.Background(), day, gen(5, 1))
	if rep := heldReport(t, res, err); holdOf(rep, gate.RuleCompare) == nil {
		t.Errorf("holds %+v, want the compare rule", rep.Holds)
	}
	if !maps.Equal(before, e.docState(day)) {
		t.Error("a held write changed what is stored")
	}
}

// A gated write counts its decision in snapwriter.gate.held: 1 for a
// held snapshot, and a point of 0 for one that passed — the point that
// closes an alert a held run opened. The write's own metrics and span say
// "held".
func TestGateHeldMetric(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	o := newObserved()
	w := e.writer(append(o.options(), WithGate(gate.Options{}))...)
	mustWrite(t, w, "2026-11-19", dayOf("2026-11-19", 4, 1))
	points := func() int {
		var rm metricdata.ResourceMetrics
		if err := o.reader.Collect(context.Background(), &rm); err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == MetricGateHeld {
					n += len(d.DataPoints)
				}
			}
		}
		return n
	}
	if got, n := o.sum(t, MetricGateHeld), points(); got != 0 || n != 1 {
		t.Errorf("after a write that passed: %s = %d in %d points, want 0 in 1", MetricGateHeld, got, n)
	}
	_, err := w.Write(context.Background(), day, dayOf(day, 3, 1))
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("err %v, want held", err)
	}
	if got := o.sum(t, MetricGateHeld); got != 1 {
		t.Errorf("after a held write: %s = %d, want 1", MetricGateHeld, got)
	}
	if got := o.sum(t, MetricWrites, attrOutcome.String("held"), attribute.String("error.type", "GateHeld")); got != 1 {
		t.Errorf("%s{outcome=held, error.type=GateHeld} = %d, want 1", MetricWrites, got)
	}
	gates := named(o.spans.GetSpans(), SpanGate)
	if len(gates) != 2 || attr(gates[1], "snapwriter.gate.held") != "true" || attr(gates[0], "snapwriter.gate.held") != "false" {
		t.Errorf("%d %s spans, want 2: passed, then held", len(gates), SpanGate)
	}
}
