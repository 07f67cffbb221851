package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/retention"
	"github.com/snapwriter/snapwriter/snapshot"
)

// pruneFlags are prune's own flags; the write tuning flags (chunks,
// retries, lock) are in writeFlags.
type pruneFlags struct {
	keepDays int
	before   string
	dryRun   bool
	asJSON   bool
}

func (a *app) pruneCommand() *cobra.Command {
	var f writeFlags
	var p pruneFlags
	cmd := &cobra.Command{
		Use:   "prune --keep-days N | --before D [--dry-run] [--json]",
		Short: "Delete old snapshots (retention), never the newest complete one",
		Long: `Delete whole snapshots dated before a cutoff: --before D (YYYY-MM-DD), or
--keep-days N, which keeps the dates within N days of today (UTC) and deletes
older ones. Exactly one of the two. The newest complete snapshot is never
deleted, whatever the cutoff. A snapshot a stopped prune left "deleting" is
finished whatever its date.

Each snapshot is deleted under its lock, fenced like a write: its root is
marked first (status "failed", writeState "deleting", no district listed as
stored), so the application's readers stop taking it as successful before any
document goes; then its district documents, manifest pages and the fence
document are deleted in chunks of --batch-size, retried as a write's, and the
root last. A writer that takes the date over wins: prune never deletes a newer
writer's documents. A prune killed midway leaves the snapshot "deleting" in
'snapwriter list'; run prune again to finish it.

A date whose lock is held (a writer at work) is skipped and reported:
--lock-wait defaults to 0 here. --dry-run prints what would be deleted and
deletes nothing, taking no lock.

Exit codes: 0 every selected snapshot pruned (or nothing to prune), 1 a runtime
failure (over 5 over 4), 2 bad flags (nothing deleted), 4 a lock was held (that
date skipped), 5 fenced out by a writer (that date left to it).`,
		Example: `  snapwriter prune --keep-days 90 --dry-run
  snapwriter prune --keep-days 90
  snapwriter prune --before 2026-01-01 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			if err := checkPrune(p, fl.Changed("keep-days"), fl.Changed("before")); err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			return a.prune(cmd.Context(), f, p)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&p.keepDays, "keep-days", 0, "keep the snapshots of the last N days (UTC), delete older ones")
	fl.StringVar(&p.before, "before", "", "delete the snapshots dated before D (YYYY-MM-DD)")
	fl.BoolVar(&p.dryRun, "dry-run", false, "print what would be deleted; delete nothing, take no lock")
	fl.BoolVar(&p.asJSON, "json", false, "print the report as JSON")
	// Prune records no progress: no --record-interval.
	addWriteFlags(fl, &f, "record-interval")
	// A held lock is a writer at work: skip that date rather than wait
	// for it and then delete what it wrote.
	f.lockWait = 0
	fl.Lookup("lock-wait").DefValue = "0s"
	registerTimeout(fl, snapshot.DefaultRequestTimeout, writeTimeoutUsage+"; bounds the listing too")
	return cmd
}

// checkPrune refuses prune's own flags when they make no sense: exactly
// one of --keep-days (set: keepSet) and --before.
func checkPrune(p pruneFlags, keepSet, beforeSet bool) error {
	switch {
	case keepSet == beforeSet:
		return usagef("prune: give exactly one of --keep-days N and --before D")
	case keepSet && p.keepDays < 0:
		return usagef("--keep-days %d: want 0 or more", p.keepDays)
	case beforeSet && !model.ValidDate(p.before):
		return usagef("--before %q: want a real YYYY-MM-DD date", p.before)
	}
	return nil
}

func (a *app) prune(ctx context.Context, f writeFlags, p pruneFlags) error {
	before := p.before
	if before == "" {
		before = snapshot.KeepDaysCutoff(time.Now(), p.keepDays)
	}
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	lctx, cancel := context.WithTimeout(ctx, a.bound())
	list, err := snapshot.NewReader(client, a.global.collection).List(lctx)
	cancel()
	if err != nil {
		return a.firestoreWait(err)
	}
	rep := retention.NewReport(snapshot.SelectPrune(list, before), p.dryRun)
	if !p.dryRun && len(rep.Snapshots) > 0 {
		w, closeWriter, err := a.newWriter(ctx, client, f)
		if err != nil {
			return err
		}
		defer closeWriter()
		rep.Run(ctx, w, func(err error) string { return withHint(err).Error() })
	}
	return a.pruneFinish(rep, p.asJSON)
}

// pruneFinish logs and prints the report and returns its worst date's
// ending as a datesError (nil when its exit code is 0).
func (a *app) pruneFinish(rep *retention.Report, asJSON bool) error {
	// The report keeps a date's error as text: a failed date is exit 1.
	worst := rep.Worst()
	rep.ExitCode = dateExit(worst, nil)
	n := rep.Count()
	a.log.Log(levelFor(rep.ExitCode), "prune finished", zap.String("before", rep.Before), zap.Bool("dryRun", rep.DryRun),
		zap.Int("selected", len(rep.Snapshots)), zap.Int("pruned", n[outcome.Pruned]+n[outcome.Gone]), zap.Int("exitCode", rep.ExitCode))
	if err := a.output(asJSON, rep, rep.WriteText); err != nil || rep.ExitCode == exitOK {
		return err
	}
	// Not pruned: the dates that still need something (Outcome.Done).
	notDone := 0
	for _, d := range rep.Snapshots {
		if !d.Outcome.Done() {
			notDone++
		}
	}
	return datesError{worst: worst, msg: fmt.Sprintf("prune: %d of %s not pruned (%d lock held, %d fenced out, %d failed); run `snapwriter prune` again to finish",
		notDone, plural.N(len(rep.Snapshots), "snapshot"),
		n[outcome.LockHeld], n[outcome.FencedOut], n[outcome.Failed]+n[outcome.NotStarted])}
}
