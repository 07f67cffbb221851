package snapshot

// The deleting half of a prune: listing what is below a marked root and
// deleting it in fenced chunks, then the fence document and the root.

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/batching"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// listBelow lists the documents below the root, by full name, in the
// order a prune deletes them: the district documents, the manifest pages,
// then the documents of any other subcollection but the fence document
// (which goes with the root). Listed after the mark, it holds every
// document a writer committed: a chunk of an older writer either
// committed before the mark's fence write or is refused after it.
func (j *job) listBelow() ([3][]string, error) {
	var groups [3][]string
	root := j.names.Root
	fence := j.names.Fence.Path
	colls, err := root.Collections(j.wctx).GetAll()
	if err != nil {
		return groups, fmt.Errorf("listing the subcollections of %s: %w", j.in.ID, err)
	}
	for _, c := range colls {
		refs, err := c.DocumentRefs(j.wctx).GetAll()
		if err != nil {
			return groups, fmt.Errorf("listing %s/%s: %w", j.in.ID, c.ID, err)
		}
		g := 2
		switch c.ID {
		case layout.DistrictsCollection:
			g = 0
		case layout.PagesCollection:
			g = 1
		}
		for _, r := range refs {
			if r.Path != fence {
				groups[g] = append(groups[g], r.Path)
			}
		}
	}
	return groups, nil
}

// deleteChunks deletes the documents names in chunks of the writer's
// batch size, its concurrency at once (fewer while the store answers
// slowly, as a write's chunks), each a transaction that checks the fence.
// n counts the documents whose chunk committed; err is the failure of the
// first chunk that failed, a fenced-out one before any other.
func (j *job) deleteChunks(names []string, res *PruneResult) (n int, err error) {
	chunks, err := batching.Plan(names, func(string) (int, int) { return 1, deleteBytes },
		batching.Limits{MaxOps: j.w.chunkOps(), MaxBytes: maxCommitBytes})
	if err != nil || len(chunks) == 0 {
		return 0, err
	}
	defer j.adm.Begin(len(names))()
	type deleted struct {
		retries int
		err     error
	}
	results := batching.Run(j.ctx, chunks, j.w.cfg.concurrency, func(ctx context.Context, _ int, chunk []string) deleted {
		t := j.adm.Admit(ctx, j.wctx)
		t0 := time.Now()
		retries, waited, err := j.deleteChunk(chunk)
		t.Done(err == nil, waited)
		fields := []zap.Field{zap.Int("documents", len(chunk)), zap.Int("retryAttempts", retries),
			zap.Int64("durationMs", time.Since(t0).Milliseconds())}
		if err != nil {
			j.log.Warn("delete chunk failed", append(fields, zap.Error(err))...)
		} else {
			j.log.Info("delete chunk committed", fields...)
		}
		return deleted{retries, err}
	})
	for i, r := range results {
		res.Chunks++
		res.RetryAttempts += r.retries
		switch {
		case r.err == nil:
			n += len(chunks[i])
		case err == nil, errors.Is(r.err, ErrFencedOut) && !errors.Is(err, ErrFencedOut):
			err = r.err
		}
	}
	return n, err
}

// deleteChunk deletes names in one chunk transaction that first checks the
// fence document carries the prune's fence, retried as a write's chunk is;
// waited is how long its attempts waited for the write budget.
func (j *job) deleteChunk(names []string) (retries int, waited time.Duration, err error) {
	if err := j.notStarted(); err != nil {
		return 0, 0, err
	}
	c, err := j.commitFenced(j.wctx, len(names), func() ([]*pb.Write, error) {
		writes := make([]*pb.Write, len(names))
		for i, name := range names {
			writes[i] = layout.DeleteWrite(name)
		}
		return writes, nil
	})
	return c.Retries, c.waited, err
}

// deleteRoot deletes the fence document and the root in one transaction
// that checks both still carry the prune's fence and the root is marked
// deleting. A root already gone is done: a retried commit whose first
// outcome was lost.
func (j *job) deleteRoot() error {
	rootName, fenceName := j.names.Root.Path, j.names.Fence.Path
	_, err := j.transact(j.wctx, j.w.cfg.retry, txn{explicitBegin: true, reads: []string{rootName, fenceName},
		body: func(_ context.Context, a *attempt) error {
			stored := a.doc(rootName)
			if stored == nil {
				return nil
			}
			if err := j.in.fenceProblem(a.doc(fenceName)); err != nil {
				return retry.Permanent(err)
			}
			md := layout.DecodeRoot(layout.FieldsOf(stored)).Meta()
			if md.WriteState != layout.StateDeleting {
				return retry.Permanent(fmt.Errorf("%w: the root's writeState is %q, no longer %q", ErrFencedOut, md.WriteState, layout.StateDeleting))
			}
			if err := j.in.fenceMismatch(md.WriterFence, md.WriterLockBackend); err != nil {
				return retry.Permanent(err)
			}
			a.delete(fenceName)
			a.delete(rootName)
			return nil
		}})
	return err
}
