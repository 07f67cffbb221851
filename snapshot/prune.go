package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
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
	j.in = rootInput{Input: layout.Input{ID: id, Fence: j.lease.Fence(), Backend: w.lockName, KeyHash: locking.HashKey(j.lease.Key()), StartedAt: start}}
	j.log = j.log.With(zap.String("fence", j.in.Fence))
	res := &PruneResult{SnapshotID: id, Fence: j.in.Fence, LockWaitMs: j.lockWait.Milliseconds()}
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
	id := j.in.ID
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
	rootName := j.names.Root.Path
	_, err = j.transact(j.wctx, j.w.cfg.retry, txn{explicitBegin: true, reads: []string{rootName},
		body: func(ctx context.Context, a *attempt) error {
			doc := a.doc(rootName)
			if found = doc != nil; !found {
				return nil
			}
			data := layout.FieldsOf(doc)
			root := layout.DecodeRoot(data)
			if err := j.checkPrior(ctx, root.Meta()); err != nil {
				return retry.Permanent(err)
			}
			if root.Complete() {
				newer, err := j.w.newerComplete(ctx, a, j.names.Root)
				if err != nil {
					return err
				}
				if !newer {
					return retry.Permanent(ErrNewestComplete)
				}
			}
			mark, err := j.in.deletingMark(rootName, root, doc)
			if err != nil {
				return retry.Permanent(err)
			}
			a.write(mark)
			return a.set(j.names.Fence.Path, j.in.FenceDoc(j.w.cfg.now()))
		}})
	return found, err
}

// newerComplete reports, in transaction a, whether a complete snapshot
// newer than root is stored (one whose id is a date, as package retention
// counts them): then root is not the newest complete one. The read holds
// the roots it returns, so a prune of that newer one cannot mark it
// before this transaction commits.
func (w *Writer) newerComplete(ctx context.Context, a *attempt, root *firestore.DocumentRef) (bool, error) {
	coll := root.Parent
	parent := databaseOf(root.Path) + "/documents"
	if coll.Parent != nil {
		parent = coll.Parent.Path
	}
	fields := make([]*pb.StructuredQuery_FieldReference, len(latestFields))
	for i, f := range latestFields {
		fields[i] = &pb.StructuredQuery_FieldReference{FieldPath: f}
	}
	docs, err := a.query(ctx, parent, &pb.StructuredQuery{
		Select: &pb.StructuredQuery_Projection{Fields: fields},
		From:   []*pb.StructuredQuery_CollectionSelector{{CollectionId: coll.ID}},
		Where: &pb.StructuredQuery_Filter{FilterType: &pb.StructuredQuery_Filter_FieldFilter{FieldFilter: &pb.StructuredQuery_FieldFilter{
			Field: &pb.StructuredQuery_FieldReference{FieldPath: layout.FieldPath(layout.FieldMetadata, layout.FieldStatus)},
			Op:    pb.StructuredQuery_FieldFilter_EQUAL,
			Value: &pb.Value{ValueType: &pb.Value_StringValue{StringValue: layout.StatusSuccess}},
		}}},
		OrderBy: []*pb.StructuredQuery_Order{{Field: &pb.StructuredQuery_FieldReference{FieldPath: "__name__"}, Direction: pb.StructuredQuery_ASCENDING}},
		StartAt: &pb.Cursor{Values: []*pb.Value{{ValueType: &pb.Value_ReferenceValue{ReferenceValue: root.Path}}}},
	})
	if err != nil {
		return false, fmt.Errorf("finding a newer complete snapshot: %w", err)
	}
	for _, doc := range docs {
		if model.ValidDate(layout.BaseName(doc.GetName())) && layout.DecodeRoot(layout.FieldsOf(doc)).Complete() {
			return true, nil
		}
	}
	return false, nil
}

// deletingMark is the update of the root (rootName; root as decoded from
// doc, as stored) that marks it as being deleted by this prune: the
// application's status "failed", writeComplete false, no district
// successful (every one failed, every manifest entry failed), writeState
// "deleting", and this prune's stamp. The manifest's inline entries are
// rewritten from doc, as they are stored but for their status and
// errorMessage: read into manifestEntry, an entry of the application's,
// which has no contentHash, would gain one, and the root bytes it does not
// need. Pages are not rewritten (only snapwriter reads them, and it reads
// none of a root marked deleting).
func (in rootInput) deletingMark(rootName string, root *layout.Root, doc *pb.Document) (*pb.Write, error) {
	md, mf := root.Meta(), root.Manifest
	st := in.Stamp()
	meta := map[string]any{
		layout.FieldStatus:              layout.StatusFailed,
		layout.FieldWriteState:          layout.StateDeleting,
		layout.FieldWriteComplete:       false,
		layout.FieldSuccessfulDistricts: []string{},
		layout.FieldFailedDistricts:     markedFailed(md.FailedDistricts, md.SuccessfulDistricts),
		layout.FieldWriterFence:         st.WriterFence,
		layout.FieldWriterLockBackend:   st.WriterLockBackend,
		layout.FieldWriterLockKeyHash:   st.WriterLockKeyHash,
	}
	man := map[string]any{}
	if mf.TotalDistricts != nil {
		man[layout.FieldSuccessfulDistricts], man[layout.FieldFailedDistricts] = 0, *mf.TotalDistricts
	}
	stored := doc.GetFields()[layout.FieldManifest].GetMapValue()
	// Present (an inline manifest's; a paged root has none), even empty.
	if entries, ok := stored.GetFields()[layout.FieldDistricts].GetValueType().(*pb.Value_ArrayValue); ok {
		vals := entries.ArrayValue.GetValues()
		marked := make([]any, len(vals))
		for i, e := range vals {
			m := &pb.MapValue{Fields: map[string]*pb.Value{}}
			if em := e.GetMapValue(); em != nil {
				m = proto.Clone(em).(*pb.MapValue)
				if m.Fields == nil {
					m.Fields = map[string]*pb.Value{}
				}
			}
			m.Fields[layout.FieldStatus] = &pb.Value{ValueType: &pb.Value_StringValue{StringValue: layout.EntryFailed}}
			m.Fields[layout.FieldErrorMessage] = &pb.Value{ValueType: &pb.Value_StringValue{StringValue: deletingMessage}}
			marked[i] = &pb.Value{ValueType: &pb.Value_MapValue{MapValue: m}}
		}
		man[layout.FieldDistricts] = marked
	}
	fields := map[string]any{layout.FieldMetadata: meta}
	paths := make([]string, 0, len(meta)+len(man))
	for f := range meta {
		paths = append(paths, layout.FieldPath(layout.FieldMetadata, f))
	}
	if len(man) > 0 {
		fields[layout.FieldManifest] = man
		for f := range man {
			paths = append(paths, layout.FieldPath(layout.FieldManifest, f))
		}
	}
	w, err := layout.WireSetWrite(rootName, fields)
	if err != nil {
		return nil, fmt.Errorf("encoding the deleting mark: %w", err)
	}
	sort.Strings(paths)
	w.UpdateMask = &pb.DocumentMask{FieldPaths: paths}
	w.CurrentDocument = &pb.Precondition{ConditionType: &pb.Precondition_Exists{Exists: true}}
	return w, nil
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
