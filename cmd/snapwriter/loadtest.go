package main

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// loadtestFlags are loadtest's own flags; the write tuning flags are in
// writeFlags.
type loadtestFlags struct {
	run    loadtest.Config // Districts, Concurrency, Rounds and Date
	asJSON bool
}

func (a *app) loadtestCommand() *cobra.Command {
	var f writeFlags
	var l loadtestFlags
	cmd := &cobra.Command{
		Use:   "loadtest --collection C [--districts N] [--concurrency 3,16] [--rounds K] [--write-ramp=false --max-write-rate N]",
		Short: "Measure snapshot writes on this database, in a scratch collection, and delete them",
		Long: `Write synthetic snapshots of --districts districts into the scratch collection
--collection with the real writer (lock, fence, chunk transactions, progress
records), --rounds times at each --concurrency, and print per concurrency:
districts/s, chunk commit latency p50/p95/p99 (nearest rank, district chunks),
ABORTED and other retries, commits of the root document, lock wait and failed
chunks, then each round. The emulator has no replication, no index fan-out and no
per-document write limit: run this against the database you will write to.

Chunks take their writes from the write budget (--initial-write-rate, 500/s,
growing 50% every 5 minutes up to --max-write-rate; --write-ramp=false: at
--max-write-rate from the start), as the daily write does. Per concurrency and
per round, loadtest also prints the district write rate against it: districts/s
between the chunks' commits, the busiest second, the budget's limit (at the end
and its lowest), the chunks' wait for budget, and the RESOURCE_EXHAUSTED and
ABORTED answers to chunk commits. A verdict follows: whether the budget set the
pace (then rerun with --write-ramp=false and a higher --max-write-rate to
measure the database itself), the fastest rate the database sustained without
pushing back, as the --max-write-rate to give the daily write, and the
push-back the rounds met.

Every round writes snapshot --date into the then empty collection and is deleted
before the next (district documents, manifest pages, the fence document, then the
root). Before writing, loadtest refuses (exit 2, nothing written) "snapshots" and
any collection holding a document that is not one of its snapshots (marked
payload.metadata.source = "snapwriter-loadtest"), and deletes what a killed run
left. A run lock per collection keeps two runs apart. Lock fence counters are
lock infrastructure and stay.

On SIGINT or SIGTERM the round in flight stops (chunks in flight get
--grace-period), everything written is deleted, the figures so far are printed,
and the exit code is 130 (SIGINT) or 143 (SIGTERM); a second signal stops the
cleanup, and the next run removes the rest.

Exit codes: 0 every round complete, 1 runtime failure (including a cleanup that
could not finish), 2 bad flags or a refused collection (nothing written),
3 a round ended partial (reported; the run went on and cleaned up), 4 another
loadtest holds the collection, 130/143 interrupted.`,
		Example: `  snapwriter loadtest --collection loadtest_scratch
  snapwriter loadtest --collection loadtest_scratch --districts 5000 --concurrency 3,8,16,32 --rounds 5
  snapwriter loadtest --collection loadtest_scratch --districts 20000 --write-ramp=false --max-write-rate 2000
  snapwriter loadtest --collection loadtest_scratch --json > loadtest.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.loadtest(cmd, f, l) },
	}
	fl := cmd.Flags()
	fl.IntVar(&l.run.Districts, "districts", loadtest.DefaultDistricts, fmt.Sprintf("districts per snapshot (1..%d)", loadtest.MaxDistricts))
	fl.IntSliceVar(&l.run.Concurrency, "concurrency", loadtest.DefaultConcurrency(),
		fmt.Sprintf("chunk concurrencies to compare, comma-separated (each 1..%d)", snapshot.MaxConcurrency))
	fl.IntVar(&l.run.Rounds, "rounds", loadtest.DefaultRounds, fmt.Sprintf("writes per concurrency (1..%d)", loadtest.MaxRounds))
	fl.StringVar(&l.run.Date, "date", loadtest.DefaultDate, "snapshot id every round writes (YYYY-MM-DD)")
	fl.BoolVar(&l.asJSON, "json", false, "print the report as JSON")
	// Loadtest takes a list of concurrencies (its own --concurrency), and
	// deletes every snapshot it writes, so a backend switch has nothing to
	// allow.
	addWriteFlags(fl, &f, loadtestWriteUsages, "concurrency", "allow-lock-backend-switch")
	registerRequestTimeout(fl, loadtestRequestTimeoutUsage)
	registerStoreFlags(fl)
	// The scratch collection has no default: the writers' ("snapshots")
	// is refused.
	c := fl.Lookup("collection")
	c.DefValue, c.Usage = "", `scratch collection to write the test snapshots into and delete them from (required; "snapshots", and a collection holding anything else, are refused)`
	_ = c.Value.Set("")
	return cmd
}

// loadtestWriteUsages are the write flags' usage texts as loadtest uses
// them: for each round's write, and for its own run lock and cleanup.
var loadtestWriteUsages = map[string]string{
	"batch-size":         fmt.Sprintf("district operations per chunk (1..%d), at most a tenth of a second of the write budget", snapshot.MaxBatchSize),
	"max-retries":        "retries per chunk, and per delete of the cleanup, after the first attempt",
	"lock-ttl":           "time to live of the run lock and of each round's snapshot lock; renewed every TTL/3",
	"lock-wait":          "how long to wait for a held lock: another loadtest's run lock on the collection, a round's snapshot lock (0: fail at once)",
	"grace-period":       "on SIGTERM/SIGINT, how long the round's chunks in flight may take to finish before the cleanup",
	"record-interval":    "how often, at most, a round's write records its progress in the snapshot's root document, as the daily write does",
	"initial-write-rate": "district writes a second each round's write starts at: Firestore's guidance for a new collection (docs/how-a-write-works.md)",
	"max-write-rate": "district writes a second the ramp grows to, at most; with --write-ramp=false, the rate every round writes at: " +
		"raise it to measure the database rather than the budget",
}

// checkLoadtest refuses, before anything touches Firestore, a command line
// loadtest cannot run. The write flags are checked at each concurrency
// listed before a repeat, so that of several faults the first is told.
func checkLoadtest(run loadtest.Config, f writeFlags) error {
	var ce *loadtest.ConfigError
	checked := run.Concurrency
	if errors.As(run.Check(), &ce) {
		checked = checked[:ce.Index] // none, unless ce is the repeat
	}
	for _, c := range checked {
		f.concurrency = c
		if err := f.validate(); err != nil {
			return err
		}
	}
	if ce != nil {
		return usage(ce)
	}
	return nil
}

func (a *app) loadtest(cmd *cobra.Command, f writeFlags, l loadtestFlags) error {
	run := l.run
	// --collection has no default: loadtest wants one named.
	run.Collection = a.global.collection
	if err := checkLoadtest(run, f); err != nil {
		return err
	}
	ctx := cmd.Context()
	// The first SIGINT/SIGTERM ends ctx (main's signals.NotifyContext,
	// whose cause app.run makes the exit code); a second one ends the
	// cleanup.
	sig := signals.Start(ctx, func() {
		a.log.Warn("second signal: stopping the cleanup; the next loadtest on the collection removes what is left")
	})
	defer sig.Stop()

	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	locker, closeLocker, err := a.openLocker(ctx, client, f.lock)
	if err != nil {
		return err
	}
	defer closeLocker()
	// Deletes retry as chunks do.
	deletes := retry.DefaultPolicy()
	deletes.MaxRetries = f.maxRetries
	deletes.ContentionWait = f.contention
	run.Client, run.Locker, run.LockTTL, run.LockWait = client, locker, f.lockTTL, f.lockWait
	run.DeleteRetry, run.CleanupContext, run.Log = &deletes, sig.Cleanup(), a.log
	run.NewWriter = func(c int) (*snapshot.Writer, func(), error) {
		fc := f
		fc.concurrency = c
		return a.newWriter(ctx, client, fc)
	}
	rep, err := loadtest.Run(ctx, run)
	switch { // a failed print matters only after a run that did not fail
	case rep == nil:
	case l.asJSON:
		err = cmp.Or(err, printJSON(a.stdout, rep))
	default:
		err = cmp.Or(err, rep.WriteText(a.stdout, f.batchSize, f.lock.backend))
	}
	return a.loadtestEnd(err, f)
}

// loadtestEnd is a loadtest's error as the command ends with it (exitCode
// reads loadtest's sentinels; a run a signal interrupted exits 128+n,
// which app.run decides).
func (a *app) loadtestEnd(err error, f writeFlags) error {
	switch {
	case err == nil, errors.Is(err, loadtest.ErrRefused), errors.Is(err, loadtest.ErrBusy), errors.Is(err, loadtest.ErrPartialRounds):
		return err
	case errors.Is(err, loadtest.ErrCleanup):
		return a.firestoreWait(err)
	case errors.Is(err, loadtest.ErrInterrupted):
		return err
	}
	return a.writeWait(err, f)
}
