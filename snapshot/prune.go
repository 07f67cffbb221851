package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
)

// A prune deletes a whole snapshot as a write stores one: under the
// snapshot's lock, its chunks fenced. It first marks the root (one
// transaction that checks the stored fence as a write's root transaction
// does, and writes the fence document with its own fence, so that chunks
// of an older writer still in flight conflict and are refused): status
// "failed", writeComplete false, writeState "deleting", every manifest
// entry failed and no district listed as successful. From that commit on,
// the application's readers skip the snapshot (their newest successful is
// another) and, reading it by id, find no district the root says is
// stored; snapwriter's Latest skips it and List says StateDeleting. Then
// the documents below the root are deleted in chunks (districts, then
// manifest pages, then anything else but the fence document), each a
// transaction that checks the fence document still carries the prune's
// fence, retried as a write's chunks are; last, one transaction that checks
// the fence again deletes the fence document and the root. A writer that
// takes the date over (after the prune's lease was lost, or it was killed)
// writes the fence document in its root transaction: every later chunk of
// the prune is refused (ErrFencedOut), and the writer's snapshot is whole.
// A prune stopped midway leaves a root that says "deleting"; a rerun
// finishes it.

// opPrune names a prune in the logs.
const opPrune operation = "prune"

// deletingMessage is the errorMessage of every manifest entry of a root a
// prune has marked.
const deletingMessage = "snapshot being deleted"

// PruneResult is what Prune did to one snapshot.
type PruneResult struct {
	SnapshotID string `json:"snapshotId"`
	// Fence is the prune's lock fence, which the root carried from its mark
	// on.
	Fence string `json:"fence,omitempty"`
	// Found is false when there was no root to delete (already gone).
	Found bool `json:"found"`
	// Marked is true once the root was marked "deleting".
	Marked bool `json:"marked"`
	// DistrictsDeleted, PagesDeleted and OtherDeleted count the documents
	// below the root whose deletes committed (documents already gone
	// count too); RootDeleted says the fence document and the root went.
	DistrictsDeleted int  `json:"districtsDeleted"`
	PagesDeleted     int  `json:"pagesDeleted"`
	OtherDeleted     int  `json:"otherDeleted"`
	RootDeleted      bool `json:"rootDeleted"`
	// Chunks is how many delete transactions ran, RetryAttempts their
	// retries.
	Chunks        int   `json:"chunks"`
	RetryAttempts int   `json:"retryAttempts"`
	LockWaitMs    int64 `json:"lockWaitMs"`
	DurationMs    int64 `json:"durationMs"`
}

// Prune deletes snapshot id whole: under its lock, the root marked first
// (readers skip it from then on), then the documents below it in fenced
// chunks, then the fence document and the root. It never deletes the
// newest complete snapshot: the mark's transaction checks that a newer
// complete one exists when id is complete, else ErrNewestComplete. A root
// already marked "deleting" (a prune stopped midway) is finished. No root
// is no error (Result.Found false).
//
// It fails as a write does: ErrLockHeld (a writer at work: nothing done),
// ErrFencedOut (a newer writer took the date over: its documents are
// intact, and the prune deleted nothing of them), ErrLockBackendSwitch and
// ErrLockKeySwitch (the stored snapshot's fence is not comparable with
// ours: nothing done), ErrTimeout; any other error leaves the root marked
// "deleting" if it was, and a rerun finishes it.
func (w *Writer) Prune(ctx context.Context, id string) (*PruneResult, error) {
	return w.prune(ctx, id, nil)
}

// prune is Prune; afterMark, when not nil, is called once the root is
// marked, and a non-nil error from it ends the prune there (tests stop a
// prune midway with it).
func (w *Writer) prune(ctx context.Context, id string, afterMark func(context.Context) error) (*PruneResult, error) {
	if !model.ValidDate(id) {
		return nil, fmt.Errorf("snapshot %q: %w: want a real YYYY-MM-DD date", id, model.ErrInvalid)
	}
	start := w.cfg.now()
	j := w.newJob(ctx, opPrune, id)
	unlock, err := j.lock(start)
	if err != nil {
		return nil, err
	}
	defer unlock()
	j.in = rootInput{id: id, fence: j.lease.Fence(), backend: w.lockName, keyHash: locking.HashKey(j.lease.Key()), startedAt: start}
	j.log = j.log.With(zap.String("fence", j.in.fence))
	res := &PruneResult{SnapshotID: id, Fence: j.in.fence, LockWaitMs: j.lockWait.Milliseconds()}
	err = j.pruneSteps(res, afterMark)
	res.DurationMs = w.cfg.now().Sub(start).Milliseconds()
	if err != nil {
		return res, j.pruneErr(err)
	}
	j.log.Info("snapshot pruned", zap.Bool("found", res.Found), zap.Int("districtsDeleted", res.DistrictsDeleted),
		zap.Int("pagesDeleted", res.PagesDeleted), zap.Int("chunks", res.Chunks), zap.Int64("durationMs", res.DurationMs))
	return res, nil
}

// pruneSteps marks the root, deletes what is below it, then the fence
// document and the root, filling res as it goes.
func (j *job) pruneSteps(res *PruneResult, afterMark func(context.Context) error) error {
	found, err := j.markDeleting()
	if err != nil || !found {
		return err
	}
	res.Found, res.Marked = true, true
	j.log.Info("root marked deleting; readers skip the snapshot from now on")
	if afterMark != nil {
		if err := afterMark(j.wctx); err != nil {
			return err
		}
	}
	groups, err := j.listBelow()
	if err != nil {
		return err
	}
	counts := []*int{&res.DistrictsDeleted, &res.PagesDeleted, &res.OtherDeleted}
	for i, names := range groups {
		n, err := j.deleteChunks(names, res)
		*counts[i] += n
		if err != nil {
			return err
		}
	}
	if err := j.deleteRoot(); err != nil {
		return err
	}
	res.RootDeleted = true
	return nil
}

// pruneErr is the error a prune ends with, as Prune documents it.
func (j *job) pruneErr(err error) error {
	id := j.in.id
	switch {
	case errors.Is(err, ErrFencedOut):
		j.log.Warn("fenced out: a newer writer has taken the snapshot over; the prune deleted nothing of its documents", zap.Error(err))
		return newError(id, ErrFencedOut, err)
	case errors.Is(err, ErrNewestComplete):
		j.log.Info("kept: it is the newest complete snapshot")
		return fmt.Errorf("snapshot %s: %w", id, err)
	case refusedByPrior(err):
		return withID(id, err)
	}
	j.log.Error("prune stopped; a root marked deleting stays so, and a rerun finishes it", zap.Error(err))
	return withID(id, j.leaseErr(err))
}

// markDeleting marks the root as being deleted, in a transaction that
// refuses a root of a newer writer (checkPrior) and the newest complete
// snapshot, and that writes the fence document with the prune's fence.
// found is false when there is no root.
func (j *job) markDeleting() (found bool, err error) {
	ref := j.w.root(j.in.id)
	_, _, err = j.retryTxn(j.wctx, j.w.cfg.retry, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			found = false
			return nil
		}
		if err != nil {
			return err
		}
		found = true
		data := snap.Data()
		root := decodeRoot(data)
		if err := j.checkPrior(ctx, root.meta()); err != nil {
			return retry.Permanent(err)
		}
		if root.complete() {
			newer, err := j.w.newerComplete(tx, j.in.id)
			if err != nil {
				return err
			}
			if !newer {
				return retry.Permanent(ErrNewestComplete)
			}
		}
		if err := tx.Update(ref, j.in.deletingMark(root, data)); err != nil {
			return retry.Permanent(err)
		}
		return j.setFence(tx, j.w.cfg.now())
	})
	return found, err
}

// newerComplete reports, in tx, whether a complete snapshot newer than id
// is stored (one whose id is a date, as package retention counts them):
// then id is not the newest complete one. The read holds the
// roots it returns, so a prune of that newer one cannot mark it before
// this transaction commits.
func (w *Writer) newerComplete(tx *firestore.Transaction, id string) (bool, error) {
	q := w.client.Collection(w.cfg.collection).
		Where(fieldPath(fieldMetadata, fieldStatus), "==", statusSuccess).
		Select(latestFields...).
		OrderBy(firestore.DocumentID, firestore.Asc).StartAfter(id)
	it := tx.Documents(q)
	defer it.Stop()
	for {
		doc, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("finding a newer complete snapshot: %w", err)
		}
		if model.ValidDate(doc.Ref.ID) && readRoot(doc).complete() {
			return true, nil
		}
	}
}

// deletingMark is the update that marks stored root (data, its fields as
// stored) as being deleted by this prune: the application's status
// "failed", writeComplete false, no district successful (every one failed,
// every manifest entry failed), writeState "deleting", and this prune's
// stamp. The manifest's inline entries are rewritten from data, as they
// are stored but for their status and errorMessage: read into
// manifestEntry, an entry of the application's, which has no contentHash,
// would gain one, and the root bytes it does not need. Pages are not
// rewritten (only snapwriter reads them, and it reads none of a root
// marked deleting).
func (in rootInput) deletingMark(root *rootDocument, data map[string]any) []firestore.Update {
	md, mf := root.meta(), root.Manifest
	failed := markedFailed(md.FailedDistricts, md.SuccessfulDistricts)
	st := in.stamp()
	meta := func(field string) firestore.FieldPath { return firestore.FieldPath{fieldMetadata, field} }
	man := func(field string) firestore.FieldPath { return firestore.FieldPath{fieldManifest, field} }
	ups := []firestore.Update{
		{FieldPath: meta(fieldStatus), Value: statusFailed},
		{FieldPath: meta(fieldWriteState), Value: stateDeleting},
		{FieldPath: meta(fieldWriteComplete), Value: false},
		{FieldPath: meta(fieldSuccessfulDistricts), Value: []string{}},
		{FieldPath: meta(fieldFailedDistricts), Value: failed},
		{FieldPath: meta(fieldWriterFence), Value: st.WriterFence},
		{FieldPath: meta(fieldWriterLockBackend), Value: st.WriterLockBackend},
		{FieldPath: meta(fieldWriterLockKeyHash), Value: st.WriterLockKeyHash},
	}
	if mf.TotalDistricts != nil {
		ups = append(ups, firestore.Update{FieldPath: man(fieldSuccessfulDistricts), Value: 0},
			firestore.Update{FieldPath: man(fieldFailedDistricts), Value: *mf.TotalDistricts})
	}
	stored, _ := data[fieldManifest].(map[string]any)
	// Present (an inline manifest's; a paged root has none), even empty.
	if entries, ok := stored[fieldDistricts].([]any); ok {
		marked := make([]any, len(entries))
		for i, e := range entries {
			m, _ := e.(map[string]any)
			m = maps.Clone(m)
			if m == nil {
				m = map[string]any{}
			}
			m[fieldStatus], m[fieldErrorMessage] = entryFailed, deletingMessage
			marked[i] = m
		}
		ups = append(ups, firestore.Update{FieldPath: man(fieldDistricts), Value: marked})
	}
	return ups
}

// markedFailed is the failed list of a root marked deleting: its failed
// districts as stored, then those of its successful ones not among them.
// Elements that were not strings (read as "") are left out, and the list
// is never nil: the lists are never null. A map, not a search of the list
// per district: a root lists up to 20,000 districts, and the mark's
// transaction may be retried.
func markedFailed(failed, successful []string) []string {
	out := make([]string, 0, len(failed)+len(successful))
	seen := make(map[string]bool, cap(out))
	for _, id := range failed {
		if id != "" {
			out = append(out, id)
			seen[id] = true
		}
	}
	for _, id := range successful {
		if id != "" && !seen[id] {
			out = append(out, id)
			seen[id] = true
		}
	}
	return out
}
