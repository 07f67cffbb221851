package snapshot

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// gateStage is the publication gate (WithGate), the first stage under the
// lock: checkGate, logged and counted (gated). The lock makes the stored
// version it compares with the one this write would replace: no other
// writer of the date commits between the comparison and the root. It
// returns nil when the gate is off or this is not a write (a repair
// completes what a gated write let through).
func (j *job) gateStage(snap *model.Snapshot) (*gate.Report, error) {
	if j.op != opWrite || j.w.cfg.gate == nil {
		return nil, nil
	}
	ctx, span := j.w.tel.start(j.wctx, SpanGate)
	rep, err := j.w.checkGate(ctx, j.id, snap)
	if rep != nil {
		span.SetAttributes(attribute.Bool("snapwriter.gate.held", rep.Held), attribute.Bool("snapwriter.gate.closing", rep.ClosingPeriod))
	}
	endSpan(span, err)
	if rep == nil || err != nil {
		return nil, err
	}
	return j.gated(rep), nil
}

// checkGate compares snap, the input of a write of id, with what readers
// have — the newest complete snapshot before id (the count rule) and,
// when id is stored complete, its stored version (the value rule, or at a
// month-end closing the closing rule) — and returns the gate's report:
// nil when the gate is off, or when the write will skip a stored complete
// snapshot anyway (WithSkipComplete). The input's data is read as the
// chunks will send it (inputRows), so the gate judges the bytes that are
// then written. Each read (the stored root, the newest complete
// snapshot, a batch of districts) is bounded by the request timeout
// (WithRequestTimeout). A read that fails or times out holds (a comparison
// that cannot be made lets nothing through), unless ctx ended: that is the
// error.
func (w *Writer) checkGate(ctx context.Context, id string, snap *model.Snapshot) (*gate.Report, error) {
	o := w.cfg.gate
	if o == nil {
		return nil, nil
	}
	r := NewReader(w.client, w.cfg.collection)
	input := inputRows(id, snap)
	opts := *o
	opts.Closing = input.closing
	check := gate.NewCheck(id, opts)
	fail := func(what string, err error) (*gate.Report, error) {
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		check.Fail(what, err)
		return check.Report(), nil
	}
	bound := w.cfg.reqTimeout
	rctx, cancel := withTimeout(ctx, bound)
	stored, _, err := r.openRows(rctx, id, view{})
	cancel()
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fail("reading the stored snapshot", err)
	}
	if stored.complete && w.cfg.skipComplete {
		return nil, nil
	}
	rctx, cancel = withTimeout(ctx, bound)
	base, live, err := r.newestCompleteBefore(rctx, id)
	cancel()
	if err != nil {
		return fail("finding the newest complete snapshot", err)
	}
	check.Baseline(base, live, slices.Collect(maps.Keys(input.ids)))
	if stored.complete {
		check.Stored(id)
		if err := compare(ctx, check, stored, input, bound); err != nil {
			return fail("comparing with the stored snapshot", err)
		}
	}
	return check.Report(), nil
}

// gated logs and counts the gate's decision rep, and returns it. A held
// snapshot is one ERROR line, the line operators alert on, naming the
// rules and a sample of the districts and fields.
func (j *job) gated(rep *gate.Report) *gate.Report {
	j.w.tel.gated(j.ctx, rep.Held)
	fields := []zap.Field{zap.Bool("closingPeriod", rep.ClosingPeriod), zap.String("baseline", rep.Baseline.SnapshotID), zap.String("compared", rep.Compared)}
	switch {
	case rep.Held:
		rules := make([]string, len(rep.Holds))
		holds := make([]heldLog, len(rep.Holds))
		for i, h := range rep.Holds {
			rules[i] = string(h.Rule)
			holds[i] = heldLog{Rule: string(h.Rule), Message: h.Message, Districts: len(h.Districts),
				DistrictsSample: sample(h.Districts), FieldsSample: sample(h.Fields)}
		}
		fields = append(fields, zap.Strings("rules", rules), zap.Any("holds", holds))
		j.log.Error("publication held by the gate: nothing written; `snapwriter diff` shows what differs", fields...)
	case rep.PassedByClosingRule:
		j.log.Info("passed the publication gate by the month-end closing rule", append(fields, zap.Int("allowedDeltas", len(rep.Allowed())))...)
	default:
		j.log.Info("passed the publication gate", fields...)
	}
	return rep
}

// heldLog is one hold as the ERROR line of a held write gives it: the
// rule, its message, and samples of the districts and fields (a line
// carries at most a sample of a list: docs/observability.md).
type heldLog struct {
	Rule            string   `json:"rule"`
	Message         string   `json:"message"`
	Districts       int      `json:"districts"`
	DistrictsSample []string `json:"districtsSample"`
	FieldsSample    []string `json:"fieldsSample,omitempty"`
}

// held is the Result of a write the gate held, started at start: nothing
// written.
func (j *job) held(rep *gate.Report, start time.Time) *Result {
	return &Result{SnapshotID: j.id, Outcome: OutcomeHeld, FailedDistricts: []string{}, Gate: rep,
		TotalDurationMs: j.w.cfg.now().Sub(start).Milliseconds(), LockWaitMs: j.lockWait.Milliseconds()}
}

// gateRecord is the gate's record of a snapshot it let through by the
// closing rule (rep), written with the root: nil for any other.
func (j *job) gateRecord(rep *gate.Report) *layout.GateRecord {
	if rep == nil || !rep.PassedByClosingRule {
		return nil
	}
	allowed := rep.Allowed()
	rec := &layout.GateRecord{Stamp: j.in.Stamp(), PassedBy: "closing", CheckedAt: layout.IsoMillis(j.w.cfg.now()),
		Baseline: rep.Baseline.SnapshotID, Compared: rep.Compared, AllowedDeltas: int64(len(allowed)), Deltas: []layout.GateDelta{}}
	for _, d := range allowed[:min(len(allowed), layout.MaxGateDeltas)] {
		rec.Deltas = append(rec.Deltas, layout.GateDelta{DistrictID: d.DistrictID, Field: d.Field, Class: string(d.Class), Old: d.Old.V, New: d.New.V})
	}
	return rec
}
