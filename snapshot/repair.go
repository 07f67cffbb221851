package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"cloud.google.com/go/firestore"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
)

// ErrMismatch: the input given to Repair is not the snapshot that was
// written (other snapshot id or other districts). Nothing was written.
var ErrMismatch = errors.New("input does not match the stored snapshot")

// Repair completes a partial write of snapshot id: under the snapshot's
// lock it takes the root over with its own fence, re-writes exactly the
// districts the manifest does not record as written (failed, or still
// pending after a write that died), deletes district documents the snapshot
// does not have, and records the outcome like Write does. snap must be the
// snapshot that was written; its districts are the source of the re-write.
//
// A complete snapshot is left alone: the Result has Skipped set and the
// error is nil. A snapshot that does not exist is written whole, as Write
// does (a writer that died before its root leaves nothing to repair but
// the snapshot still to be written). An input that does not match the
// stored manifest is ErrMismatch. Errors are those of Write.
func (w *Writer) Repair(ctx context.Context, id string, snap *model.Snapshot) (*Result, error) {
	if err := model.Validate(snap, id); err != nil {
		return nil, err
	}
	start := w.cfg.now()
	log := w.cfg.log.With(zap.String("snapshotId", id), zap.String("op", "repair"))

	lease, wctx, end, err := w.begin(ctx, id, log)
	if err != nil {
		return nil, err
	}
	defer end()

	in := w.newInput(id, snap, lease, start)
	todo, rootRes, err := w.takeOver(wctx, in, log)
	if errors.Is(err, ErrNotFound) {
		log.Info("nothing is stored under this date; writing the whole snapshot")
		return w.write(ctx, wctx, lease, in, log)
	}
	res := &Result{SnapshotID: id, Fence: in.fence, FailedDistricts: []string{}}
	log = log.With(zap.String("fence", in.fence))
	if errors.Is(err, errSkip) {
		log.Info("snapshot is complete; nothing to repair")
		res.Skipped, res.Complete, res.ManifestRecorded, res.Fence = true, true, true, ""
		res.TotalDurationMs = w.cfg.now().Sub(start).Milliseconds()
		return res, nil
	}
	if rootRes != nil {
		res.BatchResults = append(res.BatchResults, *rootRes)
		logBatch(log, *rootRes)
	}
	if err != nil {
		if rootRes != nil {
			w.summarize(log, res, start)
		}
		return res, w.leaseErr(lease, err)
	}
	log.Info("repairing districts", zap.Int("districts", len(todo)))

	ops := make([]op, 0, len(todo))
	for _, d := range snap.Payload.Districts {
		doc := districtDoc(snap, d, in.fence)
		in.docSizes[d.DistrictID] = model.FirestoreSize(doc)
		if todo[d.DistrictID] {
			ops = append(ops, op{districtID: d.DistrictID, doc: doc, bytes: encodedSize(doc)})
		}
	}
	out, err := w.writeDistricts(ctx, wctx, in, ops, res, log)
	if err != nil {
		return res, err
	}
	finishErr := w.finishing(ctx, log, func(ctx context.Context) error { return w.finishRepair(ctx, in, res, out, log) })
	w.summarize(log, res, start)
	return res, w.ending(ctx, id, res, lease, finishErr, out.fenced, log)
}

// takeOver reads the stored root in a transaction, works out which
// districts need writing, and moves the root to this writer's fence with
// status "writing", so that chunks of an older writer still in flight are
// refused from now on. It returns errSkip for a complete snapshot.
func (w *Writer) takeOver(ctx context.Context, in rootInput, log *zap.Logger) (map[string]bool, *BatchResult, error) {
	ref := w.root(in.id)
	var todo map[string]bool
	r := BatchResult{BatchIndex: 0, OperationCount: 1, DistrictIDs: []string{}}
	t0 := time.Now()
	st, _, err := w.do(ctx, in, log, func(ctx context.Context, tx *firestore.Transaction) error {
		doc, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			return retry.Permanent(fmt.Errorf("snapshot %s: %w", in.id, ErrNotFound))
		}
		if err != nil {
			return err
		}
		data := doc.Data()
		if err := w.checkPrior(data, in); err != nil {
			return retry.Permanent(err)
		}
		todo, err = repairSet(data, in.snap)
		if err != nil {
			return retry.Permanent(err)
		}
		if len(todo) == 0 && isComplete(data) {
			return retry.Permanent(errSkip)
		}
		return tx.Update(ref, []firestore.Update{
			{Path: "metadata.writerFence", Value: in.fence},
			{Path: "metadata.writerLockBackend", Value: in.backend},
			{Path: "metadata.status", Value: statusWriting},
			{Path: "metadata.writeComplete", Value: false},
			{Path: "metadata.repairStartedAt", Value: in.startedAt.UTC().Format(time.RFC3339Nano)},
		})
	})
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	switch {
	case errors.Is(err, errSkip):
		return nil, nil, err
	case errors.Is(err, ErrNotFound), errors.Is(err, ErrMismatch):
		return nil, nil, err
	case err != nil:
		r.Error = err.Error()
		if errors.Is(err, ErrFencedOut) || errors.Is(err, ErrLockBackendSwitch) {
			return nil, &r, fmt.Errorf("snapshot %s: %w", in.id, err)
		}
		return nil, &r, fmt.Errorf("snapshot %s: %w: %w", in.id, ErrRootFailed, err)
	}
	r.Success = true
	return todo, &r, nil
}

// repairSet checks that snap is the snapshot the stored root describes and
// returns the districts its manifest does not record as written.
func repairSet(root map[string]any, snap *model.Snapshot) (map[string]bool, error) {
	md := asMap(root["metadata"])
	if stored, _ := md["snapshotId"].(string); stored != snap.SnapshotID {
		return nil, fmt.Errorf("%w: stored snapshot_id %q, input %q", ErrMismatch, stored, snap.SnapshotID)
	}
	entries, _ := asMap(root["manifest"])["districts"].([]any)
	stored := make([]string, 0, len(entries))
	todo := map[string]bool{}
	for _, e := range entries {
		em := asMap(e)
		id, _ := em["districtId"].(string)
		stored = append(stored, id)
		if st, _ := em["status"].(string); st != entrySuccess {
			todo[id] = true
		}
	}
	given := districtIDs(snap)
	slices.Sort(stored)
	slices.Sort(given)
	if !slices.Equal(stored, given) {
		return nil, fmt.Errorf("%w: the manifest lists %d districts, the input has %d, and the sets differ; write the snapshot instead",
			ErrMismatch, len(stored), len(given))
	}
	return todo, nil
}

// finishRepair records the repair's outcome: the manifest entries of the
// re-written districts (chunks whose outcome is unknown decided as finish
// does), the counts, and the snapshot's status.
func (w *Writer) finishRepair(ctx context.Context, in rootInput, res *Result, out districtOutcome, log *zap.Logger) error {
	ref := w.root(in.id)
	var done Result
	_, _, err := w.do(ctx, in, log, func(ctx context.Context, tx *firestore.Transaction) error {
		doc, err := tx.Get(ref)
		if status.Code(err) == codes.NotFound {
			return retry.Permanent(fmt.Errorf("%w: root document is gone", ErrFencedOut))
		}
		if err != nil {
			return err
		}
		data := doc.Data()
		md := asMap(data["metadata"])
		if f, _ := md["writerFence"].(string); f != in.fence {
			return retry.Permanent(fmt.Errorf("%w: root carries writerFence %s, ours is %s", ErrFencedOut, f, in.fence))
		}
		r, out, err := w.resolve(tx, in, res, out)
		if err != nil {
			return err
		}
		now := w.cfg.now().UTC().Format(time.RFC3339Nano)
		mf := asMap(data["manifest"])
		entries, _ := mf["districts"].([]any)
		var ok, bad int64
		failed := []string{}
		for _, e := range entries {
			em := asMap(e)
			id, _ := em["districtId"].(string)
			if st, done := out.status[id]; done {
				em["status"] = st
				em["lastModified"] = now
				em["fileSize"] = int64(in.docSizes[id])
				delete(em, "errorMessage")
				if st == entryFailed && out.msgs[id] != "" {
					em["errorMessage"] = out.msgs[id]
				}
			}
			switch em["status"] {
			case entrySuccess:
				ok++
			default:
				bad++
				failed = append(failed, id)
			}
		}
		complete := bad == 0 && r.FailedBatches == 0
		st := in.snap.Status
		if !complete {
			st = "partial"
		}
		done = r
		return tx.Update(ref, []firestore.Update{
			{Path: "manifest.districts", Value: entries},
			{Path: "manifest.successfulDistricts", Value: ok},
			{Path: "manifest.failedDistricts", Value: bad},
			{Path: "metadata.status", Value: st},
			{Path: "metadata.writeComplete", Value: complete},
			{Path: "metadata.writeFailedDistricts", Value: strs(failed)},
			{Path: "metadata.writeFinishedAt", Value: now},
			{Path: "metadata.repairedAt", Value: now},
		})
	})
	if err != nil {
		return err
	}
	*res = done
	res.ManifestRecorded = true
	return nil
}
