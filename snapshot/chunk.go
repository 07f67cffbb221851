package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	"cloud.google.com/go/firestore"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/batching"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
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
	ops := make([]op, 0, len(in.snap.Payload.Districts))
	for i := range in.snap.Payload.Districts {
		d := &in.snap.Payload.Districts[i]
		if want == nil || want[d.DistrictID] {
			ops = append(ops, op{districtID: d.DistrictID, district: d, bytes: in.opBytes[d.DistrictID]})
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
	return districtDoc(in.snap, *o.district, data, in.fence), nil
}

// commitChunks adds deletes of the stale district documents to ops and
// commits them all in chunks (starting chunks only while the job's ctx is
// live, running them under its wctx); their results go to the job's
// Result, and how each district ended to its written set.
func (j *job) commitChunks(ops []op) error {
	res, log := j.res, j.log
	stale, err := j.findStale()
	if err != nil {
		log.Warn("listing stale district documents failed; they are left in place", zap.Error(err))
	}
	ops = withDeletes(ops, stale)
	planned, err := j.w.chunks(ops)
	if err != nil {
		return fmt.Errorf("snapshot %s: planning chunks: %w", j.in.id, err)
	}
	defer j.adm.Begin(len(ops))()
	first := len(res.BatchResults)
	districts := j.w.root(j.in.id).Collection(districtsCollection)
	rec := j.startRecorder()
	results := batching.Run(j.ctx, planned, j.w.cfg.concurrency, func(ctx context.Context, i int, ops []op) BatchResult {
		t := j.adm.Admit(ctx, j.wctx) // nil: not admitted, and so not attempted
		r := j.writeChunk(chunk{index: first + i, ops: ops, districts: districts, in: &j.in})
		t.Done(r.Success, r.budgetWait)
		rec.add(r)
		if r.Success {
			j.progress.add(len(r.DistrictIDs))
		}
		logBatch(log, r)
		return r
	})
	j.written = rec.close()
	res.BatchResults = append(res.BatchResults, results...)
	return nil
}

// chunk is one chunk of a write as its transaction commits it: its batch
// index, its operations, and what its writes are built from. It holds
// nothing of the job: the transaction is handed the chunk's writes.
type chunk struct {
	index     int
	ops       []op
	districts *firestore.CollectionRef // the snapshot's district documents
	in        *rootInput               // what the district documents are built from
}

// writes encodes the chunk's sets and deletes. Each district's document
// is built (its data read back from a lazily read input) and encoded in
// turn, so that only its encoding outlives this call.
func (c chunk) writes() ([]*pb.Write, error) {
	writes := make([]*pb.Write, 0, len(c.ops))
	for _, o := range c.ops {
		name := c.districts.Doc(districtDocID(o.districtID)).Path
		if o.district == nil {
			writes = append(writes, deleteWrite(name))
			continue
		}
		doc, err := c.in.document(o)
		if err != nil {
			return nil, err
		}
		set, err := wireSetWrite(name, doc)
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

// fencedCommit is what commitFenced tells of a chunk's transaction: its
// retries, whether a commit may have been applied although no attempt was
// seen to succeed, how many attempts retried an aborted one
// (contention), and how long its attempts waited for the write budget.
type fencedCommit struct {
	retry.Stats
	unsure  bool
	aborted int
	waited  time.Duration // for the write budget, before its attempts
}

// commitFenced commits a chunk of n writes, under ctx, as one transaction
// on the Firestore API (apiTxn) that first reads the snapshot's fence
// document and requires it to carry this job's fence, retried by the
// write's policy; an attempt after an aborted one retries that
// transaction, which the server then gives priority. Every attempt first
// takes its n writes from the writer's budget, outside the attempt's
// timeout, and the store's answer goes back to the budget (admission).
// encode makes the chunk's writes, once, while the first attempt's fence
// read is on its way: every attempt commits the same messages. A write's
// chunks and a prune's delete chunks both commit through it.
func (j *job) commitFenced(ctx context.Context, n int, encode func() ([]*pb.Write, error)) (fencedCommit, error) {
	fence := j.w.fenceRef(j.in.id).Path
	var writes []*pb.Write
	tx := apiTx{docs: []string{fence},
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
		decide: func(_ context.Context, _ []byte, found map[string]*pb.Document) ([]*pb.Write, error) {
			if err := j.in.fenceProblem(found[fence]); err != nil {
				return nil, retry.Permanent(err)
			}
			return writes, nil
		}}
	var c fencedCommit
	var prev []byte // the last attempt's transaction, when it was aborted
	var err error
	c.Stats, c.unsure, err = j.retry(ctx, j.w.cfg.retry, func(ctx context.Context) error {
		if prev != nil {
			c.aborted++ // this attempt retries an aborted one
		}
		sent := time.Now()
		tid, _, err := j.w.apiTxn(ctx, tx, prev)
		j.adm.Answered(ctx, err, sent, n)
		prev = nil
		if status.Code(err) == codes.Aborted {
			prev = tid
		}
		return err
	}, retry.WithGate(func(ctx context.Context) error {
		d, err := j.adm.Wait(ctx, n)
		c.waited += d
		return err
	}))
	return c, err
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
