package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/internal/progress"
	"github.com/snapwriter/snapwriter/snapshot"
)

type backfillFlags struct {
	dir          string
	from, to     string
	skipComplete bool
	taskIndex    int
	taskCount    int
	asJSON       bool
	progress     string
	dryRun       bool
	wait         time.Duration
	allowEmpty   bool
	timezone     string
}

func (a *app) backfillCommand() *cobra.Command {
	var f writeFlags
	var b backfillFlags
	cmd := &cobra.Command{
		Use:   "backfill --input-dir DIR|gs://BUCKET/PREFIX [--from D] [--to D] [--skip-complete]",
		Short: "Write every dated snapshot under a directory or Cloud Storage folder, oldest first",
		Long: `Write every DIR/YYYY-MM-DD.json file (or per-district snapshot directory
DIR/YYYY-MM-DD/) whose date is within --from..--to (inclusive), oldest first,
one date at a time, each under its own snapshot lock. DIR may be a Cloud Storage
folder, gs://BUCKET/PREFIX: its YYYY-MM-DD.json objects and YYYY-MM-DD/ folders
are the dates. --from and --to take a date, "today" or "today-N" (in --timezone),
so that a scheduled job's window moves by itself.

A date whose input is not ready (a gs:// folder whose manifest.json does not say
writeComplete: true yet, or a local one that says writeComplete: false) is listed
as not-ready and not written; the others are, and the exit code is 7 unless a
worse one applies. --wait-for-input waits for such dates first (one wait for the
whole run), and for a window with no input at all yet.

Finding no dated input within --from..--to is not success: exit 7, saying where
it looked (--allow-empty: exit 0, for a run where that is expected). A task whose
share of the dates is empty while the window is not exits 0.

Symbolic links are followed, to files and to directories. An entry named like a
date that cannot be used (a broken link, a directory named .json, a file without
.json, a FIFO, a date that does not exist) is reported, never skipped. Every input
of this task is read and validated before the first write: one bad or unusable
input stops the backfill with exit 2, every such input listed, nothing written.

Cloud Run job tasks split the dates between them: with CLOUD_RUN_TASK_INDEX and
CLOUD_RUN_TASK_COUNT set (or --task-index/--task-count), a task writes the dates
whose day number modulo the task count is its index, so no date is written by two
tasks and none is left out. --skip-complete leaves dates that are already
complete in Firestore alone, which makes a rerun (or a retried task) resume
where the last one stopped.

On a terminal a progress bar shows the dates; otherwise each date is one log
line. The summary counts complete, partial, failed and skipped dates, and the
exit code is the worst outcome: 1 (failed, or a store stopped the run before every
date was done) over 8 (held) over 7 (not ready) over 5 (fenced out) over 4 (lock
held) over 3 (partial) over 0. Stopped by a signal, after the current date, it
exits 143 (SIGTERM) or 130 (SIGINT), as every command does; the dates not
started are reported.`,
		Example: `  snapwriter backfill --input-dir ./snapshots --from 2026-01-01 --to 2026-03-31
  snapwriter backfill --input-dir gs://exports/snapshots --from today --to today --skip-complete --wait-for-input 3h
  snapwriter backfill --input-dir /data/snapshots --skip-complete --json
  CLOUD_RUN_TASK_INDEX=1 CLOUD_RUN_TASK_COUNT=4 snapwriter backfill --input-dir ./snapshots`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.backfill(cmd, f, b) },
	}
	fl := cmd.Flags()
	fl.StringVar(&b.dir, "input-dir", "", "directory or gs://BUCKET/PREFIX folder of YYYY-MM-DD.json files or YYYY-MM-DD/ folders (required)")
	fl.StringVar(&b.from, "from", "", `first date to write (inclusive): YYYY-MM-DD, "today" or "today-N"`)
	fl.StringVar(&b.to, "to", "", `last date to write (inclusive): YYYY-MM-DD, "today" or "today-N"`)
	registerTimezone(fl, &b.timezone, `IANA time zone of "today" in --from and --to`)
	registerWait(fl, &b.wait)
	fl.BoolVar(&b.allowEmpty, "allow-empty", false, "exit 0 when no dated input lies within --from..--to (default: exit 7)")
	fl.BoolVar(&b.skipComplete, "skip-complete", false, "leave dates that are already complete in Firestore alone")
	fl.Var(newUnsetInt(&b.taskIndex), "task-index", "this task's index (default CLOUD_RUN_TASK_INDEX, else 0)")
	fl.Var(newUnsetInt(&b.taskCount), "task-count", "number of tasks sharing the dates (default CLOUD_RUN_TASK_COUNT, else 1)")
	fl.BoolVar(&b.asJSON, "json", false, "print the summary as JSON")
	fl.BoolVar(&b.dryRun, "dry-run", false, dryRunUsage+", for every date of this task")
	fl.StringVar(&b.progress, "progress", "auto", "progress display: auto (a bar on a terminal), bar, or log")
	f.register(fl)
	f.registerGate(fl)
	// The tasks divide the write budget: a chunk is a tenth of a second of
	// this task's share.
	setUsages(fl, map[string]string{"batch-size": fmt.Sprintf("district operations per chunk (1..%d), at most a tenth of a second of this task's share of the write budget (12 for each of 4 tasks)", snapshot.MaxBatchSize)})
	registerRequestTimeout(fl, backfillRequestTimeoutUsage)
	registerStoreFlags(fl)
	_ = cmd.MarkFlagRequired("input-dir")
	return cmd
}

func (a *app) backfill(cmd *cobra.Command, f writeFlags, b backfillFlags) error {
	if err := f.validate(); err != nil {
		return err
	}
	if err := checkWait(b.wait); err != nil {
		return err
	}
	loc, err := loadTimezone(b.timezone)
	if err != nil {
		return err
	}
	now := a.now().In(loc)
	b.from, b.to = backfill.ResolveDate(b.from, now), backfill.ResolveDate(b.to, now)
	if err := backfill.CheckRange(b.from, b.to); err != nil {
		return usage(err)
	}
	if err := checkProgress(b.progress); err != nil {
		return err
	}
	shard, err := backfill.TaskShard(b.taskIndex, b.taskCount, a.lookupEnv)
	if err != nil {
		return shardUsage(err, b.taskIndex, b.taskCount, a.lookupEnv)
	}
	ctx := cmd.Context()
	loader := a.loader(b.wait)
	all, err := a.listDated(ctx, loader, b)
	if err != nil {
		return err
	}
	if len(backfill.Select(all, b.from, b.to, backfill.Shard{Index: 0, Count: 1})) == 0 {
		return a.noInput(b, all)
	}
	mine := backfill.Select(all, b.from, b.to, shard)
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	reader := snapshot.NewReader(client, a.global.collection)

	// With --skip-complete, one listing (a projection of each root) tells
	// which dates are done. The writer checks again under the lock.
	complete := map[string]string{}
	if b.skipComplete {
		lctx, cancel := context.WithTimeout(ctx, a.bound())
		complete, err = backfill.Completed(lctx, reader)
		cancel()
		if err != nil {
			return a.firestoreWait(err)
		}
	}
	if err := backfill.Check(ctx, loader, mine, complete); err != nil {
		var ue *backfill.UnusableError
		if errors.As(err, &ue) {
			return usagef("backfill: %d of %s cannot be used; nothing was written:\n  %s",
				len(ue.Problems), plural.N(ue.Checked, "dated input"), strings.Join(ue.Problems, "\n  "))
		}
		return err
	}
	if b.dryRun {
		return a.backfillPlan(ctx, client, f, b, backfillDates{mine: mine, complete: complete, shard: shard, loader: loader})
	}
	log := a.log.With(zap.Int("taskIndex", shard.Index), zap.Int("taskCount", shard.Count))
	// Of this task's dates: the listing holds every complete snapshot
	// stored, other dates' too.
	done := 0
	for _, in := range mine {
		if _, ok := complete[in.Date]; ok {
			done++
		}
	}
	log.Info("backfill starting", zap.Int("dates", len(mine)), zap.Int("alreadyComplete", done),
		zap.Int("datesInDir", len(all)), zap.String("from", b.from), zap.String("to", b.to), zap.Bool("skipComplete", b.skipComplete))

	// The tasks divide the collection's write budget among themselves.
	f.share = shard.Count
	bar := progress.New(a.stderr, a.barMode(b.progress), len(mine), "backfill")
	w, closeLocker, err := a.newWriter(ctx, client, f, snapshot.WithSkipComplete(b.skipComplete), snapshot.WithLogger(bar.Quiet(a.log)))
	if err != nil {
		return err
	}
	defer closeLocker()
	res := backfill.Run(ctx, mine, backfill.Options{
		Writer:       hintingWriter{w},
		Loader:       loader,
		SkipComplete: b.skipComplete,
		Reader:       reader,
		ReadTimeout:  a.bound(),
		Complete:     complete,
		// A store that did not answer stops the backfill.
		Unanswered: func(err error) (string, error) {
			err = a.writeWait(err, f)
			var we *waitError
			if errors.As(err, &we) {
				return we.Summary(), err
			}
			return "", err
		},
		Log:      bar.Quiet(log),
		Progress: bar,
	})
	_ = bar.Finish()
	return a.backfillReport(ctx, res, shard, log, b.asJSON)
}

// backfillReport logs and prints how the dates of res went, and returns
// the worst date's ending as a datesError (nil when its exit code is 0).
// A backfill a signal stopped (ctx) reports the exit code the process
// ends with, 128+n (app.run).
func (a *app) backfillReport(ctx context.Context, res *backfill.Summary, shard backfill.Shard, log *zap.Logger, asJSON bool) error {
	sum := backfill.NewReport(res, shard, func(r backfill.DateResult) int { return dateExit(r.Outcome, r.Err) })
	sum.ExitCode = signalExit(ctx, sum.ExitCode)
	log.Log(levelFor(sum.ExitCode), "backfill finished", zap.Int("complete", sum.Complete), zap.Int("partial", sum.Partial),
		zap.Int("failed", sum.Failed), zap.Int("skipped", sum.Skipped), zap.Int("notStarted", sum.NotStarted),
		zap.Int("exitCode", sum.ExitCode))
	if err := a.output(asJSON, sum, sum.WriteTable); err != nil || sum.ExitCode == exitOK {
		return err
	}
	msg := "backfill: " + sum.Counts()
	if res.Stopped != nil {
		// Say which store did not answer, not just the count.
		msg += "; " + res.Stopped.Error()
	}
	worst, _ := res.Worst()
	return datesError{worst: worst.Outcome, err: worst.Err, msg: msg}
}

// listDated lists the dated inputs of --input-dir, waiting (as l does for
// an input) while none lies within --from..--to: a scheduled run that
// fires before the day's upload has begun. A directory or bucket that
// cannot be listed, or lists a date twice, is bad input (exit 2); Cloud
// Storage that does not answer is exit 1.
func (a *app) listDated(ctx context.Context, l *input.Loader, b backfillFlags) ([]backfill.Input, error) {
	var all []backfill.Input
	_, err := l.Poll(ctx, b.dir, func() (bool, error) {
		var err error
		if all, err = backfill.List(ctx, l, b.dir); err != nil {
			return false, err
		}
		return len(backfill.Select(all, b.from, b.to, backfill.Shard{Index: 0, Count: 1})) > 0, nil
	})
	if err == nil {
		return all, nil
	}
	if errors.As(err, new(*waitError)) || ctx.Err() != nil {
		return nil, err
	}
	return nil, usagef("--input-dir: %v", err)
}

// noInput is backfill's answer to a window with no dated input: not
// success (exit 7), saying where it looked, unless --allow-empty.
func (a *app) noInput(b backfillFlags, all []backfill.Input) error {
	window := "any date"
	switch {
	case b.from != "" && b.to != "":
		window = b.from + " to " + b.to
	case b.from != "":
		window = b.from + " or later"
	case b.to != "":
		window = b.to + " or earlier"
	}
	// where follows errNoInput's words in both messages.
	where := fmt.Sprintf(" in %s for %s: looked for YYYY-MM-DD.json files and YYYY-MM-DD/ folders", b.dir, window)
	if len(all) > 0 {
		where += fmt.Sprintf(" (%d %s outside it, %s to %s)", len(all), plural.Word(len(all), "lies", "lie"), all[0].Date, all[len(all)-1].Date)
	}
	if b.wait > 0 {
		where += fmt.Sprintf("; waited %s (--wait-for-input)", b.wait)
	}
	if b.allowEmpty {
		a.log.Warn("backfill: nothing to write (--allow-empty)", zap.String("reason", errNoInput.Error()+where))
		_, err := fmt.Fprintf(a.stdout, "backfill: nothing to write: %s%s\n", errNoInput, where)
		return err
	}
	return fmt.Errorf("backfill: %w%s; nothing was written (--allow-empty makes this exit 0)", errNoInput, where)
}
