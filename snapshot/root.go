package snapshot

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/model"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// resumable reports whether stored root of in's snapshot is an
// unfinished write (in progress when its writer died, or partial) of the
// same input, by the same lock backend and key: then Write need not write
// again what it stored.
func resumable(root *layout.Root, in rootInput) bool {
	md := root.Meta()
	// A root a prune is deleting is not resumed: its districts are going.
	return md.CurrentForm() && !md.WrittenWhole() && md.WriteState != layout.StateDeleting && md.PayloadHash == in.PayloadHash &&
		md.WriterLockBackend == in.Backend && md.WriterLockKeyHash == in.KeyHash
}

// errResume ends a root transaction that found an unfinished write of the
// same input stored (resumable): the write completes it instead.
var errResume = errors.New("the stored snapshot is an unfinished write of this input")

// skip is the Result of a write or repair that found the snapshot
// complete and wrote nothing.
func (j *job) skip(msg string) *Result {
	j.log.Info(msg)
	return &Result{SnapshotID: j.in.ID, Outcome: OutcomeSkipped, FailedDistricts: []string{},
		TotalDurationMs: j.w.cfg.now().Sub(j.in.StartedAt).Milliseconds(), LockWaitMs: j.lockWait.Milliseconds()}
}

// startResult starts the Result of a write or repair from its root
// transaction (nil when it never ran) and that transaction's error; when
// the root failed, it is the write's whole Result, with the error the
// write ends with.
func (j *job) startResult(rootRes *BatchResult, err error) (*Result, error) {
	res := &Result{SnapshotID: j.in.ID, Fence: j.in.Fence, FailedDistricts: []string{}}
	if rootRes != nil {
		res.BatchResults = append(res.BatchResults, *rootRes)
		logBatch(j.log, *rootRes)
	}
	if err == nil {
		return res, nil
	}
	res.Outcome = OutcomeNotWritten
	if errors.Is(err, ErrFencedOut) {
		res.Outcome = OutcomeFencedOut
	}
	if rootRes != nil {
		j.summarize(res, nil)
	}
	if lost := j.lease.Err(); lost != nil && errors.Is(err, ErrRootFailed) && errors.Is(err, locking.ErrLeaseLost) {
		return res, j.lostBeforeRoot(rootRes != nil && rootRes.unsure, lost)
	}
	return res, j.leaseErr(err)
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
		return newError(j.in.ID, ErrLockLost, fmt.Errorf("%w while the root document's commit was in flight: it may have been written, as a write in progress with no district written yet — rerun the write, which completes it (%w)",
			ErrLockLost, lost))
	}
	j.log.Warn("lost the lock before the root document was written; nothing was written; rerun the write", zap.Error(lost))
	return newError(j.in.ID, ErrLockLost, fmt.Errorf("%w before the root document was written: %w — the stored snapshot is as it was; rerun the write (%w)",
		ErrLockLost, ErrNothingWritten, lost))
}

// writeRoot commits the root document in a transaction that refuses to
// replace a root written under a newer fence: two round trips, a read of
// the root and the fence document that begins the transaction, and the
// commit (see txn.go). It returns, for a fresh write, the listing of the
// district documents that ran beside it (findStale takes it).
//
// A fresh write — the transaction finds neither a root nor a fence
// document — also needs no round trip of its own for the listings a write
// makes: of the stored manifest pages, which the root transaction
// deletes, and of the stored district documents, which the chunks delete
// (findStale). Both run outside the transaction, alongside its read
// (startListings), and a fresh write takes them as they are. That is
// exact: every district document and manifest page is written by a
// transaction that either read the root (a root transaction) or read the
// fence document and required it to carry its writer's fence (chunks,
// records, finishes), so once this transaction has read both missing, no
// such write can commit before this one, which writes both, and none of a
// writer of an older fence after it. A write that finds either lists the
// pages inside its transaction, and the districts after its commit: an
// older writer that lost its lock may commit chunks up to that commit.
func (j *job) writeRoot(resume bool) (BatchResult, *listing, error) {
	in := &j.in
	r := BatchResult{BatchIndex: 0, OperationCount: 1, DistrictIDs: []string{}}
	doc, pages, err := in.RootDoc()
	if err != nil {
		return r, nil, err
	}
	ref := j.names.Root
	rootName, fenceName := ref.Path, j.names.Fence.Path
	// Every attempt commits the same documents: encoded once.
	sets, err := j.rootWrites(doc, pages)
	if err != nil {
		return r, nil, err
	}
	t0 := time.Now()
	sctx, span := j.w.tel.start(j.wctx, SpanRoot)
	lists := j.startListings(sctx)
	var fresh bool // the attempt that committed found no root and no fence document
	st, err := j.transact(sctx, j.w.cfg.retry, txn{reads: []string{rootName, fenceName},
		body: func(ctx context.Context, a *attempt) error {
			stored, isFresh := a.doc(rootName), a.doc(rootName) == nil && a.doc(fenceName) == nil
			if stored != nil {
				root := layout.DecodeRoot(layout.FieldsOf(stored))
				if j.w.cfg.skipComplete && root.Complete() {
					return retry.Permanent(errSkip)
				}
				if err := j.checkPrior(ctx, root.Meta()); err != nil {
					return retry.Permanent(err)
				}
				if resume && resumable(root, *in) {
					return retry.Permanent(errResume)
				}
			}
			var storedPages []string
			var err error
			if isFresh {
				storedPages, err = lists.pages.wait()
			}
			if !isFresh || err != nil {
				if storedPages, err = a.ids(ctx, rootName, layout.PagesCollection); err != nil {
					return fmt.Errorf("listing manifest pages: %w", err)
				}
			}
			fresh = isFresh
			a.write(j.withPageDeletes(sets, len(pages), storedPages)...)
			return nil
		}})
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	endStep(span, st.Stats, err)
	var stale *listing
	if err == nil && fresh {
		stale = lists.districts
	} else {
		lists.districts.cancel()
	}
	lists.pages.cancel()
	if err != nil {
		r.Err, r.unsure = err, st.unsure
		if errors.Is(err, errSkip) || errors.Is(err, errResume) {
			return r, nil, err
		}
		if refusedByPrior(err) {
			return r, nil, withID(in.ID, err)
		}
		return r, nil, newError(in.ID, ErrRootFailed, err)
	}
	r.Success = true
	j.rootCommits.Add(1)
	return r, stale, nil
}

// rootWrites are the writes every attempt of the root transaction makes
// whatever it finds stored (and a repair's takeover makes): the root document, its
// manifest pages, the gate's record of a write it let through by the
// month-end closing rule, and the fence document, stamped with the job's
// fence.
func (j *job) rootWrites(root layout.Root, pages []layout.Page) ([]*pb.Write, error) {
	in := &j.in
	writes := make([]*pb.Write, 0, len(pages)+3)
	w, err := layout.SetWrite(j.names.Root.Path, root)
	if err != nil {
		return nil, retry.Permanent(err)
	}
	writes = append(writes, w)
	for i, p := range pages {
		if w, err = layout.SetWrite(j.names.Page(i).Path, p); err != nil {
			return nil, retry.Permanent(err)
		}
		writes = append(writes, w)
	}
	if in.gate != nil {
		if w, err = layout.SetWrite(j.names.Gate.Path, in.gate); err != nil {
			return nil, retry.Permanent(err)
		}
		writes = append(writes, w)
	}
	if w, err = layout.SetWrite(j.names.Fence.Path, in.FenceDoc(in.StartedAt)); err != nil {
		return nil, retry.Permanent(err)
	}
	return append(writes, w), nil
}

// withPageDeletes is sets, the root transaction's writes (rootWrites) for
// n manifest pages, with the deletes of the stored pages (stored, by id)
// they do not replace before the fence document's write.
func (j *job) withPageDeletes(sets []*pb.Write, n int, stored []string) []*pb.Write {
	out := slices.Clone(sets[:len(sets)-1])
	for _, sid := range stored {
		if i, err := strconv.Atoi(sid); err == nil && sid == layout.PageID(i) && i < n {
			continue
		}
		out = append(out, layout.DeleteWrite(j.names.Pages.Doc(sid).Path))
	}
	return append(out, sets[len(sets)-1])
}

// listing is a list of document ids under way (listIDs).
type listing struct {
	done   chan struct{}
	ids    []string
	err    error
	cancel context.CancelFunc
}

// listIDs starts listing the ids of collection coll under document parent
// (a full name), outside any transaction.
func (w *Writer) listIDs(ctx context.Context, parent, coll string) *listing {
	ctx, cancel := context.WithCancel(ctx)
	l := &listing{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(l.done)
		l.ids, l.err = w.queryIDs(ctx, nil, parent, coll)
	}()
	return l
}

// wait is the listing's ids, once it is over.
func (l *listing) wait() ([]string, error) {
	<-l.done
	return l.ids, l.err
}

// listings are the root transaction's listings of the stored manifest
// pages and district documents (see writeRoot).
type listings struct{ pages, districts *listing }

// startListings starts the listings of the snapshot's manifest pages and
// district documents, beside the root transaction.
func (j *job) startListings(ctx context.Context) listings {
	root := j.names.Root.Path
	return listings{pages: j.w.listIDs(ctx, root, layout.PagesCollection), districts: j.w.listIDs(ctx, root, layout.DistrictsCollection)}
}

// findStale lists district documents of an earlier write of this
// snapshot that the new snapshot no longer has: from the listing that ran
// beside a fresh write's root transaction (l, which writeRoot returns;
// nil: none), else by a query now.
func (j *job) findStale(l *listing) ([]string, error) {
	if l != nil {
		ids, err := l.wait()
		l.cancel()
		if err == nil {
			return staleOf(ids, j.in.Snap), nil
		}
		j.log.Debug("listing district documents beside the root transaction failed; listing them again", zap.Error(err))
	}
	return j.w.staleDistricts(j.wctx, j.in.ID, j.in.Snap)
}

// staleOf is the ids, sorted, of the district documents (docIDs, by
// document id) that snap does not have.
func staleOf(docIDs []string, snap *model.Snapshot) []string {
	keep := make(map[string]bool, len(snap.Payload.Districts))
	for _, d := range snap.Payload.Districts {
		keep[layout.DistrictDocID(d.DistrictID)] = true
	}
	var stale []string
	for _, id := range docIDs {
		if !keep[id] {
			stale = append(stale, strings.TrimPrefix(id, layout.DistrictDocPrefix))
		}
	}
	sort.Strings(stale)
	return stale
}

// errSkip ends a write that WithSkipComplete found nothing to do for.
var errSkip = errors.New("stored snapshot is complete")

// staleDistricts lists, sorted, the ids of the district documents stored
// under snapshot id that snap does not have: those a write of snap deletes.
func (w *Writer) staleDistricts(ctx context.Context, id string, snap *model.Snapshot) ([]string, error) {
	keep := make(map[string]bool, len(snap.Payload.Districts))
	for _, d := range snap.Payload.Districts {
		keep[layout.DistrictDocID(d.DistrictID)] = true
	}
	refs, err := w.names(id).Districts.Select().Documents(ctx).GetAll()
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, d := range refs {
		if !keep[d.Ref.ID] {
			stale = append(stale, strings.TrimPrefix(d.Ref.ID, "district_"))
		}
	}
	sort.Strings(stale)
	return stale, nil
}
