package retention

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// pruner answers each id from a table; an id it lacks cancels the run.
type pruner struct {
	res    map[string]*snapshot.PruneResult
	errs   map[string]error
	cancel context.CancelFunc
}

func (p pruner) Prune(_ context.Context, id string) (*snapshot.PruneResult, error) {
	if _, ok := p.res[id]; !ok && p.errs[id] == nil {
		p.cancel()
		return nil, context.Canceled
	}
	return p.res[id], p.errs[id]
}

func TestRun(t *testing.T) {
	plan := snapshot.PrunePlan{Before: "2026-02-01", NewestComplete: "2026-03-01"}
	for _, id := range []string{"2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04", "2026-01-05", "2026-01-06", "2026-01-07", "2026-01-08"} {
		plan.Delete = append(plan.Delete, snapshot.Summary{SnapshotID: id, State: snapshot.StateComplete, Districts: 3})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := pruner{cancel: cancel,
		res: map[string]*snapshot.PruneResult{
			"2026-01-01": {Found: true, RootDeleted: true, DistrictsDeleted: 3},
			"2026-01-02": {Found: false},
		},
		errs: map[string]error{
			"2026-01-03": snapshot.ErrLockHeld,
			"2026-01-04": snapshot.ErrFencedOut,
			"2026-01-05": snapshot.ErrNewestComplete,
			"2026-01-06": errors.New("boom"),
		}}
	rep := NewReport(plan, false)
	rep.Run(ctx, p, func(err error) string { return "said: " + err.Error() })
	want := []outcome.Outcome{outcome.Pruned, outcome.Gone, outcome.LockHeld, outcome.FencedOut, outcome.Kept, outcome.Failed, outcome.Failed, outcome.NotStarted}
	for i, d := range rep.Snapshots {
		if d.Outcome != want[i] {
			t.Errorf("%s: %q, want %q", d.SnapshotID, d.Outcome, want[i])
		}
	}
	if rep.Snapshots[5].Error != "said: boom" || rep.Snapshots[7].Error == "" {
		t.Errorf("errors: %+v", rep.Snapshots)
	}
	if rep.Worst() != outcome.Failed {
		t.Errorf("Worst = %q, want failed", rep.Worst())
	}
	if n := rep.Count(); n[outcome.Pruned] != 1 || n[outcome.Failed] != 2 || n[outcome.NotStarted] != 1 {
		t.Errorf("Count = %v", n)
	}
	var out bytes.Buffer
	if err := rep.WriteText(&out); err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"prune: 8 snapshots dated before 2026-02-01 selected; keeping 2026-03-01, the newest complete snapshot\n",
		"2026-01-01  complete  3          pruned        5\n", // 3 districts, the fence document and the root
		"2026-01-02  complete  3          already-gone  -\n",
		"  2026-01-06 failed: said: boom\n",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("text lacks %q:\n%s", line, out.String())
		}
	}
}

func TestDryRunAndEmpty(t *testing.T) {
	rep := NewReport(snapshot.PrunePlan{Before: "2026-02-01", Delete: []snapshot.Summary{{SnapshotID: "2026-01-01", State: snapshot.StatePartial}}}, true)
	if rep.Worst() != outcome.Pruned || rep.Snapshots[0].Outcome != outcome.WouldPrune {
		t.Errorf("dry run: %+v", rep)
	}
	var out bytes.Buffer
	_ = rep.WriteText(&out)
	if !strings.HasPrefix(out.String(), "dry run: would delete 1 snapshot dated before 2026-02-01\n") || !strings.HasSuffix(out.String(), "nothing was deleted (--dry-run)\n") {
		t.Errorf("dry run text:\n%s", out.String())
	}
	out.Reset()
	_ = NewReport(snapshot.PrunePlan{Before: "2026-02-01"}, false).WriteText(&out)
	if out.String() != "prune: 0 snapshots dated before 2026-02-01 selected\nnothing to prune\n" {
		t.Errorf("empty text: %q", out.String())
	}
}
