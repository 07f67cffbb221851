package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/model"
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

// pruneSkips are the write flags prune leaves out: it records no progress.
var pruneSkips = map[string]bool{"record-interval": true}

// Outcomes of one date of a prune, as its report says them.
const (
	pruneWould    = "would prune"
	prunePruned   = "pruned"
	pruneGone     = "already gone"
	pruneLockHeld = "lock held"
	pruneFenced   = "fenced out"
	pruneKept     = "kept"
	pruneFailed   = "failed"
	pruneNotRun   = "not started"
)

// pruneReport is what prune prints: the plan, and per date what came of it.
type pruneReport struct {
	Before         string      `json:"before"`
	DryRun         bool        `json:"dryRun"`
	NewestComplete string      `json:"newestComplete,omitempty"`
	Snapshots      []pruneDate `json:"snapshots"`
	ExitCode       int         `json:"exitCode"`
}

// pruneDate is one selected date of a prune's report.
type pruneDate struct {
	SnapshotID string                `json:"snapshotId"`
	State      snapshot.State        `json:"state"`
	Districts  int                   `json:"districts"`
	Outcome    string                `json:"outcome"`
	Error      string                `json:"error,omitempty"`
	Result     *snapshot.PruneResult `json:"result,omitempty"`
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
	wf := pflag.NewFlagSet("write", pflag.ContinueOnError)
	f.register(wf)
	// A held lock is a writer at work: skip that date rather than wait
	// for it and then delete what it wrote.
	f.lockWait = 0
	wf.Lookup("lock-wait").DefValue = "0s"
	wf.VisitAll(func(w *pflag.Flag) {
		if !pruneSkips[w.Name] {
			fl.AddFlag(w)
		}
	})
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
	plan := snapshot.SelectPrune(list, before)
	rep := pruneReport{Before: plan.Before, DryRun: p.dryRun, NewestComplete: plan.NewestComplete, Snapshots: []pruneDate{}}
	for _, s := range plan.Delete {
		rep.Snapshots = append(rep.Snapshots, pruneDate{SnapshotID: s.SnapshotID, State: s.State, Districts: s.Districts, Outcome: pruneWould})
	}
	if !p.dryRun && len(plan.Delete) > 0 {
		w, closeWriter, err := a.newWriter(ctx, client, f)
		if err != nil {
			return err
		}
		defer closeWriter()
		a.pruneDates(ctx, w, rep.Snapshots)
	}
	return a.pruneFinish(rep, p.asJSON)
}

// pruneDates prunes each date of ds in turn, oldest first, recording its
// outcome; once ctx ends, no further date starts.
func (a *app) pruneDates(ctx context.Context, w *snapshot.Writer, ds []pruneDate) {
	for i := range ds {
		d := &ds[i]
		if ctx.Err() != nil {
			d.Outcome, d.Error = pruneNotRun, context.Cause(ctx).Error()
			continue
		}
		res, err := w.Prune(ctx, d.SnapshotID)
		d.Result = res
		switch {
		case err == nil && res != nil && !res.Found:
			d.Outcome = pruneGone
		case err == nil:
			d.Outcome = prunePruned
		case errors.Is(err, snapshot.ErrNewestComplete):
			d.Outcome = pruneKept
		case errors.Is(err, snapshot.ErrLockHeld):
			d.Outcome = pruneLockHeld
		case errors.Is(err, snapshot.ErrFencedOut):
			d.Outcome = pruneFenced
		default:
			d.Outcome = pruneFailed
		}
		if err != nil {
			d.Error = withHint(err).Error()
		}
	}
}

// pruneExit is the exit code of one date's outcome: 1 over 5 over 4 over 0
// across dates (pruneFinish).
func pruneExit(outcome string) int {
	switch outcome {
	case pruneFailed, pruneNotRun:
		return exitError
	case pruneFenced:
		return exitFenced
	case pruneLockHeld:
		return exitLockHeld
	}
	return exitOK
}

// pruneRank orders exit codes by how bad they are for the report's code.
var pruneRank = map[int]int{exitOK: 0, exitLockHeld: 1, exitFenced: 2, exitError: 3}

// pruneFinish logs and prints the report and returns the worst date's
// exit code as a codedError (nil when it is 0).
func (a *app) pruneFinish(rep pruneReport, asJSON bool) error {
	counts := map[string]int{}
	for _, d := range rep.Snapshots {
		counts[d.Outcome]++
		if c := pruneExit(d.Outcome); pruneRank[c] > pruneRank[rep.ExitCode] {
			rep.ExitCode = c
		}
	}
	a.log.Log(levelFor(rep.ExitCode), "prune finished", zap.String("before", rep.Before), zap.Bool("dryRun", rep.DryRun),
		zap.Int("selected", len(rep.Snapshots)), zap.Int("pruned", counts[prunePruned]+counts[pruneGone]), zap.Int("exitCode", rep.ExitCode))
	var err error
	if asJSON {
		err = printJSON(a.stdout, rep)
	} else {
		err = rep.write(a.stdout)
	}
	if err != nil || rep.ExitCode == exitOK {
		return err
	}
	return codedError{code: rep.ExitCode, err: fmt.Errorf("prune: %d of %d snapshots not pruned (%d lock held, %d fenced out, %d failed); run `snapwriter prune` again to finish",
		len(rep.Snapshots)-counts[prunePruned]-counts[pruneGone]-counts[pruneKept], len(rep.Snapshots),
		counts[pruneLockHeld], counts[pruneFenced], counts[pruneFailed]+counts[pruneNotRun])}
}

// write prints the report as text: the cutoff, then a table of the
// selected dates.
func (r pruneReport) write(w io.Writer) error {
	if r.DryRun {
		fmt.Fprintf(w, "dry run: would delete %d snapshot(s) dated before %s", len(r.Snapshots), r.Before)
	} else {
		fmt.Fprintf(w, "prune: %d snapshot(s) dated before %s selected", len(r.Snapshots), r.Before)
	}
	if r.NewestComplete != "" {
		fmt.Fprintf(w, "; keeping %s, the newest complete snapshot", r.NewestComplete)
	}
	fmt.Fprintln(w)
	if len(r.Snapshots) == 0 {
		_, err := fmt.Fprintln(w, "nothing to prune")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tSTATE\tDISTRICTS\tOUTCOME\tDOCUMENTS DELETED")
	for _, d := range r.Snapshots {
		docs := "-"
		if res := d.Result; res != nil && res.Found {
			n := res.DistrictsDeleted + res.PagesDeleted + res.OtherDeleted
			if res.RootDeleted {
				n += 2 // the fence document and the root
			}
			docs = fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.SnapshotID, d.State, d.Districts, d.Outcome, docs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range r.Snapshots {
		if d.Error != "" {
			if _, err := fmt.Fprintf(w, "  %s %s: %s\n", d.SnapshotID, d.Outcome, d.Error); err != nil {
				return err
			}
		}
	}
	if r.DryRun {
		_, err := fmt.Fprintln(w, "nothing was deleted (--dry-run)")
		return err
	}
	return nil
}
