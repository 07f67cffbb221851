package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/retention"
	"github.com/snapwriter/snapwriter/snapshot"
)

// A count of one takes the singular, in what the commands print and in
// the libraries' messages they pass on: "1 chunk", not "1 chunks".
func TestCountsOfOneAreSingular(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &out, nil)

	res := &snapshot.Result{SnapshotID: day, Outcome: snapshot.OutcomeComplete, DistrictsWritten: 1, Chunks: 1, Fence: "000000000000001",
		DistrictsKept: 1, StaleDeleted: 1,
		LockRenewals: snapshot.LockRenewals{Sheds: 1, Pauses: 1, MinConcurrency: 1},
		WriteRate:    snapshot.WriteRate{LimitPerSec: 500, ResourceExhausted: 1, Share: 1}}
	if err := a.printResult(res, false, false); err != nil {
		t.Fatal(err)
	}
	rep := &snapshot.Report{SnapshotID: day, State: snapshot.StateComplete, Districts: 1, Written: 1, Documents: 1,
		Problems: []snapshot.Problem{{Kind: snapshot.ProblemCounts, Detail: "x"}}}
	if err := a.printReport(rep, false); err != nil {
		t.Fatal(err)
	}
	if err := (&retention.Report{Before: day, DryRun: true, Snapshots: []retention.Date{{SnapshotID: "2026-11-01"}}}).WriteText(&out); err != nil {
		t.Fatal(err)
	}
	out.WriteString((&backfill.UnusableError{Checked: 1, Problems: []string{"x"}}).Error() + "\n")
	_, gen, errs := runApp(t, nil, "generate", "--date", day, "--districts", "1", "--folder", filepath.Join(t.TempDir(), "f"))
	out.WriteString(gen + errs)
	text := out.String()
	for _, want := range []string{
		"1 district written in 1 chunk (0 failed)",
		"1 district was already stored",
		"ran as few as 1 chunk at once, and paused once",
		"removed 1 district document the snapshot",
		"the store pushed back once",
		"NOT INTACT — 1 problem, complete — 1 district, 1 written, 0 failed, 0 pending, 1 document;",
		"would delete 1 snapshot dated before",
		"1 of 1 dated input cannot be used",
		"wrote 1 district to ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	for _, wrong := range []string{"1 chunks", "1 districts", "1 problems", "1 documents", "snapshot(s)", "1 times", "1 dated inputs"} {
		if strings.Contains(text, wrong) {
			t.Errorf("%q in:\n%s", wrong, text)
		}
	}
}
