package main

import (
	"context"
	"errors"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/input/gcs"
	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/schedule"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) scheduleCommand() *cobra.Command {
	var f writeFlags
	var s schedule.Config
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "schedule --cron EXPR [--timezone TZ] --input-dir DIR|gs://BUCKET/PREFIX|--input-url URL",
		Short: "Long-running: write the day's snapshot on a cron schedule",
		Long: `Run as a worker that writes one snapshot per cron tick. The snapshot date is the
tick's date in --timezone plus --date-offset days; its input is DIR/YYYY-MM-DD.json
(or the snapshot directory DIR/YYYY-MM-DD/) with --input-dir, which may be a Cloud
Storage folder gs://BUCKET/PREFIX, or an HTTP GET of --input-url with {date}
replaced by the date. A gs:// snapshot folder is written once its manifest.json
says writeComplete: true; --wait-for-input makes a run wait that long from its
tick for an upload that has not landed or finished.

A run that finds no input for its date is a failed run (logged at ERROR with
exitCode 2, or 7 after a --wait-for-input), not a quiet success; with
--allow-empty it is logged as nothing to write.

--cron takes the standard five fields (minute hour day-of-month month
day-of-week), an optional leading seconds field, or a descriptor (@daily,
@hourly, @every 30m). Writes never overlap: a tick that comes while a write is
still running is logged as a missed run and skipped. A run that fails (input
missing, invalid, lock held, partial) is logged and the worker carries on.

SIGTERM or SIGINT stops the schedule: no new run starts, a write in progress
stops like 'write' does on a signal (chunks in flight get --grace-period, the
manifest records the partial state, the lock is released), and the worker exits
143 after SIGTERM, 130 after SIGINT, as every command a signal stopped does. A run
that panics is a failed run, logged with its stack; the worker carries on.`,
		Example: `  snapwriter schedule --cron '0 6 * * *' --timezone Europe/Berlin --input-dir /data/snapshots
  snapwriter schedule --cron '30 5 * * *' --date-offset -1 --input-url 'https://exports.example.com/{date}.json'
  SNAPWRITER_CRON='@every 1h' SNAPWRITER_INPUT_DIR=/data snapwriter schedule
  snapwriter schedule --cron '0 6 * * *' --input-dir gs://exports/snapshots --wait-for-input 3h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkWait(wait); err != nil {
				return err
			}
			s.NewLoader = func() *input.Loader { return a.loader(wait) }
			return a.schedule(cmd, f, s)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&s.Cron, "cron", "", "cron expression: 5 fields, 6 with leading seconds, or @daily/@every D (required)")
	fl.StringVar(&s.Timezone, "timezone", "UTC", "IANA time zone of the cron expression and of the snapshot date")
	fl.StringVar(&s.InputDir, "input-dir", "", "directory or gs://BUCKET/PREFIX folder holding YYYY-MM-DD.json files or YYYY-MM-DD/ folders")
	registerWait(fl, &wait)
	fl.BoolVar(&s.AllowEmpty, "allow-empty", false, "log a run whose date has no input as nothing to write, not as a failed run")
	fl.StringVar(&s.InputURL, "input-url", "", "http(s) URL of the Snapshot JSON; {date} is replaced by the date")
	fl.IntVar(&s.DateOffset, "date-offset", 0, "days added to the tick's date to get the snapshot date (-1: yesterday)")
	fl.DurationVar(&s.HTTPTimeout, "http-timeout", 2*time.Minute, "timeout of one --input-url download")
	f.register(fl)
	f.registerGate(fl)
	// A held run is logged, the worker carries on: no exit 8.
	setUsages(fl, map[string]string{"gate": "check each run's input against what readers have before writing, and hold (nothing written; the run logged as failed with exitCode 8) " +
		"a snapshot with fewer districts, changed values, or month-end deltas past their bounds"})
	registerRequestTimeout(fl, scheduleRequestTimeoutUsage)
	registerStoreFlags(fl)
	_ = cmd.MarkFlagRequired("cron")
	return cmd
}

func (a *app) schedule(cmd *cobra.Command, f writeFlags, s schedule.Config) error {
	if err := f.validate(); err != nil {
		return err
	}
	worker, err := s.Worker()
	if err != nil {
		return usage(err)
	}
	ctx := cmd.Context()
	if gcs.IsURL(s.InputDir) {
		// A bucket that does not exist is refused at once, not at every
		// tick; Cloud Storage that does not answer now may later.
		if _, err := backfill.List(ctx, a.loader(0), s.InputDir); errors.Is(err, model.ErrInvalid) {
			return usagef("--input-dir: %v", err)
		} else if err != nil {
			a.log.Warn("schedule: --input-dir could not be listed at start; the runs will try again", zap.Error(err))
		}
	}
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	w, closeLocker, err := a.newWriter(ctx, client, f)
	if err != nil {
		return err
	}
	defer closeLocker()
	worker.Write = func(ctx context.Context, date string, snap *model.Snapshot) (*snapshot.Result, error) {
		res, err := w.Write(ctx, date, snap)
		return res, withHint(a.writeWait(err, f))
	}
	worker.Log, worker.ExitCode = a.log, exitCode
	if err := worker.Run(ctx); err != nil {
		return err
	}
	// A worker ends only when told to: its clean stop is the signal's
	// ending (exit 128+n), as for every command a signal stopped.
	if signals.Received(ctx) != 0 {
		return context.Cause(ctx)
	}
	return nil
}
