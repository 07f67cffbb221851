package retention

import (
	"bytes"
	"context"
	"encoding/json"
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
	plan, err := Policy{Before: "2026-02-01"}.Select(join(span("2026-01-01", "2026-01-08", snapshot.StateComplete),
		at(snapshot.StateComplete, "2026-03-01")), today)
	if err != nil {
		t.Fatal(err)
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
	if len(rep.Snapshots) != 8 {
		t.Fatalf("selected %d, want 8", len(rep.Snapshots))
	}
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
		"policy: --before 2026-02-01 (today 2027-01-11, UTC); newest complete snapshot 2026-03-01\n",
		"keep 1 snapshot:\nDATE        STATE     DISTRICTS  REASONS\n2026-03-01  complete  3          newest-complete, cutoff\n",
		"prune: 8 snapshots dated before 2026-02-01 selected:\n",
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
	plan, err := Policy{Daily: 1}.Select(join(at(snapshot.StatePartial, "2026-01-01"), at(snapshot.StateComplete, "2026-01-02")), today)
	if err != nil {
		t.Fatal(err)
	}
	rep := NewReport(plan, true)
	if rep.Worst() != outcome.Pruned || len(rep.Snapshots) != 1 || rep.Snapshots[0].Outcome != outcome.WouldPrune || rep.Before != "" {
		t.Errorf("dry run: %+v", rep)
	}
	var out bytes.Buffer
	_ = rep.WriteText(&out)
	want := `policy: --keep-daily 1 (today 2027-01-11, UTC); newest complete snapshot 2026-01-02
keep 1 snapshot:
DATE        STATE     DISTRICTS  REASONS
2026-01-02  complete  3          newest-complete, daily
dry run: would delete 1 snapshot:
DATE        STATE    DISTRICTS  OUTCOME      DOCUMENTS DELETED
2026-01-01  partial  3          would-prune  -
nothing was deleted (--dry-run)
`
	if out.String() != want {
		t.Errorf("dry run text:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	plan, _ = Policy{KeepDays: days(3)}.Select(nil, today)
	_ = NewReport(plan, false).WriteText(&out)
	if want := "policy: --keep-days 3 (today 2027-01-11, UTC)\nkeep 0 snapshots\nprune: 0 snapshots dated before 2027-01-08 selected; nothing to prune\n"; out.String() != want {
		t.Errorf("empty text: %q, want %q", out.String(), want)
	}
}

// The JSON report keeps the cutoff's fields (before, snapshots) and adds
// the policy, today and the kept dates with their reasons; before is
// absent under a period rule.
func TestReportJSON(t *testing.T) {
	list := join(span("2026-12-30", "2027-01-02", snapshot.StateComplete), at(snapshot.StatePartial, "2027-01-03"))
	for _, c := range []struct {
		p    Policy
		want string
	}{
		{Policy{KeepDays: days(9)}, `{"before":"2027-01-02","policy":{"keepDays":9},"today":"2027-01-11","timeZone":"UTC","dryRun":true,"newestComplete":"2027-01-02",` +
			`"snapshots":[{"snapshotId":"2026-12-30","state":"complete","districts":3,"outcome":"would-prune"},{"snapshotId":"2026-12-31","state":"complete","districts":3,"outcome":"would-prune"},{"snapshotId":"2027-01-01","state":"complete","districts":3,"outcome":"would-prune"}],` +
			`"kept":[{"snapshotId":"2027-01-02","state":"complete","districts":3,"keep":true,"reasons":["newest-complete","keep-days"]},{"snapshotId":"2027-01-03","state":"partial","districts":3,"keep":true,"reasons":["keep-days","newer-than-newest-complete"]}],"exitCode":0}`},
		{Policy{Yearly: 2}, `{"policy":{"keepYearly":2},"today":"2027-01-11","timeZone":"UTC","dryRun":true,"newestComplete":"2027-01-02",` +
			`"snapshots":[{"snapshotId":"2026-12-30","state":"complete","districts":3,"outcome":"would-prune"},{"snapshotId":"2027-01-01","state":"complete","districts":3,"outcome":"would-prune"}],` +
			`"kept":[{"snapshotId":"2026-12-31","state":"complete","districts":3,"keep":true,"reasons":["yearly"]},{"snapshotId":"2027-01-02","state":"complete","districts":3,"keep":true,"reasons":["newest-complete","yearly"]},{"snapshotId":"2027-01-03","state":"partial","districts":3,"keep":true,"reasons":["newer-than-newest-complete"]}],"exitCode":0}`},
	} {
		plan, err := c.p.Select(list, today)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(NewReport(plan, true))
		if err != nil || string(b) != c.want {
			t.Errorf("%s:\n%s\nwant\n%s", c.p, b, c.want)
		}
	}
}
