package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/retention"
	"github.com/snapwriter/snapwriter/snapshot"
)

// writeDays writes a complete snapshot of 4 districts on each date.
func writeDays(t *testing.T, c *cli, dates ...string) {
	t.Helper()
	for _, d := range dates {
		if code, _, errs := c.run(genJSON(t, d, 4), "write", "--input", "-"); code != exitOK {
			t.Fatalf("write %s: exit %d\n%s", d, code, errs)
		}
	}
}

// pruneJSON runs prune --json with args and decodes its report.
func pruneJSON(t *testing.T, c *cli, wantCode int, args ...string) retention.Report {
	t.Helper()
	code, out, errs := c.run("", append([]string{"prune", "--json"}, args...)...)
	var rep retention.Report
	if code != wantCode || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("prune %v: exit %d, want %d\n%s\n%s", args, code, wantCode, out, errs)
	}
	return rep
}

func outcomes(rep retention.Report) map[string]outcome.Outcome {
	m := map[string]outcome.Outcome{}
	for _, d := range rep.Snapshots {
		m[d.SnapshotID] = d.Outcome
	}
	return m
}

// Bad flags: exit 2, nothing deleted, before any connection.
func TestPruneBadFlagsExit2(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	writeDays(t, c, "2026-11-01", "2026-11-02")
	before := c.docCount()
	for _, bad := range []struct {
		args []string
		says string // in the error
	}{
		{[]string{"prune"}, "give a retention policy"},
		{[]string{"prune", "--keep-days", "3", "--before", "2026-11-02"}, "--before D is a plain cutoff"},
		{[]string{"prune", "--keep-monthly", "0", "--before", "2026-11-02"}, "--before D is a plain cutoff"},
		{[]string{"prune", "--keep-days", "-1"}, "--keep-days -1: want 0 or more"},
		{[]string{"prune", "--keep-daily", "-1"}, "--keep-daily -1: want 0 or more"},
		{[]string{"prune", "--keep-daily", "7", "--keep-weekly", "-4"}, "--keep-weekly -4: want 0 or more"},
		{[]string{"prune", "--keep-monthly", "-12", "--dry-run"}, "--keep-monthly -12: want 0 or more"},
		{[]string{"prune", "--keep-yearly", "-5", "--keep-days", "30"}, "--keep-yearly -5: want 0 or more"},
		{[]string{"prune", "--keep-yearly", "five"}, "--keep-yearly"},
		{[]string{"prune", "--keep-daily", "0", "--keep-weekly", "0"}, "every keep rule given is 0 (off)"},
		{[]string{"prune", "--before", "2026-02-30"}, `--before "2026-02-30": want a real YYYY-MM-DD date`},
		{[]string{"prune", "--before", "yesterday"}, "--before"},
		{[]string{"prune", "--before", "2026-11-03", "--batch-size", "0"}, "--batch-size"},
	} {
		if code, _, errs := c.run("", bad.args...); code != exitUsage || !strings.Contains(errs, bad.says) {
			t.Errorf("%v: exit %d, want 2 and %q\n%s", bad.args, code, bad.says, errs)
		}
	}
	if n := c.docCount(); n != before {
		t.Errorf("bad flags changed the store: %d documents, had %d", n, before)
	}
}

// --dry-run reports and deletes nothing; --before then prunes all but the
// newest complete; --keep-days keeps recent dates.
func TestPruneDryRunBeforeAndKeepDays(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	today := time.Now().UTC()
	recent := today.AddDate(0, 0, -1).Format(time.DateOnly)
	writeDays(t, c, "2026-01-01", "2026-01-02", "2026-01-03", recent)
	before := c.docCount()

	code, out, errs := c.run("", "prune", "--before", "2026-01-03", "--dry-run")
	if code != exitOK || !strings.Contains(out, "dry run: would delete 2 snapshots dated before 2026-01-03") ||
		!strings.Contains(out, "nothing was deleted (--dry-run)") || !strings.Contains(out, "would-prune") {
		t.Errorf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	if n := c.docCount(); n != before {
		t.Errorf("dry run changed the store: %d documents, had %d", n, before)
	}

	rep := pruneJSON(t, c, exitOK, "--before", "2026-01-03")
	if got := outcomes(rep); len(got) != 2 || got["2026-01-01"] != outcome.Pruned || got["2026-01-02"] != outcome.Pruned {
		t.Errorf("--before outcomes %v", got)
	}
	states := listStates(t, c)
	if len(states) != 2 || states["2026-01-03"] != "complete" || states[recent] != "complete" {
		t.Errorf("list after prune: %v", states)
	}

	// --keep-days 3: 2026-01-03 goes, the recent date stays.
	rep = pruneJSON(t, c, exitOK, "--keep-days", "3")
	if got := outcomes(rep); len(got) != 1 || got["2026-01-03"] != outcome.Pruned {
		t.Errorf("--keep-days outcomes %v", got)
	}
	// Everything older than tomorrow: the recent date is the newest
	// complete and stays.
	rep = pruneJSON(t, c, exitOK, "--before", today.AddDate(0, 0, 1).Format(time.DateOnly))
	if len(rep.Snapshots) != 0 || rep.NewestComplete != recent {
		t.Errorf("newest complete pruned or selected: %+v", rep)
	}
	if states := listStates(t, c); len(states) != 1 || states[recent] != "complete" {
		t.Errorf("list at the end: %v", states)
	}
	code, out, _ = c.run("", "prune", "--keep-days", "0")
	if code != exitOK || !strings.Contains(out, "nothing to prune") {
		t.Errorf("nothing to prune: exit %d\n%s", code, out)
	}
}

// A date whose lock is held is skipped (exit 4, reported), the others
// pruned; a root a prune left deleting shows in list with its hint.
func TestPruneLockHeldExit4AndDeletingInList(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	writeDays(t, c, "2026-01-01", "2026-01-02", "2026-01-03")
	locker, err := firestorelock.New(c.client())
	if err != nil {
		t.Fatal(err)
	}
	held, err := locker.Acquire(context.Background(), c.snapKey("firestore", "2026-01-01"), time.Minute)
	if err != nil || !held.OK {
		t.Fatal(held, err)
	}
	rep := pruneJSON(t, c, exitLockHeld, "--before", "2026-01-03")
	if got := outcomes(rep); got["2026-01-01"] != outcome.LockHeld || got["2026-01-02"] != outcome.Pruned {
		t.Errorf("outcomes %v", got)
	}
	if _, err := locker.Release(context.Background(), held.LockID); err != nil {
		t.Fatal(err)
	}
	// As a prune killed after its mark leaves the root.
	if _, err := c.client().Collection("snapshots").Doc("2026-01-01").Update(context.Background(), []firestore.Update{
		{Path: "metadata.status", Value: "failed"},
		{Path: "metadata.writeState", Value: "deleting"},
		{Path: "metadata.writeComplete", Value: false},
	}); err != nil {
		t.Fatal(err)
	}
	out := listText(t, c)
	if r := row(out, "2026-01-01"); !strings.Contains(r, "deleting") || !strings.Contains(out, "run `snapwriter prune` again") {
		t.Errorf("list does not show the deleting snapshot with its next step:\n%s", out)
	}
	// Any cutoff finishes it.
	rep = pruneJSON(t, c, exitOK, "--before", "2000-01-01")
	if got := outcomes(rep); len(got) != 1 || got["2026-01-01"] != outcome.Pruned {
		t.Errorf("rerun outcomes %v", got)
	}
	if states := listStates(t, c); len(states) != 1 || states["2026-01-03"] != string(snapshot.StateComplete) {
		t.Errorf("list at the end: %v", states)
	}
}

// pruneFinish's error counts the dates that still need a prune (not
// pruned, gone or kept) among all those selected, and names the causes.
func TestPruneFinishCountsDatesNotDone(t *testing.T) {
	t.Parallel()
	rep := &retention.Report{Before: "2026-01-09"}
	for i, o := range []outcome.Outcome{outcome.Pruned, outcome.Gone, outcome.Kept,
		outcome.LockHeld, outcome.FencedOut, outcome.Failed, outcome.NotStarted} {
		rep.Snapshots = append(rep.Snapshots, retention.Date{SnapshotID: fmt.Sprintf("2026-01-0%d", i+1), Outcome: o})
	}
	a := &app{stdout: io.Discard, log: zap.NewNop()}
	err := a.pruneFinish(context.Background(), rep, true)
	want := "prune: 4 of 7 snapshots not pruned (1 lock held, 1 fenced out, 2 failed); run `snapwriter prune` again to finish"
	if exitCode(err) != exitError || err.Error() != want {
		t.Errorf("pruneFinish = %v (exit %d), want exit %d and %s", err, exitCode(err), exitError, want)
	}
}

// makePartial makes the root of date look as the application's writer
// leaves a partial write: status "success", writeComplete false.
func makePartial(t *testing.T, c *cli, date string) {
	t.Helper()
	if _, err := c.client().Collection("snapshots").Doc(date).Update(context.Background(), []firestore.Update{
		{Path: "metadata.writeComplete", Value: false},
		{Path: "metadata.writeState", Value: firestore.Delete},
	}); err != nil {
		t.Fatal(err)
	}
}

// The keep rules: --dry-run prints every snapshot's verdict, the kept
// ones with the rules that keep them, and deletes nothing; the real run
// deletes exactly the dates the dry run named; a rerun has nothing left
// to prune. January's newest snapshot is partial, so --keep-monthly keeps
// its newest complete one; the partial snapshot after the newest complete
// one is kept.
func TestPruneKeepRules(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	writeDays(t, c, "2026-01-30", "2026-01-31", "2026-02-27", "2026-02-28", "2026-03-01", "2026-03-02", "2026-03-03")
	makePartial(t, c, "2026-01-31")
	makePartial(t, c, "2026-03-03")
	before := c.docCount()
	policy := []string{"--keep-daily", "2", "--keep-monthly", "3"}

	code, out, errs := c.run("", append([]string{"prune", "--dry-run"}, policy...)...)
	if code != exitOK {
		t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
	}
	for _, line := range []string{
		"policy: --keep-daily 2 --keep-monthly 3 (today ",
		"; newest complete snapshot 2026-03-02\nkeep 5 snapshots:\n",
		"2026-01-30  complete  4          monthly\n",
		"2026-02-28  complete  4          monthly\n",
		"2026-03-01  complete  4          daily\n",
		"2026-03-02  complete  4          newest-complete, daily, monthly\n",
		"2026-03-03  partial   4          newer-than-newest-complete\n",
		"dry run: would delete 2 snapshots:\n",
		"2026-01-31  partial   4          would-prune  -\n",
		"2026-02-27  complete  4          would-prune  -\n",
		"nothing was deleted (--dry-run)\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("dry run lacks %q:\n%s", line, out)
		}
	}
	if n := c.docCount(); n != before {
		t.Errorf("dry run changed the store: %d documents, had %d", n, before)
	}

	rep := pruneJSON(t, c, exitOK, append([]string{"--dry-run"}, policy...)...)
	reasons := map[string]string{}
	for _, k := range rep.Kept {
		reasons[k.SnapshotID] = fmt.Sprint(k.Reasons)
	}
	if want := map[string]string{"2026-01-30": "[monthly]", "2026-02-28": "[monthly]", "2026-03-01": "[daily]",
		"2026-03-02": "[newest-complete daily monthly]", "2026-03-03": "[newer-than-newest-complete]"}; !maps.Equal(reasons, want) ||
		rep.Before != "" || rep.Policy.Daily != 2 || rep.Policy.Monthly != 3 || rep.Policy.KeepDays != nil {
		t.Errorf("--json dry run: kept %v, want %v; before %q, policy %+v", reasons, want, rep.Before, rep.Policy)
	}

	rep = pruneJSON(t, c, exitOK, policy...)
	if got := outcomes(rep); !maps.Equal(got, map[string]outcome.Outcome{"2026-01-31": outcome.Pruned, "2026-02-27": outcome.Pruned}) {
		t.Errorf("outcomes %v", got)
	}
	want := map[string]string{"2026-01-30": "complete", "2026-02-28": "complete", "2026-03-01": "complete", "2026-03-02": "complete", "2026-03-03": "partial"}
	if states := listStates(t, c); !maps.Equal(states, want) {
		t.Errorf("list after prune: %v, want %v", states, want)
	}
	code, out, _ = c.run("", append([]string{"prune"}, policy...)...)
	if code != exitOK || !strings.Contains(out, "prune: 0 snapshots selected; nothing to prune") {
		t.Errorf("rerun: exit %d\n%s", code, out)
	}
	// --keep-days combines: a tighter policy keeps 2026-03-02 (newest
	// complete), 2026-03-03 (newer, partial) and what --keep-weekly 1
	// adds: nothing more.
	rep = pruneJSON(t, c, exitOK, "--keep-weekly", "1", "--keep-days", "0")
	if got := outcomes(rep); len(got) != 3 || got["2026-01-30"] != outcome.Pruned || got["2026-02-28"] != outcome.Pruned || got["2026-03-01"] != outcome.Pruned {
		t.Errorf("--keep-weekly 1 --keep-days 0 outcomes %v", got)
	}
	if states := listStates(t, c); !maps.Equal(states, map[string]string{"2026-03-02": "complete", "2026-03-03": "partial"}) {
		t.Errorf("list at the end: %v", states)
	}
}
