package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/loadtest"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// codedError ends a command with a given exit code; errors.Is and
// errors.As see the error it wraps.
type codedError struct {
	code int
	err  error
}

func (e codedError) Error() string { return e.err.Error() }
func (e codedError) Unwrap() error { return e.err }

// loadtestFlags are loadtest's own flags; the write tuning flags are in
// writeFlags.
type loadtestFlags struct {
	districts   int
	concurrency []int
	rounds      int
	date        string
	asJSON      bool
}

// loadtestSkips are the write flags loadtest leaves out: it takes a list of
// concurrencies, and deletes every snapshot it writes, so a backend switch
// has nothing to allow.
var loadtestSkips = map[string]bool{"concurrency": true, "allow-lock-backend-switch": true}

func (a *app) loadtestCommand() *cobra.Command {
	var f writeFlags
	var l loadtestFlags
	cmd := &cobra.Command{
		Use:   "loadtest --collection C [--districts N] [--concurrency 3,16] [--rounds K]",
		Short: "Measure snapshot writes on this database, in a scratch collection, and delete them",
		Long: `Write synthetic snapshots of --districts districts into the scratch collection
--collection with the real writer (lock, fence, chunk transactions, progress
records), --rounds times at each --concurrency, and print per concurrency:
districts/s, chunk commit latency p50/p95/p99 (nearest rank, district chunks),
ABORTED and other retries, commits of the root document, lock wait and failed
chunks, then each round. The emulator has no replication, no index fan-out and no
per-document write limit: run this against the database you will write to.

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
  snapwriter loadtest --collection loadtest_scratch --json > loadtest.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.loadtest(cmd, f, l) },
	}
	fl := cmd.Flags()
	fl.IntVar(&l.districts, "districts", loadtest.DefaultDistricts, "districts per snapshot (1..100000)")
	fl.IntSliceVar(&l.concurrency, "concurrency", loadtest.DefaultConcurrency(), "chunk concurrencies to compare, comma-separated (each 1..256)")
	fl.IntVar(&l.rounds, "rounds", loadtest.DefaultRounds, "writes per concurrency (1..100)")
	fl.StringVar(&l.date, "date", loadtest.DefaultDate, "snapshot id every round writes (YYYY-MM-DD)")
	fl.BoolVar(&l.asJSON, "json", false, "print the report as JSON")
	wf := pflag.NewFlagSet("write", pflag.ContinueOnError)
	f.register(wf)
	wf.VisitAll(func(w *pflag.Flag) {
		if !loadtestSkips[w.Name] {
			fl.AddFlag(w)
		}
	})
	registerTimeout(fl, snapshot.DefaultRequestTimeout, writeTimeoutUsage)
	return cmd
}

// checkLoadtestFlags refuses, before anything touches Firestore, a command
// line loadtest cannot run: among them a missing --collection and one that
// cannot be scratch.
func (a *app) checkLoadtestFlags(cmd *cobra.Command, f writeFlags, l loadtestFlags) error {
	coll := a.global.collection
	switch {
	case !cmd.Flags().Changed("collection"):
		return usagef("--collection is required: name a scratch collection (loadtest writes and deletes snapshots there)")
	case coll == snapshot.DefaultCollection:
		return usagef("--collection %q: refused: loadtest writes only into a scratch collection", coll)
	case coll == firestorelock.DefaultLockCollection || coll == firestorelock.DefaultFenceCollection:
		return usagef("--collection %q: refused: the lock backend keeps its documents there", coll)
	case l.districts < 1 || l.districts > 100000:
		return usagef("--districts %d: want 1..100000", l.districts)
	case l.rounds < 1 || l.rounds > 100:
		return usagef("--rounds %d: want 1..100", l.rounds)
	case len(l.concurrency) == 0:
		return usagef("--concurrency: want at least one")
	case !model.ValidDate(l.date):
		return usagef("--date %q: want a real YYYY-MM-DD date", l.date)
	}
	seen := map[int]bool{}
	for _, c := range l.concurrency {
		if seen[c] {
			return usagef("--concurrency %v: %d is listed twice", l.concurrency, c)
		}
		seen[c] = true
		f.concurrency = c
		if err := f.validate(); err != nil {
			return err
		}
	}
	return nil
}

func (a *app) loadtest(cmd *cobra.Command, f writeFlags, l loadtestFlags) error {
	if err := a.checkLoadtestFlags(cmd, f, l); err != nil {
		return err
	}
	ctx := cmd.Context()
	// The first SIGINT/SIGTERM ends ctx (main's signal.NotifyContext); it
	// is noted here for the exit code, and a second one ends the cleanup.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	cleanupCtx, stopCleanup := context.WithCancel(context.WithoutCancel(ctx))
	defer stopCleanup()
	var got atomic.Int32
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case s := <-sigs:
			if n, ok := s.(syscall.Signal); ok {
				got.Store(int32(n))
			}
		case <-done:
			return
		}
		select {
		case <-sigs:
			a.log.Warn("second signal: stopping the cleanup; the next loadtest on the collection removes what is left")
			stopCleanup()
		case <-done:
		}
	}()

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
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()
	// Deletes retry as chunks do.
	deletes := retry.DefaultPolicy()
	deletes.MaxRetries = f.maxRetries
	deletes.ContentionWait = f.contention
	rep, err := loadtest.Run(ctx, loadtest.Config{
		Client:     client,
		Collection: a.global.collection,
		Locker:     locker,
		LockTTL:    f.lockTTL,
		LockWait:   f.lockWait,
		NewWriter: func(c int) (*snapshot.Writer, error) {
			fc := f
			fc.concurrency = c
			w, closeW, err := a.newWriter(ctx, client, fc)
			if err == nil {
				closers = append(closers, closeW)
			}
			return w, err
		},
		Districts:      l.districts,
		Concurrency:    l.concurrency,
		Rounds:         l.rounds,
		Date:           l.date,
		DeleteRetry:    &deletes,
		CleanupContext: cleanupCtx,
		Log:            a.log,
	})
	if rep != nil {
		if perr := a.printLoadtest(rep, f, l); perr != nil && err == nil {
			err = perr
		}
	}
	return a.loadtestExit(err, int(got.Load()), f)
}

// loadtestExit gives a loadtest error its exit code (see the command's
// help); sig is the signal that interrupted the run, 0 if none.
func (a *app) loadtestExit(err error, sig int, f writeFlags) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, loadtest.ErrRefused):
		return usageError{err}
	case errors.Is(err, loadtest.ErrBusy):
		return codedError{exitLockHeld, err}
	case errors.Is(err, loadtest.ErrCleanup):
		return a.firestoreWait(err)
	case errors.Is(err, loadtest.ErrInterrupted) && sig > 0:
		// The shell's convention for a process a signal ended: 128 + n.
		return codedError{128 + sig, err}
	case errors.Is(err, loadtest.ErrPartialRounds):
		return codedError{exitPartial, err}
	}
	return a.writeWait(err, f)
}

// printLoadtest prints rep as JSON or as tables: one row per concurrency,
// then one per round.
func (a *app) printLoadtest(rep *loadtest.Report, f writeFlags, l loadtestFlags) error {
	if l.asJSON {
		return printJSON(a.stdout, rep)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "loadtest: %d districts per write into %q (snapshot %s), %d rounds per concurrency, batch size %d, lock backend %s\n\n",
		rep.Districts, rep.Collection, rep.SnapshotID, rep.RoundsPerLevel, f.batchSize, f.lock.backend)
	if _, err := io.WriteString(a.stdout, b.String()); err != nil {
		return err
	}
	return rep.WriteTables(a.stdout, len(l.concurrency)*l.rounds)
}
