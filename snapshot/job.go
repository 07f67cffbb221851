package snapshot

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
)

// job is one write or repair of a snapshot, from the lock's acquisition
// to its release. It carries what every step of the write uses — the
// lease, the input, the logger, the write's two contexts and its Result —
// as a firestore.Transaction carries its context, id and writes, so that
// each step's method takes only what varies. A job is used by one write
// only; its chunks, its recorder and its watch of the lock share its
// mutable state, the atomic fields below, and nothing of it is copied.
type job struct {
	w     *Writer
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
	// period after ctx, or at once when the lease is lost (see begin).
	ctx, wctx context.Context
	// res is the write's Result, set from the root transaction on
	// (startResult, skip); nil before.
	res *Result

	// lockWait is how long acquiring the lock took.
	lockWait time.Duration
	// shed admits the write's chunks, fewer at once while the store (and
	// so the lock's renewals) answers slowly; nil admits them all, up to
	// the concurrency.
	shed *shedder
	// contended is set once a transaction of this write met another's
	// lock, so that it is explained in one WARNING, not one per retry.
	contended atomic.Bool
	// superseded, once true, stops the finish's attempts: the lost lock
	// has passed to a newer writer (see watchSuperseded).
	superseded atomic.Bool
	// rootCommits counts the commits of this write that wrote the root.
	rootCommits atomic.Int32
}

// operation is what a job does under the lock.
type operation string

const (
	opWrite  operation = "write"
	opRepair operation = "repair"
)

// run is the common part of Write and Repair: validate snap before any
// I/O, take the snapshot's lock, build the documents, do op under the
// lock (see begin for the job's ctx and wctx) and release the lock after.
func (w *Writer) run(ctx context.Context, op operation, id string, snap *model.Snapshot) (*Result, error) {
	if err := model.Validate(snap, id); err != nil {
		return nil, err
	}
	start := w.cfg.now()
	j := &job{w: w, ctx: ctx, log: w.cfg.log.With(zap.String("snapshotId", id), zap.String("op", string(op)))}
	j.shed = newShedder(w.cfg.concurrency, w.cfg.lockTTL, j.log)
	end, err := j.begin(id)
	if err != nil {
		return nil, err
	}
	defer end()
	j.shed.start(time.Now())
	defer j.shed.stop()
	j.lockWait = w.cfg.now().Sub(start)
	if j.in, err = j.newInput(id, snap, start); err != nil {
		return nil, err
	}
	j.in.repairing = op == opRepair
	w.paginate(&j.in)
	if op == opRepair {
		err = j.repair()
	} else {
		err = j.write()
	}
	return j.res, err
}

// retry is how a job retries: it runs try, one transaction per call,
// under policy p (the writer's retry policy, or the finish's). Contention
// (ABORTED) is retried for the contention wait, and the first time it
// happens in this write one WARNING says why. A commit whose outcome is
// unknown is retried as a fresh transaction: every write is a set or a
// delete, so repeating one that was applied changes nothing. Once the job
// is superseded no attempt starts. unsure reports whether any attempt's
// commit had an unknown outcome.
func (j *job) retry(ctx context.Context, p retry.Policy, try func(context.Context) error) (st retry.Stats, unsure bool, err error) {
	st, err = retry.Do(ctx, p, func(ctx context.Context) error {
		if j.superseded.Load() {
			return retry.Permanent(errSuperseded)
		}
		err := try(ctx)
		unsure = unsure || errors.As(err, new(*unknownOutcome))
		return err
	}, retry.WithNotify(func(err error, wait time.Duration) {
		if status.Code(err) == codes.Aborted && j.contended.CompareAndSwap(false, true) {
			j.log.Warn("root locked by another transaction — a writer that stopped mid-chunk? Firestore releases it within 60 s; retrying",
				zap.Duration("contentionWait", j.w.cfg.contention), zap.Error(err))
		}
	}))
	return st, unsure, err
}
