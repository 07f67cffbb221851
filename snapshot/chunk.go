package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/batching"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// A district chunk is one read-write transaction on the Firestore API
// itself rather than on the client's RunTransaction, so that its
// documents are encoded once and its retries are the retry layer's alone.
// By default its fence read begins the transaction (BatchGetDocuments with
// new_transaction), so a chunk is two round trips: the read and the
// commit. WithInlineBegin(false) makes the client's three (a
// BeginTransaction first). The guarantees are the same either way: the
// read and the writes are one transaction, so a newer writer's fence
// write either comes before the read, and is seen, or conflicts with it.
// What differs is a read whose answer is lost (a connection reset): begun
// inline, its transaction's id is lost with it, so nothing can roll it
// back, and its read of the fence document holds until the server expires
// it (60 s). (A read the attempt's timeout abandons is not lost: it is
// left to finish and roll back, fstx.) That is safe because nothing in a write needs the fence
// document exclusively: chunks and progress records only read it, and the
// finish writes it only to settle a chunk commit of unknown outcome (and
// then outlasts such a read within the contention wait). A newer writer
// taking the snapshot over writes it, and waits as it waits for a writer
// killed mid-chunk.

// op is one write of a chunk: a district set or a stale district delete.
// A set's document is built when its chunk is written, and not kept.
type op struct {
	districtID string
	district   *model.DistrictStatistics // the district to set; nil: delete
	bytes      int
}

// ops are the sets of the districts want selects (every district when
// want is nil), in input order.
func (in rootInput) ops(want map[string]bool) []op {
	ops := make([]op, 0, len(in.Snap.Payload.Districts))
	for i := range in.Snap.Payload.Districts {
		d := &in.Snap.Payload.Districts[i]
		if want == nil || want[d.DistrictID] {
			ops = append(ops, op{districtID: d.DistrictID, district: d, bytes: in.OpBytes[d.DistrictID]})
		}
	}
	return ops
}

// document builds the document a set writes, reading its district's data
// (from the input file, for a lazily read snapshot).
func (in rootInput) document(o op) (map[string]any, error) {
	data, err := o.district.Data()
	if err != nil {
		return nil, fmt.Errorf("district %s: %w", o.districtID, err)
	}
	return layout.DistrictDoc(in.Snap, *o.district, data, in.Fence), nil
}

// chunked is what the chunk stage returns: each chunk's result, and how
// each district of them ended (the written set its recorder kept).
type chunked struct {
	results []BatchResult
	written *written
}

// chunkStage adds deletes of the stale district documents (findStale of
// listing, which the root stage may have started) to ops and
// commits them all in chunks, numbered from first (starting chunks only
// while the job's ctx is live, running them under its wctx), while a
// recorder records their progress in the root. The written set and the
// recorder are the stage's own: the set is handed on when the stage ends.
func (j *job) chunkStage(first int, ops []op, listing *listing) (chunked, error) {
	log := j.log
	stale, err := j.findStale(listing)
	if err != nil {
		log.Warn("listing stale district documents failed; they are left in place", zap.Error(err))
	}
	ops = withDeletes(ops, stale)
	planned, err := j.w.chunks(ops)
	if err != nil {
		return chunked{}, fmt.Errorf("snapshot %s: planning chunks: %w", j.in.ID, err)
	}
	defer j.adm.Begin(len(ops))()
	rec := j.startRecorder()
	results := batching.Run(j.ctx, planned, j.w.cfg.concurrency, func(ctx context.Context, i int, ops []op) BatchResult {
		// nil: not admitted, the write stopped while the chunk waited;
		// writeChunk then records it as not attempted (notStarted).
		t := j.adm.Admit(ctx, j.wctx)
		r := j.writeChunk(chunk{index: first + i, ops: ops, names: j.names, in: &j.in})
		t.Done(r.Success, r.budgetWait)
		rec.add(r)
		if r.Success {
			j.progress.add(len(r.DistrictIDs))
		}
		logBatch(log, r)
		return r
	})
	return chunked{results: results, written: rec.close()}, nil
}

// chunk is one chunk of a write as its transaction commits it: its batch
// index, its operations, and what its writes are built from. It holds
// nothing of the job: the transaction is handed the chunk's writes.
type chunk struct {
	index int
	ops   []op
	names layout.Names // the snapshot's documents
	in    *rootInput   // what the district documents are built from
}

// writes encodes the chunk's sets and deletes. Each district's document
// is built (its data read back from a lazily read input) and encoded in
// turn, so that only its encoding outlives this call.
func (c chunk) writes() ([]*pb.Write, error) {
	writes := make([]*pb.Write, 0, len(c.ops))
	for _, o := range c.ops {
		name := c.names.DistrictName(o.districtID)
		if o.district == nil {
			writes = append(writes, layout.DeleteWrite(name))
			continue
		}
		doc, err := c.in.document(o)
		if err != nil {
			return nil, err
		}
		set, err := layout.WireSetWrite(name, doc)
		if err != nil {
			return nil, fmt.Errorf("district %s: %w", o.districtID, err)
		}
		writes = append(writes, set)
	}
	return writes, nil
}

// writeChunk commits chunk c as a transaction that first verifies the
// fence, and writes the chunk's district documents and nothing else: no
// two chunks in flight write the same document, and none writes the root
// (the recorder does). The chunk starts only while the job's ctx is live;
// once started it runs under its wctx, which outlives ctx by the grace
// period, in a span of its own. Its documents are encoded once, and every
// attempt commits the same messages: every write is a set or a delete, so
// an attempt that repeats one applied before (its outcome lost) changes
// nothing.
func (j *job) writeChunk(c chunk) (r BatchResult) {
	ctx, span := j.w.tel.start(j.wctx, SpanChunk, attrChunkIndex.Int(c.index), attrChunkOps.Int(len(c.ops)))
	defer func() { j.w.tel.chunkDone(ctx, span, r) }()
	r = BatchResult{BatchIndex: c.index, OperationCount: len(c.ops), DistrictIDs: []string{}, ops: c.ops}
	for _, o := range c.ops {
		if o.district != nil {
			r.DistrictIDs = append(r.DistrictIDs, o.districtID)
		} else {
			r.deletes++
		}
	}
	t0 := time.Now()
	if err := j.notStarted(); err != nil {
		r.Err, r.notAttempted = err, true
		return r
	}
	fc, err := j.commitFenced(ctx, len(c.ops), c.writes)
	r.RetryAttempts, r.AbortedRetries, r.DurationMs = fc.Retries, fc.aborted, time.Since(t0).Milliseconds()
	r.budgetWait = fc.waited
	if err != nil {
		if cause := context.Cause(j.wctx); cause != nil && j.wctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		r.Err = err
		r.unsure = fc.unsure && !errors.Is(err, ErrFencedOut)
		return r
	}
	r.Success, r.CommittedAt = true, time.Now()
	return r
}

// notStarted is why a chunk must not start, nil when it may: the write
// was stopped (the job's ctx ended) or its lease lost (wctx ended).
func (j *job) notStarted() error {
	for _, c := range []context.Context{j.ctx, j.wctx} {
		if c.Err() != nil {
			return fmt.Errorf("not attempted: %w", context.Cause(c))
		}
	}
	return nil
}

// commitFenced commits a chunk of n writes, under ctx, as one fenced
// transaction (transact) that reads only the snapshot's fence document,
// retried by the write's policy, each attempt first taking its n writes
// from the writer's budget. encode makes the chunk's writes, once, while
// the first attempt's fence read is on its way: every attempt commits the
// same messages. A write's chunks and a prune's delete chunks both commit
// through it.
func (j *job) commitFenced(ctx context.Context, n int, encode func() ([]*pb.Write, error)) (txnStats, error) {
	var writes []*pb.Write
	return j.transact(ctx, j.w.cfg.retry, txn{fenced: true, paced: n,
		prepare: func() error {
			if writes != nil {
				return nil
			}
			var err error
			if writes, err = encode(); err != nil {
				return retry.Permanent(err)
			}
			return nil
		},
		body: func(_ context.Context, a *attempt) error {
			a.write(writes...)
			return nil
		}})
}

// deleteBytes is what a delete counts against a commit's bytes
// (maxCommitBytes): its document's name, with room to spare.
const deleteBytes = 256

// withDeletes is ops and the deletes of the stale district documents
// (stale, by district id) after them.
func withDeletes(ops []op, stale []string) []op {
	for _, sid := range stale {
		ops = append(ops, op{districtID: sid, bytes: deleteBytes})
	}
	return ops
}

// chunks divides ops into the chunks a write commits (and a plan shows):
// at most chunkOps operations each, and at most maxCommitBytes of them.
func (w *Writer) chunks(ops []op) ([][]op, error) {
	return batching.Plan(ops, func(o op) (int, int) { return 1, o.bytes },
		batching.Limits{MaxOps: w.chunkOps(), MaxBytes: maxCommitBytes})
}

// chunkOps is the most operations a chunk holds: the batch size, or a
// tenth of a second of the write budget's share when that is less (four
// tasks sharing 500/s commit 12 at a time), so that writers sharing the
// budget stay within it second by second (pacing.Budget.MaxCommit).
func (w *Writer) chunkOps() int { return min(w.cfg.batchSize, w.cfg.budget.MaxCommit()) }
