package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/retention"
	"github.com/snapwriter/snapwriter/snapshot"
)

// pruneFlags are prune's own flags; the write tuning flags (chunks,
// retries, lock) are in writeFlags.
type pruneFlags struct {
	keepDays                       int
	daily, weekly, monthly, yearly int
	before                         string
	dryRun, asJSON                 bool
	// timezone is where prune's days end: "today" of --keep-days.
	timezone string
}

// keepFlags are prune's keep rules, each a retention.Policy field.
var keepFlags = map[string]string{
	"KeepDays": "--keep-days", "Daily": "--keep-daily", "Weekly": "--keep-weekly",
	"Monthly": "--keep-monthly", "Yearly": "--keep-yearly", "Before": "--before",
}

func (a *app) pruneCommand() *cobra.Command {
	var f writeFlags
	var p pruneFlags
	cmd := &cobra.Command{
		Use:   "prune [--keep-daily N] [--keep-weekly N] [--keep-monthly N] [--keep-yearly N] [--keep-days N] | --before D [--dry-run] [--json]",
		Short: "Delete old snapshots by a retention policy, never the newest complete one",
		Long: `Delete whole snapshots by a retention policy: keep rules, or a plain cutoff.

Keep rules (any of them; a snapshot any rule keeps is kept, the others are
deleted), with restic forget's meaning:
  --keep-daily N    for each of the last N days that have a complete snapshot,
                    keep the newest complete snapshot of that day
  --keep-weekly N   the same for the last N ISO weeks (Monday to Sunday)
  --keep-monthly N  the same for the last N months
  --keep-yearly N   the same for the last N years
  --keep-days N     keep every snapshot dated within N days of today (in
                    --timezone, UTC by default), whatever its state (0: today's)
Only complete snapshots count for and are kept by the period rules; 0 turns a
period rule off. An incomplete snapshot (partial, unsuccessful, interrupted,
writing, unknown) dated after the newest complete one is kept (a write or a
repair may be at work or due); an older one is deleted unless --keep-days
keeps it.

--before D (YYYY-MM-DD) is a plain cutoff instead: every snapshot dated before
D is deleted, whatever its state. It is given alone.

Whatever the policy, the newest complete snapshot is never deleted, and a
snapshot a stopped prune left "deleting" is finished. Roots whose id is not a
date are left alone. The report lists every dated snapshot: the kept ones
with the rules that keep each (newest-complete, daily, weekly, monthly,
yearly, keep-days, newer-than-newest-complete, cutoff), then the ones to
delete with their outcomes.

Each snapshot is deleted under its lock, fenced like a write: its root is
marked first (status "failed", writeState "deleting", no district listed as
stored), so the application's readers stop taking it as successful before any
document goes; then its district documents, manifest pages and the fence
document are deleted in chunks of --batch-size, retried as a write's, and the
root last. A writer that takes the date over wins: prune never deletes a newer
writer's documents. A prune killed midway leaves the snapshot "deleting" in
'snapwriter list'; run prune again to finish it.

A date whose lock is held (a writer at work) is skipped and reported:
--lock-wait defaults to 0 here. --dry-run prints the verdicts and deletes
nothing, taking no lock.

Exit codes: 0 every selected snapshot pruned (or nothing to prune), 1 a runtime
failure (over 5 over 4), 2 bad flags (nothing deleted), 4 a lock was held (that
date skipped), 5 fenced out by a writer (that date left to it).`,
		Example: `  snapwriter prune --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --keep-yearly 5 --dry-run
  snapwriter prune --keep-daily 7 --keep-weekly 4 --keep-monthly 12 --keep-yearly 5
  snapwriter prune --keep-days 30 --keep-monthly 24
  snapwriter prune --keep-days 90 --json
  snapwriter prune --before 2026-01-01`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			pol, err := prunePolicy(cmd.Flags(), p)
			if err != nil {
				return err
			}
			if err := f.validate(); err != nil {
				return err
			}
			loc, err := loadTimezone(p.timezone)
			if err != nil {
				return err
			}
			return a.prune(cmd.Context(), f, pol, p, loc)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&p.daily, "keep-daily", 0, "keep the newest complete snapshot of each of the last N days that have one (0: off)")
	fl.IntVar(&p.weekly, "keep-weekly", 0, "keep the newest complete snapshot of each of the last N ISO weeks that have one (0: off)")
	fl.IntVar(&p.monthly, "keep-monthly", 0, "keep the newest complete snapshot of each of the last N months that have one (0: off)")
	fl.IntVar(&p.yearly, "keep-yearly", 0, "keep the newest complete snapshot of each of the last N years that have one (0: off)")
	fl.IntVar(&p.keepDays, "keep-days", 0, "keep every snapshot dated within N days of today (in --timezone), whatever its state (0: today's)")
	registerTimezone(fl, &p.timezone, `IANA time zone of "today" in --keep-days: where prune's days end`)
	fl.StringVar(&p.before, "before", "", "a plain cutoff, given alone: delete the snapshots dated before D (YYYY-MM-DD)")
	fl.BoolVar(&p.dryRun, "dry-run", false, "print every snapshot's verdict; delete nothing, take no lock")
	fl.BoolVar(&p.asJSON, "json", false, "print the report as JSON")
	// Prune records no progress: no --record-interval.
	addWriteFlags(fl, &f, pruneWriteUsages, "record-interval")
	// A held lock is a writer at work: skip that date rather than wait
	// for it and then delete what it wrote.
	f.lockWait = 0
	fl.Lookup("lock-wait").DefValue = "0s"
	registerRequestTimeout(fl, pruneRequestTimeoutUsage)
	registerStoreFlags(fl)
	return cmd
}

// pruneWriteUsages are the write flags' usage texts as prune uses them:
// to delete, in chunks paced and retried as a write's.
var pruneWriteUsages = map[string]string{
	"batch-size":   fmt.Sprintf("documents deleted per chunk transaction (1..%d), at most a tenth of a second of the write budget (deletes are writes)", snapshot.MaxBatchSize),
	"concurrency":  "delete chunks in flight at once, at most: a prune starts at one and runs fewer while the store is slow to answer (docs/lease.md)",
	"max-retries":  "retries per delete chunk after the first attempt",
	"lock-ttl":     "time to live of the lock on the date being pruned; renewed every TTL/3",
	"lock-wait":    "how long to wait for a date's lock that is held (a writer at work; 0: skip the date at once, reported as lock held)",
	"grace-period": "on SIGTERM/SIGINT, how long delete chunks in flight may take to finish (the date stays \"deleting\": run prune again)",
	"contention-wait": "how long a transaction that finds the snapshot or its lock document locked by another transaction keeps retrying " +
		"(a writer that died mid-transaction holds it until Firestore expires it, within 60 s)",
	"allow-lock-backend-switch": "delete a snapshot written under another lock backend (one-time migration step)",
	"initial-write-rate":        "document deletes a second a prune starts at: Firestore's guidance for a new collection (docs/how-a-write-works.md)",
	"max-write-rate":            "document deletes a second the ramp grows to, at most",
	"write-ramp": "grow the delete rate 50% every 5 minutes from --initial-write-rate (Firestore's 500/50/5); " +
		"--write-ramp=false: delete at --max-write-rate from the start",
}

// prunePolicy is the retention policy prune's flags give, or the usage
// error that names the flag: --keep-days counts when given (0 keeps
// today's); --before excludes every keep flag, even one given as 0.
func prunePolicy(fl *pflag.FlagSet, p pruneFlags) (retention.Policy, error) {
	pol := retention.Policy{Daily: p.daily, Weekly: p.weekly, Monthly: p.monthly, Yearly: p.yearly, Before: p.before}
	if fl.Changed("keep-days") {
		pol.KeepDays = &p.keepDays
	}
	keepGiven := false
	for _, name := range []string{"keep-days", "keep-daily", "keep-weekly", "keep-monthly", "keep-yearly"} {
		keepGiven = keepGiven || fl.Changed(name)
	}
	err := pol.Validate()
	var pe *retention.PolicyError
	switch {
	case errors.As(err, &pe):
		return pol, valueUsage(keepFlags[pe.Field], pe.Value, pe.Reason)
	case fl.Changed("before") && keepGiven, errors.Is(err, retention.ErrBeforeWithRules):
		return pol, usagef("prune: --before D is a plain cutoff, given alone; or give keep rules (--keep-daily, --keep-weekly, --keep-monthly, --keep-yearly, --keep-days) without it")
	case errors.Is(err, retention.ErrNoRule) && keepGiven:
		return pol, usagef("prune: every keep rule given is 0 (off): give a count above 0, or --keep-days N")
	case errors.Is(err, retention.ErrNoRule):
		return pol, usagef("prune: give a retention policy: --keep-daily, --keep-weekly, --keep-monthly, --keep-yearly N and/or --keep-days N, or --before D")
	case err != nil:
		return pol, usage(err)
	}
	return pol, nil
}

func (a *app) prune(ctx context.Context, f writeFlags, pol retention.Policy, p pruneFlags, loc *time.Location) error {
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
	// Today as it is in --timezone: the day a --keep-days counts from
	// ends at midnight there.
	plan, err := pol.Select(list, a.now().In(loc))
	if err != nil {
		return usage(err) // checked by prunePolicy already
	}
	rep := retention.NewReport(plan, p.dryRun)
	if !p.dryRun && len(rep.Snapshots) > 0 {
		w, closeWriter, err := a.newWriter(ctx, client, f)
		if err != nil {
			return err
		}
		defer closeWriter()
		rep.Run(ctx, w, func(err error) string { return withHint(err).Error() })
	}
	return a.pruneFinish(ctx, rep, p.asJSON)
}

// pruneFinish logs and prints the report and returns its worst date's
// ending as a datesError (nil when its exit code is 0). A prune a signal
// stopped (ctx) reports the exit code the process ends with, 128+n
// (app.run).
func (a *app) pruneFinish(ctx context.Context, rep *retention.Report, asJSON bool) error {
	// The report keeps a date's error as text: a failed date is exit 1.
	worst := rep.Worst()
	rep.ExitCode = signalExit(ctx, dateExit(worst, nil))
	n := rep.Count()
	// A cutoff only where the policy is one: the period rules prune no
	// dates before a date.
	before := zap.Skip()
	if rep.Before != "" {
		before = zap.String("before", rep.Before)
	}
	a.log.Log(levelFor(rep.ExitCode), "prune finished", zap.Stringer("policy", rep.Policy), before,
		zap.Bool("dryRun", rep.DryRun), zap.Int("kept", len(rep.Kept)), zap.Int("selected", len(rep.Snapshots)), zap.Int("pruned", n[outcome.Pruned]+n[outcome.Gone]), zap.Int("exitCode", rep.ExitCode))
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
