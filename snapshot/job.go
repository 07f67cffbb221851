package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/admission"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// job is one write or repair of a snapshot, from the lock's acquisition
// to its release. It carries what every stage of the write uses — the
// lease, the input, the document names, the logger, the write's two
// contexts — as a firestore.Transaction carries its context, id and
// writes, so that each stage's method takes only what varies; what a
// stage produces (rooted, chunked, finished) it returns, and the Result is
// assembled from those returns (writeDistricts). A job is used by one
// write only; its chunks, its recorder and its watch of the lock share
// its mutable state, the atomic fields below, and nothing of it is copied.
type job struct {
	w  *Writer
	op operation
	id string // the snapshot's
	// names are the snapshot's documents.
	names layout.Names
	lease *locking.Lease
	// in is what the documents are built from, fixed before the lock is
	// used but for the districts a takeover keeps (complete sets
	// in.kept once, before any chunk starts).
	in rootInput
	// log names the snapshot and the op, and the fence from the root
	// transaction on.
	log *zap.Logger
	// ctx is the caller's context: once it ends no chunk starts. wctx is
	// the work's, which what was started runs under: it ends a grace
	// period after ctx, or at once when the lease is lost (see lock).
	ctx, wctx context.Context
	// lockWait is how long acquiring the lock took.
	lockWait time.Duration
	// adm admits the write's chunks (the maintenance hold, fewer at once
	// while the store, and so the lock's renewals, answers slowly) and
	// takes their writes from the writer's budget (package admission).
	adm *admission.Gate
	// contended is set once a transaction of this write met another's
	// lock, so that it is explained in one WARNING, not one per retry.
	contended atomic.Bool
	// superseded, once true, stops the finish's attempts: the lost lock
	// has passed to a newer writer (see watchSuperseded).
	superseded atomic.Bool
	// rootCommits counts the commits of this write that wrote the root.
	rootCommits atomic.Int32
	// progress passes the districts stored on to the writer's Progress.
	progress *progressFeed
}

// operation is what a job does under the lock.
type operation string

const (
	opWrite  operation = "write"
	opRepair operation = "repair"
)

// newJob is a job of op on snapshot id, its log lines named so, with its
// admission gate (watching the lock once it is taken: see lock).
func (w *Writer) newJob(ctx context.Context, op operation, id string) *job {
	j := &job{w: w, op: op, id: id, names: w.names(id), ctx: ctx, log: w.tel.logger(ctx, w.cfg.log).With(zap.String("snapshotId", id), zap.String("op", string(op)))}
	j.adm = w.newAdmission(j.log)
	return j
}

// run is the common part of Write and Repair: a job of op on snapshot
// id, in the span of its run.
func (w *Writer) run(ctx context.Context, op operation, id string, snap *model.Snapshot) (res *Result, err error) {
	ctx, traced := w.tel.startRun(ctx, op, id)
	defer func() { traced(res, err) }()
	return w.newJob(ctx, op, id).run(snap)
}

// run is the spine of a write or repair, one stage after another: it
// validates snap before any I/O, takes the snapshot's lock (see lock for
// the job's ctx and wctx), runs the publication gate (WithGate), which
// may hold the write, builds the documents, runs the root stage —
// which decides what this run is and commits the root — then the chunks
// and the finish (writeDistricts), and releases the lock.
func (j *job) run(snap *model.Snapshot) (*Result, error) {
	id := j.id
	prep, err := model.PrepareWrite(snap, id)
	if err != nil {
		return nil, err
	}
	start := j.w.cfg.now()
	// Deferred before the lock's release, so run after it: a Progress
	// that is slow with its last count never holds the lock.
	j.progress = startProgress(j.w.cfg.progress)
	defer j.progress.stop()
	unlock, err := j.lock(start)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rep, err := j.gateStage(snap)
	switch {
	case err != nil:
		return nil, withID(id, err)
	case rep != nil && rep.Held:
		return j.held(rep, start), newError(id, ErrHeld, &HeldError{Report: rep})
	}
	stamp := layout.Stamp{WriterFence: j.lease.Fence(), WriterLockKeyHash: locking.HashKey(j.lease.Key())}
	if j.in, err = j.w.buildInput(id, snap, prep, stamp, start); err != nil {
		return nil, err
	}
	j.in.Repairing = j.op == opRepair
	j.in.gate = j.gateRecord(rep)
	j.w.paginate(&j.in)
	res, err := j.underLock()
	if res != nil {
		res.Gate = rep
	}
	j.progress.settle(j.progressDone(res))
	return res, err
}

// underLock is what a job does once it holds the lock and its documents
// are built: the root stage, then, unless that stage found nothing to do
// or failed, the chunks and the finish. It returns the run's Result, nil
// when no root transaction ran.
func (j *job) underLock() (*Result, error) {
	rs, err := j.rootStage()
	if rs.skip != "" {
		return j.skip(rs.skip), nil
	}
	j.log = j.log.With(zap.String("fence", j.in.Fence))
	res, err := j.startResult(rs.root, err)
	if err != nil {
		return res, err
	}
	if rs.kind == takeOverStored {
		res.DistrictsKept = len(rs.kept)
		j.progress.add(len(rs.kept)) // stored already: done, as far as a bar goes
		j.log.Info("writing the districts not stored", zap.Int("districts", len(rs.todo)), zap.Int("districtsKept", len(rs.kept)))
		j.in.Kept = rs.kept
	} else if j.w.cfg.beforeChunks != nil {
		j.w.cfg.beforeChunks(j.wctx)
	}
	return j.writeDistricts(*res, rs)
}

// runKind is what a run is, as the root stage decides it: a write of the
// whole snapshot, or a takeover of the stored one that keeps the
// districts it stored as they are.
type runKind int

const (
	// writeWhole writes every district. A write first tries it resuming:
	// its root transaction turns it into a takeover when it finds an
	// unfinished write of the same input stored.
	writeWhole runKind = iota
	// takeOverStored replaces the stored root by this writer's, keeping
	// the districts stored that match the input (a repair, or a write
	// resuming its own unfinished write).
	takeOverStored
)

// rooted is what the root stage did: its root transaction's result, the
// districts the chunks write, those kept as stored, or why nothing is to
// be done.
type rooted struct {
	kind runKind
	root *BatchResult // nil when no root transaction ran
	// todo selects the districts to write (nil: all of them).
	todo map[string]bool
	// kept are the districts a takeover keeps as stored.
	kept map[string]layout.Kept
	// stale is the listing of the district documents that ran beside a
	// fresh write's root transaction (nil: none), which the chunk stage
	// takes (findStale).
	stale *listing
	// skip, when set, says why nothing was written: the stored snapshot
	// is complete.
	skip string
}

// rootStage decides what this run is and commits its root: a write starts
// as writeWhole (resuming), a repair as takeOverStored. A whole write whose root
// transaction finds an unfinished write of its own input stored becomes a
// takeover that resumes it; a takeover that finds nothing stored, a root
// payload that differs (WithRewriteChanged), or — resuming — other
// districts, becomes a whole write that does not resume. So at most two
// root transactions run, and the second always settles it.
func (j *job) rootStage() (rooted, error) {
	kind, resume, rewrite := writeWhole, true, false
	if j.op == opRepair {
		kind, resume, rewrite = takeOverStored, false, j.w.cfg.rewriteChanged
	}
	for {
		if kind == writeWhole {
			r, stale, err := j.writeRoot(resume)
			switch {
			case errors.Is(err, errResume):
				j.log.Info("the stored snapshot is an unfinished write of this input; keeping the districts it stored")
				kind, resume, rewrite = takeOverStored, true, true
				continue
			case errors.Is(err, errSkip):
				return rooted{skip: "stored snapshot is complete; skipped"}, nil
			}
			return rooted{root: &r, stale: stale}, err
		}
		t, err := j.takeOver(rewrite)
		switch {
		case errors.Is(err, ErrNotFound):
			j.log.Info("nothing is stored under this date; writing the whole snapshot")
		case errors.Is(err, errReplace):
			j.log.Info("the input's root payload differs from the stored one; rewriting the whole snapshot")
		case resume && errors.Is(err, ErrMismatch):
			j.log.Info("the stored snapshot has other districts; rewriting the whole snapshot")
		case errors.Is(err, errSkip):
			return rooted{skip: "snapshot is complete; nothing to repair"}, nil
		default:
			return rooted{kind: takeOverStored, root: t.root, todo: t.todo, kept: t.kept}, err
		}
		kind, resume = writeWhole, false
	}
}

// notify is what a job's retry does before each wait: count the retry,
// and explain contention once. Before the job's first root commit,
// ABORTED on the root or the lock may be another writer's transaction,
// left open when that writer died; from then on it cannot be — this
// job's root commit got past every such transaction — so it is the
// store's contention on documents this write itself writes about once a
// second (the root, and the fence document chunks read), which the store
// answers ABORTED ("Too much contention on these documents") when they
// are written faster than it sustains.
func (j *job) notify(ctx context.Context) func(err error, wait time.Duration) {
	return func(err error, wait time.Duration) {
		j.w.tel.retried(ctx, err, wait)
		if status.Code(err) != codes.Aborted || !j.contended.CompareAndSwap(false, true) {
			return
		}
		if j.rootCommits.Load() > 0 {
			j.log.Warn("Firestore answered ABORTED (contention) on the snapshot's root or fence document, which this write holds and writes about once a second; retrying",
				zap.Duration("contentionWait", j.w.cfg.contention), zap.Error(err))
			return
		}
		j.log.Warn("root locked by another transaction — a writer that stopped mid-chunk? Firestore releases it within 60 s; retrying",
			zap.Duration("contentionWait", j.w.cfg.contention), zap.Error(err))
	}
}

// writeDistricts is the rest of a write or repair after its root stage
// (rs), whose Result so far is base: the chunk stage writes the
// districts rs selects and deletes the stale ones, the finish records
// how they ended in the manifest, and the Result is assembled from what
// the two returned — the finish's, once it recorded it; otherwise the
// chunks' batch results with the outcome that no manifest records.
func (j *job) writeDistricts(base Result, rs rooted) (*Result, error) {
	ch, err := j.chunkStage(len(base.BatchResults), j.in.ops(rs.todo), rs.stale)
	if err != nil {
		base.Outcome = OutcomeNotRecorded
		return &base, err
	}
	res := base
	res.BatchResults = append(slices.Clone(base.BatchResults), ch.results...)
	set := ch.written
	fin, finishErr := j.finish(&res, set)
	fenced := set.fenced
	superseded := errors.Is(finishErr, errSuperseded)
	if superseded {
		// Fenced out in all but the root: see watchSuperseded.
		fenced, finishErr = true, nil
	}
	switch {
	case finishErr == nil && !superseded:
		res, set = fin.res, fin.written // the Outcome as recorded
	case fenced || errors.Is(finishErr, ErrFencedOut):
		res.Outcome = OutcomeFencedOut
	default:
		res.Outcome = OutcomeNotRecorded
	}
	j.summarize(&res, set)
	return &res, j.conclude(&res, finishErr, fenced)
}

// conclude is the error a write or repair that got as far as its chunks
// ends with, given its Result, most telling first, and the log line that
// says so.
func (j *job) conclude(res *Result, finishErr error, fenced bool) error {
	id, log := j.in.ID, j.log
	lost := j.lease.Err()
	res.LockRenewals.Lost = lost != nil && !fenced && !errors.Is(finishErr, ErrFencedOut)
	switch {
	case errors.Is(finishErr, ErrFencedOut):
		log.Warn("fenced out: a newer writer has taken the snapshot over; nothing more was written", zap.Error(finishErr))
		return newError(id, ErrFencedOut, finishErr)
	case fenced:
		log.Warn("fenced out: a newer writer has taken the snapshot over; nothing more was written")
		return newError(id, ErrFencedOut, nil)
	case finishErr != nil:
		cause := fmt.Errorf("%w; the root still says the write is in progress", finishErr)
		if lost != nil {
			cause = fmt.Errorf("%w; the root still says the write is in progress (and %w)", finishErr, fmt.Errorf("%w: %w", ErrLockLost, lost))
		}
		err := newError(id, ErrManifestNotRecorded, cause)
		log.Error("the manifest was not recorded: the root still says the write is in progress; repair or a rerun completes it",
			zap.Error(err), zap.Int("districtsWritten", res.DistrictsWritten), zap.Int("districtsNotConfirmed", len(res.FailedDistricts)))
		return err
	case lost != nil && res.Outcome != OutcomeComplete:
		log.Warn("lost the lock mid-write; the manifest records what was written", zap.Error(lost))
		return newError(id, ErrPartial, fmt.Errorf("%w: %w; the manifest records what was written", ErrLockLost, lost))
	case lost != nil:
		// Every chunk and the finish passed the fence check: what is
		// stored is this writer's complete snapshot.
		log.Warn("lost the lock after every district was written; the snapshot is complete", zap.Error(lost))
	case j.ctx.Err() != nil && res.Outcome != OutcomeComplete:
		return newError(id, ErrPartial,
			fmt.Errorf("stopped before every chunk was written: %w; the manifest records what was written", context.Cause(j.ctx)))
	case res.Outcome != OutcomeComplete:
		return newError(id, ErrPartial, fmt.Errorf("%d of %s failed, %s not written (%s); the manifest records them",
			res.FailedChunks, plural.N(res.Chunks, "chunk"), plural.N(len(res.FailedDistricts), "district"), firstFailure(res)))
	}
	return nil
}
