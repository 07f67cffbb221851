package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/retry"
)

// resumable reports whether stored root of in's snapshot is an
// unfinished write (in progress when its writer died, or partial) of the
// same input, by the same lock backend and key: then Write need not write
// again what it stored.
func resumable(root *rootDocument, in rootInput) bool {
	md := root.meta()
	// A root a prune is deleting is not resumed: its districts are going.
	return md.currentForm() && !md.writtenWhole() && md.WriteState != stateDeleting && md.PayloadHash == in.payloadHash &&
		md.WriterLockBackend == in.backend && md.WriterLockKeyHash == in.keyHash
}

// errResume ends a root transaction that found an unfinished write of the
// same input stored (resumable): the write completes it instead.
var errResume = errors.New("the stored snapshot is an unfinished write of this input")

// skip makes the Result of a write or repair that found the snapshot
// complete and wrote nothing.
func (j *job) skip(msg string) {
	j.log.Info(msg)
	j.res = &Result{SnapshotID: j.in.id, Outcome: OutcomeSkipped, FailedDistricts: []string{},
		TotalDurationMs: j.w.cfg.now().Sub(j.in.startedAt).Milliseconds(), LockWaitMs: j.lockWait.Milliseconds()}
}

// startResult starts the Result of a write or repair from its root
// transaction (nil when it never ran) and that transaction's error.
func (j *job) startResult(rootRes *BatchResult, err error) error {
	j.res = &Result{SnapshotID: j.in.id, Fence: j.in.fence, FailedDistricts: []string{}}
	if rootRes != nil {
		j.res.BatchResults = append(j.res.BatchResults, *rootRes)
		logBatch(j.log, *rootRes)
	}
	if err != nil {
		j.res.Outcome = OutcomeNotWritten
		if errors.Is(err, ErrFencedOut) {
			j.res.Outcome = OutcomeFencedOut
		}
		if rootRes != nil {
			j.summarize()
		}
		if lost := j.lease.Err(); lost != nil && errors.Is(err, ErrRootFailed) && errors.Is(err, locking.ErrLeaseLost) {
			return j.lostBeforeRoot(rootRes != nil && rootRes.unsure, lost)
		}
		return j.leaseErr(err)
	}
	return nil
}

// lostBeforeRoot is the error of a write or repair whose lease was lost
// before its root transaction committed, which the loss stopped: no
// district was attempted, and the stored snapshot is as it was — unless
// the root's commit was in flight (unsure), when it may have been written
// as a write in progress with no district yet, which a rerun completes.
// Either way it is not a failure of the root (ErrRootFailed): it matches
// ErrLockLost, and ErrNothingWritten when nothing was.
func (j *job) lostBeforeRoot(unsure bool, lost error) error {
	if unsure {
		j.log.Warn("lost the lock while the root document's commit was in flight; it may have been written, with no district; rerun the write", zap.Error(lost))
		return &Error{Kind: LockLost, ID: j.in.id, Err: fmt.Errorf("%w while the root document's commit was in flight: it may have been written, as a write in progress with no district written yet — rerun the write, which completes it (%w)",
			ErrLockLost, lost)}
	}
	j.log.Warn("lost the lock before the root document was written; nothing was written; rerun the write", zap.Error(lost))
	return &Error{Kind: LockLost, ID: j.in.id, Err: fmt.Errorf("%w before the root document was written: %w — the stored snapshot is as it was; rerun the write (%w)",
		ErrLockLost, ErrNothingWritten, lost)}
}

// writeRoot commits the root document in a transaction that refuses to
// replace a root written under a newer fence.
func (j *job) writeRoot(resume bool) (BatchResult, error) {
	in := &j.in
	r := BatchResult{BatchIndex: 0, OperationCount: 1, DistrictIDs: []string{}}
	doc, pages, err := in.rootDoc()
	if err != nil {
		return r, err
	}
	ref := j.w.root(in.id)
	t0 := time.Now()
	sctx, span := j.w.tel.start(j.wctx, SpanRoot)
	st, unsure, err := j.retry(sctx, j.w.cfg.retry, j.w.inTxn(func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if snap.Exists() {
			root := readRoot(snap)
			if j.w.cfg.skipComplete && root.complete() {
				return retry.Permanent(errSkip)
			}
			if err := j.checkPrior(ctx, root.meta()); err != nil {
				return retry.Permanent(err)
			}
			if resume && resumable(root, *in) {
				return retry.Permanent(errResume)
			}
		}
		stored, err := j.w.storedPageIDs(tx, in.id)
		if err != nil {
			return err
		}
		return j.setRoot(tx, doc, pages, stored)
	}))
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	endStep(span, st, err)
	if err != nil {
		r.Err, r.unsure = err, unsure
		if errors.Is(err, errSkip) || errors.Is(err, errResume) {
			return r, err
		}
		if refusedByPrior(err) {
			return r, withID(in.id, err)
		}
		return r, &Error{Kind: RootFailed, ID: in.id, Err: err}
	}
	r.Success = true
	j.rootCommits.Add(1)
	return r, nil
}

// errSkip ends a write that WithSkipComplete found nothing to do for.
var errSkip = errors.New("stored snapshot is complete")
