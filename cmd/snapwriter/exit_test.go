package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/schedule"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Every row of the exit-code table (README's "Exit codes"), and the
// order of the rows where an error matches more than one.
func TestExitCode(t *testing.T) {
	t.Parallel()
	lost := fmt.Errorf("%w: lease expired", snapshot.ErrLockLost)
	cases := []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errors.New("boom"), exitError},
		{usagef("--date %q: want a real YYYY-MM-DD date", "x"), exitUsage},
		{fmt.Errorf("%w: too big", model.ErrInvalid), exitUsage},
		{fmt.Errorf("%w: other districts", snapshot.ErrMismatch), exitUsage},
		{fmt.Errorf("loadtest: %w: snapshots", loadtest.ErrRefused), exitUsage},
		{fmt.Errorf("%w: upload in progress", model.ErrNotReady), exitNotReady},
		{fmt.Errorf("%w: waited in vain (%w)", model.ErrNotReady, model.ErrInvalid), exitNotReady},
		{fmt.Errorf("backfill: %w in DIR", errNoInput), exitNotReady},
		{fmt.Errorf("snapshot d: %w", snapshot.ErrFencedOut), exitFenced},
		{fmt.Errorf("snapshot d: %w", snapshot.ErrLockHeld), exitLockHeld},
		{fmt.Errorf("loadtest: %w", loadtest.ErrBusy), exitLockHeld},
		{fmt.Errorf("snapshot d: %w: x (and %w)", snapshot.ErrManifestNotRecorded, lost), exitError},
		{fmt.Errorf("snapshot d: %w: x", snapshot.ErrRootFailed), exitError},
		{fmt.Errorf("%w: snapshot d: 2 problems", errNotIntact), exitNotIntact},
		{fmt.Errorf("snapshot d: %w: %w", snapshot.ErrPartial, lost), exitPartial},
		{fmt.Errorf("%w: snapshot d is partial", errIncomplete), exitPartial},
		{fmt.Errorf("loadtest: %w: 1 at concurrency 3", loadtest.ErrPartialRounds), exitPartial},
		{lost, exitError},
		{fmt.Errorf("2026-11-21: %w", snapshot.ErrNotFound), exitError},
		{notFoundError{msg: "snapshot d has no district 9", err: fmt.Errorf("x: %w", snapshot.ErrNoDistrict)}, exitError},
		{&safego.PanicError{Value: "x"}, exitError},
		{fmt.Errorf("snapshot d: %w: %w", snapshot.ErrPartial, &safego.PanicError{Value: "x"}), exitError},
		{datesError{worst: outcome.NotReady, msg: "backfill: …"}, exitNotReady},
		{datesError{worst: outcome.Failed, err: fmt.Errorf("%w: x", model.ErrInvalid), msg: "backfill: …"}, exitUsage},
		{datesError{worst: outcome.Failed, msg: "prune: …"}, exitError},
		{withHint(fmt.Errorf("snapshot d: %w", snapshot.ErrPartial)), exitPartial},
	}
	for _, tc := range cases {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

// A date's outcome has the code a run of that date alone would end with.
func TestDateExit(t *testing.T) {
	t.Parallel()
	for o, want := range map[outcome.Outcome]int{
		outcome.Complete: exitOK, outcome.Skipped: exitOK, outcome.WouldPrune: exitOK, outcome.Pruned: exitOK,
		outcome.Gone: exitOK, outcome.Kept: exitOK, outcome.Partial: exitPartial, outcome.LockHeld: exitLockHeld,
		outcome.FencedOut: exitFenced, outcome.NotReady: exitNotReady, outcome.Failed: exitError,
		outcome.NotStarted: exitError,
	} {
		if got := dateExit(o, nil); got != want {
			t.Errorf("dateExit(%s) = %d, want %d", o, got, want)
		}
	}
	if got := dateExit(outcome.Failed, fmt.Errorf("%w: x", model.ErrInvalid)); got != exitUsage {
		t.Errorf("a date whose input became invalid: %d, want %d", got, exitUsage)
	}
}

// What the libraries refuse is named by the flag that set it.
func TestUsageNamesTheFlag(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want string
	}{
		{snapshot.CheckOptions(snapshot.WithLockTTL(500 * time.Millisecond)), "--lock-ttl 500ms: want at least 1s"},
		{snapshot.CheckOptions(snapshot.WithBatchSize(0)), "--batch-size 0: want 1..500"},
		{snapshot.CheckOptions(snapshot.WithRequestTimeout(0)), "--request-timeout 0s: want a positive duration"},
		{snapshot.CheckCollection("a/b"), `--collection "a/b": invalid collection name: it contains "/" (want a top-level collection id)`},
		{snapshot.CheckCollection(strings.Repeat("c", 1501)), "--collection (1501 bytes): invalid collection name: 1501 bytes, over Firestore's 1500"},
		{backfill.CheckRange("2026-02-30", ""), `--from "2026-02-30": want a real YYYY-MM-DD date`},
		{backfill.CheckRange("2026-02-02", "2026-02-01"), "--from 2026-02-02 is after --to 2026-02-01"},
		{&backfill.EnvError{Name: backfill.TaskCountEnv, Value: "x"}, `CLOUD_RUN_TASK_COUNT="x": want a non-negative integer (or set --task-count)`},
		{&schedule.ConfigError{Field: "Cron", Value: "x", Reason: "bad"}, `--cron "x": bad`},
		{&schedule.ConfigError{Field: "Input"}, "give exactly one of --input-dir and --input-url"},
		{&loadtest.ConfigError{Field: "Rounds", Value: 0, Reason: "want 1..100"}, "--rounds 0: want 1..100"},
		{errors.New("other"), "other"},
	}
	for _, tc := range cases {
		err := usage(tc.err)
		if err.Error() != tc.want || exitCode(err) != exitUsage || needsHelp(err) {
			t.Errorf("usage(%v) = %q (exit %d), want %q (exit 2)", tc.err, err, exitCode(err), tc.want)
		}
	}
}

// The CLI's translators read the table of endings: every row's exit code,
// hint and closing level, and a date that ended so exits as a run of it
// alone would.
func TestEndingsTable(t *testing.T) {
	t.Parallel()
	for _, e := range ending.All() {
		err := fmt.Errorf("snapshot d: %w: cause", e.Err)
		if got := exitCode(err); got != e.Exit {
			t.Errorf("%v: exit %d, table %d", e.Err, got, e.Exit)
		}
		if got := hint(err); got != e.Hint {
			t.Errorf("%v: hint %q, table %q", e.Err, got, e.Hint)
		}
		if got := levelFor(e.Exit); got != e.Level {
			t.Errorf("%v: closing level %s, table %s", e.Err, got, e.Level)
		}
		if got := dateExit(outcome.Outcome(e.Outcome), err); got != e.Exit {
			t.Errorf("%v: a date %s exits %d, table %d", e.Err, e.Outcome, got, e.Exit)
		}
	}
	if exitCode(usagef("x")) != ending.Of(ending.ErrUsage).Exit || levelFor(exitOK) != ending.None.Level {
		t.Error("a usage error or a run that ended well is not the table's")
	}
}
