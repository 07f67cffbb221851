// Package loadtest measures how a Firestore database takes snapshot
// writes: it writes synthetic snapshots (model.Generate) into a scratch
// collection with the real writer — its lock, fence, chunk transactions
// and progress records — at several chunk concurrencies, a few rounds
// each, and reports throughput, chunk commit latency percentiles,
// contention retries and the commits the root document took. The emulator
// has no replication, no index fan-out and no per-document write limit;
// production Firestore has all three, and only a run against the database
// itself shows what they cost.
//
// A run deletes everything it wrote (district documents, manifest pages,
// the fence document, the root), after every round and when it is
// interrupted, and removes what a killed run left before it writes. It
// refuses a collection that holds anything but its own snapshots, which
// it marks with payload.metadata.source = Source. The lock's fence
// counters are lock infrastructure, shared with every writer of the key,
// and are never deleted.
package loadtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Source is payload.metadata.source (and the root's metadata.source) of
// every snapshot loadtest writes: how it recognises its own.
const Source = "snapwriter-loadtest"

// Defaults of a Config.
const (
	DefaultDistricts = 2000
	DefaultRounds    = 3
	// DefaultDate is the snapshot id every round writes: far from any real
	// snapshot's date, so a scratch collection is never mistaken for data.
	DefaultDate = "2000-01-01"
	// DefaultDeleteBatch is the deletes per cleanup transaction.
	DefaultDeleteBatch = 500
	// DefaultCleanupTimeout bounds each cleanup (of a round, of leftovers,
	// after an interruption).
	DefaultCleanupTimeout = 5 * time.Minute
)

// DefaultConcurrency is the concurrencies a run compares by default: the
// writer's default and a high one.
func DefaultConcurrency() []int { return []int{snapshot.DefaultConcurrency, 16} }

// Errors Run ends with, for errors.Is.
var (
	// ErrRefused: the collection holds something loadtest did not write.
	// Nothing was written.
	ErrRefused = ending.ErrRefused
	// ErrBusy: another loadtest holds the collection's run lock and did
	// not finish within the lock wait. Nothing was written.
	ErrBusy = ending.ErrBusy
	// ErrPartialRounds: at least one round did not write every district;
	// the Report says which. Everything was cleaned up.
	ErrPartialRounds = ending.ErrPartialRounds
	// ErrInterrupted: ctx ended (a signal) before every round ran. What
	// was written was cleaned up, unless the error also says otherwise.
	ErrInterrupted = errors.New("interrupted")
	// ErrCleanup: what loadtest wrote could not all be deleted; the next
	// run removes the rest before it writes.
	ErrCleanup = errors.New("cleanup incomplete")
)

// Config is what Run needs. Client, Collection, Locker and NewWriter are
// required; the rest have defaults. Check checks what it asks to run.
type Config struct {
	Client *firestore.Client
	// Collection is the scratch collection: it must hold nothing but
	// loadtest's snapshots (or nothing), and be neither the writers'
	// default collection nor one the Firestore lock backend keeps.
	Collection string
	// Locker holds the run lock, which keeps two runs on one collection
	// from deleting each other's snapshots. Use the snapshot writers' lock
	// backend.
	Locker locking.Backend
	// LockTTL and LockWait are the run lock's TTL and how long Run waits
	// for another run to finish (defaults: the writer's).
	LockTTL, LockWait time.Duration
	// NewWriter returns a writer into Collection with concurrency chunks
	// in flight, and the func, if not nil, that closes what it opened.
	// Run calls it once per concurrency, before the first round, and the
	// close funcs when it returns.
	NewWriter func(concurrency int) (w *snapshot.Writer, close func(), err error)
	// Districts per snapshot (default DefaultDistricts, at most
	// MaxDistricts).
	Districts int
	// Concurrency lists the distinct chunk concurrencies to compare
	// (default DefaultConcurrency()), each measured Rounds times (default
	// DefaultRounds, at most MaxRounds).
	Concurrency []int
	Rounds      int
	// Date is the snapshot id of every round (default DefaultDate).
	Date string
	// DeleteBatch is the deletes per cleanup transaction (default 500);
	// DeleteRetry retries them (default retry.DefaultPolicy, waiting out
	// contention as long as the writer does).
	DeleteBatch int
	DeleteRetry *retry.Policy
	// CleanupTimeout bounds each cleanup (default DefaultCleanupTimeout).
	CleanupTimeout time.Duration
	// CleanupContext, if set, is the context cleanups run under once ctx
	// has ended (a cancelled cleanup leaves the rest to the next run);
	// default context.WithoutCancel(ctx).
	CleanupContext context.Context
	Log            *zap.Logger
	// RoundDone, if set, is called after each round is cleaned up.
	RoundDone func(Round)
}

// Report is what a run measured and cleaned.
type Report struct {
	Collection     string `json:"collection"`
	SnapshotID     string `json:"snapshotId"`
	Districts      int    `json:"districts"`
	RoundsPerLevel int    `json:"roundsPerConcurrency"`
	// Levels aggregates Rounds per concurrency, in the order asked.
	Levels []Level `json:"levels"`
	// Rounds is every round in the order run.
	Rounds []Round `json:"rounds"`
	// LeftoversDeleted counts the documents of earlier, killed runs
	// deleted before the first round; DocumentsDeleted those of this run.
	LeftoversDeleted int `json:"leftoversDeleted"`
	DocumentsDeleted int `json:"documentsDeleted"`
	// Interrupted: ctx ended before every round ran.
	Interrupted bool `json:"interrupted"`
	// Verdict is Assess of the rest: what the write rates say.
	Verdict Verdict `json:"verdict"`
}

func (c *Config) defaults() error {
	switch {
	case c.Client == nil || c.Locker == nil || c.NewWriter == nil:
		return errors.New("loadtest: Client, Locker and NewWriter are required")
	}
	if c.Districts == 0 {
		c.Districts = DefaultDistricts
	}
	if len(c.Concurrency) == 0 {
		c.Concurrency = DefaultConcurrency()
	}
	if c.Rounds == 0 {
		c.Rounds = DefaultRounds
	}
	if c.Date == "" {
		c.Date = DefaultDate
	}
	if c.LockTTL == 0 {
		c.LockTTL = snapshot.DefaultLockTTL
	}
	if c.DeleteBatch == 0 {
		c.DeleteBatch = DefaultDeleteBatch
	}
	if c.DeleteRetry == nil {
		p := retry.DefaultPolicy()
		p.ContentionWait = snapshot.DefaultContentionWait
		c.DeleteRetry = &p
	}
	if c.CleanupTimeout == 0 {
		c.CleanupTimeout = DefaultCleanupTimeout
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	if err := c.Check(); err != nil {
		return err
	}
	// Refused here, not by NewWriter: that runs only after the run lock
	// is taken and the leftovers are deleted.
	for _, n := range c.Concurrency {
		if err := snapshot.CheckOptions(snapshot.WithConcurrency(n)); err != nil {
			return fmt.Errorf("loadtest: concurrency: %w", err)
		}
	}
	if c.DeleteBatch < 1 || c.LockWait < 0 {
		return fmt.Errorf("loadtest: delete batch %d, lock wait %s: want a positive batch and a wait of at least 0", c.DeleteBatch, c.LockWait)
	}
	return c.DeleteRetry.Validate()
}

// step is one round of the plan.
type step struct{ concurrency, round int }

// plan orders the rounds round-robin over the concurrencies (c1 r1, c2 r1,
// c1 r2, …) rather than all of one concurrency first, so that what drifts
// during a run (a warming cache, a growing backlog, a neighbour's load)
// falls on every concurrency alike.
func plan(concurrency []int, rounds int) []step {
	steps := make([]step, 0, len(concurrency)*rounds)
	for r := 1; r <= rounds; r++ {
		for _, c := range concurrency {
			steps = append(steps, step{c, r})
		}
	}
	return steps
}

// Run checks the collection (ErrRefused: nothing written), takes its run
// lock (ErrBusy), deletes what killed runs left, then writes one snapshot
// of cfg.Districts per round, each round under the snapshot's real lock
// and fence, and deletes it before the next; every round writes the same
// snapshot id into the then empty collection, so each is the same fresh
// write, and the run leaves one fence counter, not one per round.
//
// When ctx ends, the round in flight stops as a write does on a signal
// (chunks in flight finish within the grace period, the manifest records
// the rest), its snapshot is deleted and Run returns ErrInterrupted. A
// round that did not write every district is reported and the run goes
// on; Run then returns ErrPartialRounds. Any other write failure stops the
// run (after cleaning up) with the writer's error. The Report is returned
// whenever the run got past the checks.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	log := cfg.Log.With(zap.String("collection", cfg.Collection))
	clean := cleaner{client: cfg.Client, batch: cfg.DeleteBatch, policy: *cfg.DeleteRetry}
	cleanupCtx := cfg.CleanupContext
	if cleanupCtx == nil {
		cleanupCtx = context.WithoutCancel(ctx)
	}
	// A signal before the first round is still an interruption.
	early := func(err error) error {
		if ctx.Err() != nil {
			return fmt.Errorf("loadtest: %w before the first round: %w", ErrInterrupted, err)
		}
		return err
	}
	// Read-only first: a refused collection gets nothing, not even a lock.
	if _, err := scan(ctx, cfg.Client, cfg.Collection, false); err != nil {
		return nil, early(err)
	}
	lease, err := acquire(ctx, cfg)
	if err != nil {
		return nil, early(err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(cleanupCtx, 10*time.Second)
		defer cancel()
		if err := lease.Release(rctx); err != nil && !errors.Is(err, locking.ErrLeaseLost) {
			log.Warn("releasing the loadtest run lock failed; it expires with its TTL", zap.Error(err))
		}
	}()
	// Writes stop if the run lock is lost: another run may be cleaning.
	runCtx, cancel := lease.Context(ctx)
	defer cancel()

	rep := &Report{Collection: cfg.Collection, SnapshotID: cfg.Date, Districts: cfg.Districts, RoundsPerLevel: cfg.Rounds}
	// Under the lock, again: nothing foreign may have arrived since. Under
	// cleanupCtx: leftovers are cleared even if a signal comes meanwhile.
	n, err := sweep(cleanupCtx, cleanupCtx, cfg, clean, false)
	rep.LeftoversDeleted = n
	if err != nil {
		return nil, early(err)
	}
	if n > 0 {
		log.Info("deleted what an earlier loadtest left", zap.Int("documents", n))
	}

	writers := make(map[int]*snapshot.Writer, len(cfg.Concurrency))
	for _, c := range cfg.Concurrency {
		w, closeW, err := cfg.NewWriter(c)
		if closeW != nil {
			defer closeW()
		}
		if err != nil {
			return nil, fmt.Errorf("loadtest: writer at concurrency %d: %w", c, err)
		}
		writers[c] = w
	}
	snap := model.Generate(cfg.Date, cfg.Districts, 1)
	snap.Payload.Metadata.Source = Source
	root := cfg.Client.Collection(cfg.Collection).Doc(cfg.Date)

	var stop error // what ended the run early
	for _, s := range plan(cfg.Concurrency, cfg.Rounds) {
		if runCtx.Err() != nil {
			break
		}
		rlog := log.With(zap.Int("concurrency", s.concurrency), zap.Int("round", s.round))
		rlog.Info("loadtest round starting", zap.Int("districts", cfg.Districts))
		res, werr := writers[s.concurrency].Write(runCtx, cfg.Date, snap)
		r := newRound(s.concurrency, s.round, cfg.Date, res, werr)
		// Clean up whatever the write did, even one that failed early:
		// the root may have been written.
		cctx, ccancel := context.WithTimeout(cleanupCtx, cfg.CleanupTimeout)
		deleted, cerr := clean.deleteSnapshot(cctx, root)
		ccancel()
		rep.DocumentsDeleted += deleted
		rep.Rounds = append(rep.Rounds, r)
		rlog.Info("loadtest round done", zap.Bool("complete", r.Complete), zap.Int("districtsWritten", r.DistrictsWritten),
			zap.Int64("durationMs", r.DurationMs), zap.Int64("chunkP99Ms", r.ChunkLatencyMs.P99),
			zap.Int("abortedRetries", r.AbortedRetries), zap.Int("rootCommits", r.RootCommits), zap.Int("documentsDeleted", deleted))
		if cfg.RoundDone != nil {
			cfg.RoundDone(r)
		}
		if cerr != nil {
			stop = fmt.Errorf("loadtest: %w: %w", ErrCleanup, cerr)
			break
		}
		// A write cut short by ctx is the interruption, not a failure.
		if werr != nil && !errors.Is(werr, snapshot.ErrPartial) && runCtx.Err() == nil {
			stop = fmt.Errorf("loadtest: round %d at concurrency %d: %w", s.round, s.concurrency, werr)
			break
		}
	}
	rep.Levels = levels(cfg.Concurrency, rep.Rounds)
	rep.Verdict = Assess(rep)
	// A signal after the last round completed cost nothing: not an
	// interruption.
	total := len(cfg.Concurrency) * cfg.Rounds
	rep.Interrupted = runCtx.Err() != nil && (len(rep.Rounds) < total || !rep.Rounds[total-1].Complete)
	if stop == nil {
		// Belt and braces: nothing of this run may stay behind, whatever
		// a round's cleanup missed. A document someone else put into the
		// collection meanwhile is left alone.
		cctx, ccancel := context.WithTimeout(cleanupCtx, cfg.CleanupTimeout)
		n, err := sweep(cctx, cctx, cfg, clean, true)
		ccancel()
		rep.DocumentsDeleted += n
		if err != nil {
			stop = fmt.Errorf("loadtest: %w: %w", ErrCleanup, err)
		}
	}
	switch {
	case stop != nil:
		return rep, stop
	case rep.Interrupted:
		cause := context.Cause(ctx)
		if ctx.Err() == nil {
			cause = lease.Err() // the run lock was lost
		}
		return rep, fmt.Errorf("loadtest: %w after %d of %s: %w", ErrInterrupted, len(rep.Rounds), plural.N(total, "round"), cause)
	}
	for _, l := range rep.Levels {
		if l.PartialRounds > 0 {
			return rep, fmt.Errorf("loadtest: %w: %d at concurrency %d", ErrPartialRounds, l.PartialRounds, l.Concurrency)
		}
	}
	return rep, nil
}

// acquire takes the collection's run lock.
func acquire(ctx context.Context, cfg Config) (*locking.Lease, error) {
	key, err := RunLockKey(cfg.Client, cfg.Collection, cfg.Locker.Capabilities().Backend)
	if err != nil {
		return nil, err
	}
	// Bounded by the wait, not a count, as the writer's; no wait: one attempt.
	p := locking.DefaultRetryPolicy().Within(cfg.LockWait)
	lease, err := locking.Acquire(ctx, cfg.Locker, key, locking.WithTTL(cfg.LockTTL), locking.WithRetry(p))
	if errors.Is(err, locking.ErrAcquisitionTimeout) {
		return nil, fmt.Errorf("loadtest: %w (waited %s): %w", ErrBusy, cfg.LockWait, err)
	}
	if err != nil {
		return nil, fmt.Errorf("loadtest: taking the run lock: %w", err)
	}
	cfg.Log.Info("loadtest run lock acquired", zap.String("keyHash", locking.HashKey(key)))
	return lease, nil
}

// RunLockKey is the key of the run lock of collection, in the Firestore
// project and database of client, on the lock backend named backend:
// "snapwriter-loadtest:" and the HashKey of the collection's snapshot lock
// scope. Hashed, it is a valid key and document id whatever the
// collection's name, and never the key of a snapshot's lock.
func RunLockKey(client *firestore.Client, collection, backend string) (string, error) {
	scope, err := snapshot.ScopeOf(client, collection)
	if err != nil {
		return "", fmt.Errorf("loadtest: %w", err)
	}
	// Any snapshot id does: the key is hashed, and only names the scope.
	k, err := scope.LockKey(backend, "loadtest")
	if err != nil {
		return "", fmt.Errorf("loadtest: %w", err)
	}
	return "snapwriter-loadtest:" + locking.HashKey(k), nil
}

// sweep deletes every loadtest snapshot in the collection, after checking
// (under ctx) that it holds nothing else unless skipForeign (see scan);
// deletes run under cleanupCtx, each root's bounded by the cleanup
// timeout. It returns the documents deleted.
func sweep(ctx, cleanupCtx context.Context, cfg Config, clean cleaner, skipForeign bool) (int, error) {
	roots, err := scan(ctx, cfg.Client, cfg.Collection, skipForeign)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, root := range roots {
		cctx, cancel := context.WithTimeout(cleanupCtx, cfg.CleanupTimeout)
		n, err := clean.deleteSnapshot(cctx, root)
		cancel()
		total += n
		if err != nil {
			return total, fmt.Errorf("loadtest: %w: %w", ErrCleanup, err)
		}
	}
	return total, nil
}
