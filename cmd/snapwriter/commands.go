package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) generateCommand() *cobra.Command {
	var date, folder string
	var districts int
	var seed int64
	cmd := &cobra.Command{
		Use:   "generate --date D --districts N [--seed S] [--folder DIR]",
		Short: "Print a realistic synthetic snapshot (input format), or write it as a snapshot folder",
		Long: `Print a realistic synthetic snapshot as Snapshot JSON, or with --folder write it
as the application's per-district snapshot folder (metadata.json,
district_{id}.json, all-districts-rankings.json, and manifest.json last, with
writeComplete: true): what its uploader puts in gs://BUCKET/snapshots/{date}/.`,
		Example: `  snapwriter generate --date 2026-11-20 --districts 132 > snap.json
  snapwriter generate --date 2026-11-20 --districts 5000 --seed 7 | snapwriter write --input -
  snapwriter generate --date 2026-11-20 --folder ./export/2026-11-20 && gcloud storage cp -r ./export/2026-11-20 gs://BUCKET/snapshots/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date", date)
			}
			if districts < 1 || districts > 100000 {
				return usagef("--districts %d: want 1..100000", districts)
			}
			snap := model.Generate(date, districts, seed)
			if folder == "" {
				return json.NewEncoder(a.stdout).Encode(snap)
			}
			if entries, err := os.ReadDir(folder); err == nil && len(entries) > 0 {
				return usagef("--folder %s: not empty; give a new or empty directory", folder)
			}
			if err := model.WriteFolder(snap, folder); err != nil {
				return err
			}
			_, err := fmt.Fprintf(a.stdout, "wrote %s to %s\n", plural.N(districts, "district"), folder)
			return err
		},
	}
	cmd.Flags().StringVar(&date, "date", "", "snapshot date, YYYY-MM-DD (required)")
	cmd.Flags().IntVar(&districts, "districts", 132, "number of districts")
	cmd.Flags().Int64Var(&seed, "seed", 1, "random seed (same seed, same snapshot)")
	cmd.Flags().StringVar(&folder, "folder", "", "write a per-district snapshot folder here (new or empty) instead of printing JSON")
	_ = cmd.MarkFlagRequired("date")
	return cmd
}

// writeFlags are the write tuning flags; write, backfill, repair and
// schedule share them.
type writeFlags struct {
	batchSize   int
	concurrency int
	maxRetries  int
	lockTTL     time.Duration
	lockWait    time.Duration
	grace       time.Duration
	contention  time.Duration
	recordEvery time.Duration
	allowSwitch bool
	lock        lockFlags
	// The district write budget: the ramp's start and cap, whether it
	// grows (--write-ramp), and share, the writers dividing it (backfill's
	// tasks; 0 counts as 1).
	initialRate, maxRate float64
	ramp                 bool
	share                int
	// initialFlag is --initial-write-rate, which says whether the user
	// set it (on the command line or by its SNAPWRITER_ variable).
	initialFlag *pflag.Flag
	// gate is the publication gate's flags, nil for a command that does
	// not register them (registerGate).
	gate *gateFlags
}

// registerGate registers the publication gate's flags on fl: write,
// backfill and schedule take them.
func (f *writeFlags) registerGate(fl *pflag.FlagSet) {
	f.gate = new(gateFlags)
	f.gate.register(fl)
}

func (f *writeFlags) register(fl *pflag.FlagSet) {
	fl.IntVar(&f.batchSize, "batch-size", snapshot.DefaultBatchSize, fmt.Sprintf("district operations per chunk (1..%d), at most a tenth of a second of the write budget", snapshot.MaxBatchSize))
	fl.IntVar(&f.concurrency, "concurrency", snapshot.DefaultConcurrency, "chunks in flight at once, at most: a write starts at one and runs fewer while the store is slow to answer (docs/lease.md)")
	fl.IntVar(&f.maxRetries, "max-retries", retry.DefaultPolicy().MaxRetries, "retries per chunk after the first attempt")
	fl.DurationVar(&f.lockTTL, "lock-ttl", snapshot.DefaultLockTTL, "lock time to live; renewed every TTL/3")
	fl.DurationVar(&f.lockWait, "lock-wait", snapshot.DefaultLockWait, "how long to wait for a held lock (0: fail at once)")
	fl.DurationVar(&f.grace, "grace-period", snapshot.DefaultGracePeriod, "on SIGTERM/SIGINT, how long chunks in flight may take to finish")
	fl.DurationVar(&f.recordEvery, "record-interval", snapshot.DefaultRecordInterval,
		"how often, at most, the write records its progress in the snapshot's root document (chunks never write it)")
	fl.DurationVar(&f.contention, "contention-wait", snapshot.DefaultContentionWait,
		"how long a transaction that finds the snapshot or its lock document locked by another transaction keeps retrying (a writer that died mid-transaction holds it until Firestore expires it, within 60 s)")
	fl.BoolVar(&f.allowSwitch, "allow-lock-backend-switch", false, "replace a snapshot written under another lock backend (one-time migration step)")
	fl.Float64Var(&f.initialRate, "initial-write-rate", pacing.DefaultInitial,
		"district writes a second a snapshot's write starts at: Firestore's guidance for a new collection (docs/how-a-write-works.md)")
	fl.Float64Var(&f.maxRate, "max-write-rate", pacing.DefaultMax,
		"district writes a second the ramp grows to, at most: what loadtest found your database sustains; below the default start it lowers the start to it")
	f.initialFlag = fl.Lookup("initial-write-rate")
	fl.BoolVar(&f.ramp, "write-ramp", true,
		"grow the write rate 50% every 5 minutes from --initial-write-rate (Firestore's 500/50/5); --write-ramp=false: write at --max-write-rate from the start")
	f.lock.register(fl)
}

// addWriteFlags registers the write flags on fl for a command (prune,
// loadtest) that uses them otherwise than a write does: but for those
// named in skip, which it has no use for or a flag of its own by that
// name, and with the usage texts in usages (by flag name) in place of
// write's, so that its --help says what each does there.
func addWriteFlags(fl *pflag.FlagSet, f *writeFlags, usages map[string]string, skip ...string) {
	wf := pflag.NewFlagSet("write", pflag.ContinueOnError)
	f.register(wf)
	wf.VisitAll(func(w *pflag.Flag) {
		if !slices.Contains(skip, w.Name) {
			fl.AddFlag(w)
		}
	})
	setUsages(fl, usages)
}

// setUsages replaces the usage texts of the flags of fl named in usages,
// for a command that shares a registration (the write flags, the gate's)
// and uses a flag in its own way.
func setUsages(fl *pflag.FlagSet, usages map[string]string) {
	for name, u := range usages {
		fl.Lookup(name).Usage = u
	}
}

func (f writeFlags) validate() error {
	// --max-retries is the flag's own domain: the library's
	// policy.Unlimited is not offered on the command line.
	if f.maxRetries < 0 || f.maxRetries > maxRetriesFlag {
		return usagef("--max-retries %d: want 0..%d", f.maxRetries, maxRetriesFlag)
	}
	if err := f.writeRamp().Validate(); err != nil {
		if f.ramp && f.maxRate > 0 && f.initialRate > f.maxRate {
			return usagef("--initial-write-rate %g, --max-write-rate %g: the start is above the maximum; give a start at or below it, or no start (the maximum then lowers the default start to it)", f.initialRate, f.maxRate)
		}
		return usagef("--initial-write-rate %g, --max-write-rate %g: want 0 < initial ≤ max, in document writes a second", f.initialRate, f.maxRate)
	}
	if f.gate != nil {
		if err := f.gate.check(); err != nil {
			return err
		}
	}
	if err := snapshot.CheckOptions(f.options()...); err != nil {
		return usage(err)
	}
	return f.lock.validate()
}

// writeRamp is the ramp the flags describe, before its division among
// the writers sharing it.
func (f writeFlags) writeRamp() pacing.Ramp {
	if !f.ramp {
		return pacing.Fixed(f.maxRate)
	}
	r := pacing.DefaultRamp()
	r.Initial, r.Max = f.initialRate, f.maxRate
	if f.startLowered() {
		return r.WithMax(f.maxRate)
	}
	return r
}

// startLowered reports that --max-write-rate, below the default start,
// lowers the start to it: the user set no start of their own.
func (f writeFlags) startLowered() bool {
	return f.ramp && f.maxRate > 0 && f.maxRate < f.initialRate && (f.initialFlag == nil || !f.initialFlag.Changed)
}

// budget is the district write budget the flags describe: this process's
// share of the ramp. validate has checked the ramp.
func (f writeFlags) budget() *pacing.Budget {
	b, err := pacing.New(f.writeRamp(), max(f.share, 1))
	if err != nil {
		b, _ = pacing.New(pacing.DefaultRamp(), 1)
	}
	return b
}

// maxRetriesFlag bounds --max-retries.
const maxRetriesFlag = 100

// options are the writer options the flags set; the library checks their
// bounds (validate, NewWriter).
func (f writeFlags) options() []snapshot.Option {
	policy := retry.DefaultPolicy()
	policy.MaxRetries = f.maxRetries
	return append([]snapshot.Option{
		snapshot.WithBatchSize(f.batchSize),
		snapshot.WithConcurrency(f.concurrency),
		snapshot.WithRetryPolicy(policy),
		snapshot.WithLockTTL(f.lockTTL),
		snapshot.WithLockWait(f.lockWait),
		snapshot.WithGracePeriod(f.grace),
		snapshot.WithContentionWait(f.contention),
		snapshot.WithRecordInterval(f.recordEvery),
		snapshot.WithAllowLockBackendSwitch(f.allowSwitch),
		snapshot.WithWriteBudget(f.budget()),
	}, f.gate.writerOptions()...)
}

// writeOptions are the options of the writer the flags describe, for
// newWriter and the dry run's planner alike: the flags' own, the
// collection, the request bound and the logger, then extra, then the
// tests' writerOptions. Later options override earlier ones, so the
// tests' come last.
func (a *app) writeOptions(f writeFlags, extra ...snapshot.Option) []snapshot.Option {
	opts := append(f.options(),
		snapshot.WithCollection(a.global.collection),
		snapshot.WithRequestTimeout(a.bound()),
		snapshot.WithLogger(a.log))
	opts = append(opts, extra...)
	return append(opts, a.writerOptions...)
}

// newWriter builds the snapshot writer the flags describe, and returns the
// func that closes its lock backend (with the Firestore client of its own,
// see writeLocker) and its API client (after the writer is done).
func (a *app) newWriter(ctx context.Context, client *firestore.Client, f writeFlags, extra ...snapshot.Option) (*snapshot.Writer, func(), error) {
	locker, closeLocker, err := a.writeLocker(ctx, f.lock)
	if err != nil {
		return nil, nil, err
	}
	api, err := a.newAPIClient(ctx)
	if err != nil {
		closeLocker()
		return nil, nil, a.firestoreWait(fmt.Errorf("connecting to Firestore: %w", err))
	}
	closeAll := func() {
		closeLocker()
		_ = api.Close()
	}
	// The API client is the writer's alone (a planner commits no chunk);
	// it goes before extra, so that extra and the tests' writerOptions
	// may still override it.
	opts := a.writeOptions(f, append([]snapshot.Option{snapshot.WithAPIClient(api)}, extra...)...)
	w, err := snapshot.NewWriter(client, locker, opts...)
	if err != nil {
		closeAll()
		return nil, nil, usage(err)
	}
	return w, closeAll, nil
}

func (a *app) writeCommand() *cobra.Command {
	var f writeFlags
	var input, date, progressMode string
	var asJSON, dryRun bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "write --input F|-|gs://BUCKET/PATH [--date D] [--dry-run] [--wait-for-input D]",
		Short: "Write one snapshot and print the result",
		Long: `Write one snapshot: take the snapshot's fenced lock, write the root document,
commit the districts in chunks of --batch-size with --concurrency chunks in flight,
retry transient failures, record the outcome in the manifest, release the lock.

The input is a Snapshot JSON file, "-" for stdin, a per-district snapshot
directory (metadata.json, manifest.json, district_{id}.json), or the same in Cloud
Storage: gs://BUCKET/PATH.json, or a folder gs://BUCKET/snapshots/YYYY-MM-DD/
(Application Default Credentials; STORAGE_EMULATOR_HOST for a local server). The
snapshot id is payload.metadata.dataAsOfDate; --date names it for an input without
one and must agree with it otherwise. Input is validated before anything is written.

A gs:// folder is written only once its upload has finished: its manifest.json
says writeComplete: true (the uploader sets it last). Every object is read at the
generation listed, so one snapshot never mixes two uploads. A folder not ready
exits 7, nothing written; --wait-for-input waits for it (and for an input not
there yet). A local directory is refused only when its manifest.json says
writeComplete: false: exports on disk made before the flag existed lack it.

On SIGTERM or SIGINT no new chunk starts; chunks in flight get --grace-period to
finish, the manifest records what was and was not written (outcome partial), the
lock is released, and the exit code is 143 after SIGTERM, 130 after SIGINT, as for
every command a signal stopped: 'snapwriter repair' completes the snapshot.

On a terminal a progress bar counts the districts stored (rate, time left), and
the per-chunk log lines are left out while it shows; --progress log keeps them.`,
		Example: `  snapwriter write --input snap.json
  snapwriter generate --date 2026-11-20 | snapwriter write --input - --json
  SNAPWRITER_CONCURRENCY=16 snapwriter write --input ./snapshots/2026-11-20/
  snapwriter write --input gs://exports/snapshots/2026-11-20/ --wait-for-input 2h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if err := checkWait(wait); err != nil {
				return err
			}
			if date != "" && !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date", date)
			}
			if err := checkProgress(progressMode); err != nil {
				return err
			}
			return a.writeOp(cmd, f, writeRequest{input: input, date: date, wait: wait, asJSON: asJSON, progress: progressMode, op: (*snapshot.Writer).Write,
				dryRun: dryRun, plan: (*snapshot.Planner).Plan})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&input, "input", "", inputUsage+" (required)")
	registerWait(fl, &wait)
	fl.StringVar(&date, "date", "", "snapshot id (YYYY-MM-DD); default payload.metadata.dataAsOfDate, which it must equal when the input has one")
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	registerProgress(fl, &progressMode)
	fl.BoolVar(&dryRun, "dry-run", false, dryRunUsage)
	f.register(fl)
	f.registerGate(fl)
	registerRequestTimeout(fl, writeRequestTimeoutUsage)
	registerStoreFlags(fl)
	_ = cmd.MarkFlagRequired("input")
	return cmd
}

// writeRequest is what write or repair asks of writeOp: the input's path
// and --date, the output form, the --progress mode, the Writer's method
// and options of its own.
type writeRequest struct {
	input, date string
	// wait is --wait-for-input.
	wait     time.Duration
	asJSON   bool
	progress string
	op       func(w *snapshot.Writer, ctx context.Context, id string, snap *model.Snapshot) (*snapshot.Result, error)
	extra    []snapshot.Option
	// dryRun: print what op would do (plan) instead (dryrun.go).
	dryRun bool
	plan   func(p *snapshot.Planner, ctx context.Context, id string, snap *model.Snapshot) (*snapshot.Plan, error)
}

// writeOp is the body of write and repair: load and validate the input
// (nothing touches Firestore before that), build the writer, run r.op
// under the snapshot's id (--date, else the input's dataAsOfDate), print
// the result.
func (a *app) writeOp(cmd *cobra.Command, f writeFlags, r writeRequest) error {
	ctx := cmd.Context()
	snap, id, err := a.load(ctx, a.loader(r.wait), r.input, r.date)
	if err != nil {
		return err
	}
	defer snap.Close()
	client, err := a.client(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	if r.dryRun {
		return a.dryRun(ctx, client, f, r, id, snap)
	}
	budget := f.budget()
	barOpts, endBar := a.districtBar(r.progress, cmd.Name()+" "+id, len(snap.Payload.Districts), budget)
	extra := append([]snapshot.Option{snapshot.WithWriteBudget(budget)}, r.extra...)
	w, closeLocker, err := a.newWriter(ctx, client, f, append(extra, barOpts...)...)
	if err != nil {
		endBar()
		return err
	}
	defer closeLocker()
	res, werr := r.op(w, ctx, id, snap)
	endBar()
	if res != nil {
		if err := a.printResult(res, r.asJSON, f.startLowered()); err != nil {
			return err
		}
	}
	return withHint(a.writeWait(werr, f))
}

// printResult prints what a write or repair did, as its Outcome says.
func (a *app) printResult(res *snapshot.Result, asJSON, startLowered bool) error {
	if asJSON {
		return printJSON(a.stdout, res)
	}
	switch res.Outcome {
	case snapshot.OutcomeSkipped:
		_, err := fmt.Fprintf(a.stdout, "snapshot %s: already complete — nothing written\n", res.SnapshotID)
		return err
	case snapshot.OutcomeHeld:
		fmt.Fprintf(a.stdout, "snapshot %s: HELD by the publication gate — nothing written, %d ms\n", res.SnapshotID, res.TotalDurationMs)
		return printGate(a.stdout, res)
	}
	// By the Outcome alone: a write refused before any district (another
	// export given to repair, a lock backend switch, a failed root) wrote
	// nothing, and the stored snapshot is as it was, not partial.
	state := "PARTIAL" // OutcomePartial, OutcomeNotRecorded
	switch res.Outcome {
	case snapshot.OutcomeComplete:
		state = "complete"
	case snapshot.OutcomeNotWritten:
		state = "NOT WRITTEN"
	case snapshot.OutcomeFencedOut:
		state = "FENCED OUT"
	}
	fmt.Fprintf(a.stdout, "snapshot %s: %s — %s written in %s (%d failed), fence %s, %d ms\n",
		res.SnapshotID, state, plural.N(res.DistrictsWritten, "district"), plural.N(res.Chunks, "chunk"), res.FailedChunks, res.Fence, res.TotalDurationMs)
	if root, ok := res.Root(); ok && !root.Success {
		fmt.Fprintln(a.stdout, "the root document's transaction failed: see the error for what is stored")
	}
	if res.DistrictsKept > 0 {
		fmt.Fprintf(a.stdout, "%s %s already stored by an unfinished write of this input: recorded, not written again\n",
			plural.N(res.DistrictsKept, "district"), plural.Word(res.DistrictsKept, "was", "were"))
	}
	if n := len(res.FailedDistricts); n > 0 {
		fmt.Fprintf(a.stdout, "failed districts (%s): %s\n", thousands(n), idList(res.FailedDistricts))
	}
	if !res.ManifestRecorded() && res.Chunks > 0 {
		fmt.Fprintln(a.stdout, "the manifest was NOT recorded: the root still says the write is in progress; the lists above are this process's own account — run `snapwriter repair` to complete the snapshot")
	}
	if r := res.LockRenewals; r.Sheds > 0 || r.Pauses > 0 {
		fmt.Fprintf(a.stdout, "the store was slow to answer (the slowest lock renewal took %d ms): ran as few as %s at once, and paused %s for an overdue renewal, so as not to lose the lock\n",
			r.SlowestMs, plural.N(r.MinConcurrency, "chunk"), plural.Times(r.Pauses))
	}
	if res.StaleDeleted > 0 {
		fmt.Fprintf(a.stdout, "removed %s the snapshot no longer has\n", plural.N(res.StaleDeleted, "district document"))
	}
	if err := printGate(a.stdout, res); err != nil {
		return err
	}
	if wr := res.WriteRate; res.Chunks > 0 {
		fmt.Fprintf(a.stdout, "write rate: limit %.0f district writes/s (%s), chunks waited %s for it in all",
			wr.LimitPerSec, shareText(wr.Share), time.Duration(wr.WaitedMs)*time.Millisecond)
		if startLowered {
			fmt.Fprintf(a.stdout, "; started at %g/s, not the default %d/s: --max-write-rate is below it", wr.StartPerSec*float64(max(wr.Share, 1)), pacing.DefaultInitial)
		}
		if wr.ResourceExhausted+wr.Aborted > 0 {
			fmt.Fprintf(a.stdout, "; the store pushed back %s (RESOURCE_EXHAUSTED %d, ABORTED %d): slowed down to %.0f/s",
				plural.Times(wr.ResourceExhausted+wr.Aborted), wr.ResourceExhausted, wr.Aborted, wr.MinLimitPerSec)
		}
		fmt.Fprintln(a.stdout)
	}
	return nil
}

// shareText says how many writers divide the write budget.
func shareText(n int) string {
	if n <= 1 {
		return "this writer's alone"
	}
	return fmt.Sprintf("this task's share of %d", n)
}

func (a *app) getCommand() *cobra.Command {
	var date, district string
	var compact bool
	cmd := &cobra.Command{
		Use:   "get --date D [--district ID] [--compact]",
		Short: "Read a snapshot back, in the input format",
		Long: `Read a snapshot back as the Snapshot JSON that 'write' takes. --compact prints
it on one line. A snapshot whose write is not complete (its state, as 'list' names
it, partial, writing, interrupted, unknown or deleting) is printed as it is, with
only the districts written, and get then warns on stderr and exits 3; a complete
or unsuccessful one exits 0. Exit 1 when the snapshot, or the --district, is not
stored, or Firestore fails or does not answer.`,
		Example: `  snapwriter get --date 2026-11-20 > back.json
  snapwriter get --date latest
  snapwriter get --date 2026-11-20 --district 42`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if date != "latest" && !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date or \"latest\"", date)
			}
			if cmd.Flags().Changed("district") {
				if err := checkDistrictFlag(district); err != nil {
					return err
				}
			}
			return a.read(cmd, func(ctx context.Context, r *snapshot.Reader) (err error) {
				if date == "latest" {
					if date, err = r.Latest(ctx); err != nil {
						return a.firestoreWait(err)
					}
				}
				if district == "" {
					// Written as it is read, a batch of districts at a time:
					// a snapshot of 20,000 districts never sits in memory.
					out := bufio.NewWriterSize(a.stdout, 256<<10)
					n, asRead, err := r.WriteJSON(ctx, out, date, !compact)
					if ferr := out.Flush(); err == nil {
						err = ferr
					}
					if err != nil {
						return a.firestoreWait(err)
					}
					return a.warnIncomplete(ctx, r, asRead, n)
				}
				v, err := r.District(ctx, date, district)
				if errors.Is(err, snapshot.ErrNoDistrict) {
					return noDistrict(ctx, r, date, district, err)
				}
				if err != nil {
					return a.firestoreWait(err)
				}
				// model.Marshal keeps 1.0 a float, as the input had it.
				b, err := model.Marshal(v)
				if err != nil {
					return err
				}
				var out bytes.Buffer
				if compact {
					out.Write(b)
				} else if err := json.Indent(&out, b, "", "  "); err != nil {
					return err
				}
				out.WriteByte('\n')
				_, err = a.stdout.Write(out.Bytes())
				return err
			})
		},
	}
	cmd.Flags().StringVar(&date, "date", "", `snapshot id (YYYY-MM-DD) or "latest" (newest successful) (required)`)
	// get prints JSON whatever its flags: --json (before #44) meant
	// compact, not JSON rather than text as on every other command.
	cmd.Flags().BoolVar(&compact, "compact", false, "print the JSON on one line, not indented")
	cmd.Flags().Bool("json", false, "deprecated: use --compact")
	deprecateAlias(cmd.Flags(), "json", "compact", "get prints JSON always; --json meant one line")
	cmd.Flags().StringVar(&district, "district", "", "print only this district's statistics (as in payload.districts)")
	registerTimeout(cmd.Flags(), defaultReadTimeout, getTimeoutUsage)
	registerStoreFlags(cmd.Flags())
	_ = cmd.MarkFlagRequired("date")
	return cmd
}

// noDistrict is get --district's error for a snapshot that is stored
// without the district (err, ErrNoDistrict: "snapshot not found" would
// send the user looking for the wrong thing): it says how many districts
// the snapshot has and how to list them, or that the district's write
// failed. Exit 1, as for a snapshot not found.
func noDistrict(ctx context.Context, r *snapshot.Reader, date, district string, err error) error {
	s, serr := r.Summary(ctx, date)
	if serr != nil {
		return notFoundError{msg: fmt.Sprintf("snapshot %s has no district %s", date, district), err: err}
	}
	if slices.Contains(s.FailedDistricts, district) {
		return notFoundError{err: err, msg: fmt.Sprintf("snapshot %s has no district %s: its write failed (the snapshot is %s; `snapwriter repair --input FILE` writes it)",
			date, district, s.State)}
	}
	return notFoundError{err: err, msg: fmt.Sprintf("snapshot %s has no district %s (it has %s: see `snapwriter get --date %s`)",
		date, district, plural.N(s.Districts, "district"), date)}
}
