package snapshot

import (
	"context"
	"errors"
	"fmt"
	"time"

	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.opentelemetry.io/otel/metric"
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

// districtOutcome is what the chunks of a write or repair did, per district.
type districtOutcome struct {
	status, msgs map[string]string // district → manifest entry status, error message
	times        map[string]string // district → when its chunk committed (isoMillis)
	fenced       bool              // a chunk was refused for a newer fence
}

// commitChunks adds deletes of the stale district documents to ops,
// commits them all in chunks (starting chunks only while the job's ctx is
// live, running them under its wctx), and records the outcome in its
// Result.
func (j *job) commitChunks(ops []op) (districtOutcome, error) {
	res, log := j.res, j.log
	stale, err := j.findStale()
	if err != nil {
		log.Warn("listing stale district documents failed; they are left in place", zap.Error(err))
	}
	ops = withDeletes(ops, stale)
	chunks, err := j.w.chunks(ops)
	if err != nil {
		return districtOutcome{}, fmt.Errorf("snapshot %s: planning chunks: %w", j.in.id, err)
	}
	defer j.pace.begin(len(ops))()
	first := len(res.BatchResults)
	rec := j.startRecorder()
	results := batching.Run(j.ctx, chunks, j.w.cfg.concurrency, func(ctx context.Context, i int, chunk []op) BatchResult {
		// Fewer at once while the store answers slowly (shedder).
		var epoch int
		admitted := false
		if j.shed != nil {
			if epoch, admitted = j.shed.enter(ctx, j.wctx); admitted {
				defer j.shed.leave()
			}
		}
		t0 := time.Now()
		r := j.tracedChunk(first+i, chunk)
		if admitted && r.Success {
			// The store's latency: a wait for the write budget is
			// the writer's own, not queueing at the store.
			j.shed.committed(time.Since(t0)-r.budgetWait, epoch)
		}
		if r.Success {
			rec.add(r.DistrictIDs, r.CommittedAt)
			j.progress.add(len(r.DistrictIDs))
		}
		logBatch(log, r)
		return r
	})
	rec.close()
	res.BatchResults = append(res.BatchResults, results...)
	j.w.tally(res)
	return outcomeOf(results), nil
}

// outcomeOf reads the per-district outcome from chunk results.
func outcomeOf(results []BatchResult) districtOutcome {
	out := districtOutcome{status: map[string]string{}, msgs: map[string]string{}, times: map[string]string{}}
	for _, r := range results {
		st := entrySuccess
		if !r.Success {
			st = entryFailed
			out.fenced = out.fenced || errors.Is(r.Err, ErrFencedOut)
		}
		for _, d := range r.DistrictIDs {
			out.status[d], out.msgs[d] = st, errText(r.Err)
			if r.Success {
				out.times[d] = isoMillis(r.CommittedAt)
			}
		}
	}
	return out
}

// writeChunk commits one chunk as a transaction that first verifies the
// fence, and writes the chunk's district documents and nothing else: no
// two chunks in flight write the same document, and none writes the root
// (the recorder does). The chunk starts only while the job's ctx is live;
// once started it runs under its wctx, which outlives ctx by the grace
// period. Its documents are encoded once, and every attempt commits the
// same messages: every write is a set or a delete, so an attempt that
// repeats one applied before (its outcome lost) changes nothing. ctx is
// wctx in the chunk's span (tracedChunk), which its RPCs run under.
func (j *job) writeChunk(ctx context.Context, index int, chunk []op) BatchResult {
	r := BatchResult{BatchIndex: index, OperationCount: len(chunk), DistrictIDs: []string{}, ops: chunk}
	for _, o := range chunk {
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
	c, err := j.commitFenced(ctx, len(chunk), func() ([]*pb.Write, error) { return j.chunkWrites(chunk) })
	r.RetryAttempts, r.AbortedRetries, r.DurationMs = c.Retries, c.aborted, time.Since(t0).Milliseconds()
	r.budgetWait = c.waited
	if err != nil {
		if cause := context.Cause(j.wctx); cause != nil && j.wctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		r.Err = err
		r.unsure = c.unsure && !errors.Is(err, ErrFencedOut)
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
// that first checks the snapshot's fence document still carries this
// job's fence (chunkTxn), retried by the write's policy; an attempt after
// an aborted one retries that transaction, which the server then gives
// priority. Every attempt first takes its n writes from the writer's
// budget, outside the attempt's timeout, and the store's answer goes back
// to the budget (pacer). encode makes the chunk's writes, once, while the
// first attempt's fence read is on its way: every attempt commits the
// same messages. A write's chunks and a prune's delete chunks both commit
// through it.
func (j *job) commitFenced(ctx context.Context, n int, encode func() ([]*pb.Write, error)) (fencedCommit, error) {
	var writes []*pb.Write
	tx := chunkTx{fence: j.w.fenceRef(j.in.id).Path}
	tx.prepare = func() error {
		if writes != nil {
			return nil
		}
		var err error
		if writes, err = encode(); err != nil {
			return retry.Permanent(err)
		}
		return nil
	}
	tx.decide = func(fence *pb.Document) ([]*pb.Write, error) {
		if err := j.in.fenceProblem(fence); err != nil {
			return nil, retry.Permanent(err)
		}
		return writes, nil
	}
	var c fencedCommit
	var prev []byte // the last attempt's transaction, when it was aborted
	var err error
	c.Stats, c.unsure, err = j.retry(ctx, j.w.cfg.retry, func(ctx context.Context) error {
		if prev != nil {
			c.aborted++ // this attempt retries an aborted one
		}
		sent := time.Now()
		tid, err := j.w.chunkTxn(ctx, tx, prev)
		j.pace.answered(ctx, err, sent, n)
		prev = nil
		if status.Code(err) == codes.Aborted {
			prev = tid
		}
		return err
	}, retry.WithGate(func(ctx context.Context) error {
		d, err := j.pace.wait(ctx, n)
		c.waited += d
		return err
	}))
	return c, err
}

// chunkWrites encodes a chunk's sets and deletes. Each district's
// document is built (its data read back from a lazily read input) and
// encoded in turn, so that only its encoding outlives this call.
func (j *job) chunkWrites(chunk []op) ([]*pb.Write, error) {
	districts := j.w.root(j.in.id).Collection("districts")
	writes := make([]*pb.Write, 0, len(chunk))
	for _, o := range chunk {
		name := districts.Doc(districtDocID(o.districtID)).Path
		if o.district == nil {
			writes = append(writes, deleteWrite(name))
			continue
		}
		doc, err := j.in.document(o)
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

// chunks divides ops into the chunks a write commits: at most chunkOps
// operations each, and at most maxCommitBytes of them.
func (w *Writer) chunks(ops []op) ([][]op, error) {
	return batching.Plan(ops, func(o op) (int, int) { return 1, o.bytes },
		batching.Limits{MaxOps: w.chunkOps(), MaxBytes: maxCommitBytes})
}

// chunkOps is the most operations a chunk holds: the batch size, or a
// tenth of a second of the write budget's share when that is less (four
// tasks sharing 500/s commit 12 at a time), so that writers sharing the
// budget stay within it second by second (pacing.Budget.MaxCommit).
func (w *Writer) chunkOps() int { return min(w.cfg.batchSize, w.cfg.budget.MaxCommit()) }

// chunkTx is one chunk's transaction, as every attempt of it runs: the
// name of the fence document it reads; prepare, run while that read is on
// its way (so that encoding the chunk's documents costs no round trip);
// and decide, handed the fence document (nil when it is missing), which
// returns the writes to commit.
type chunkTx struct {
	fence   string
	prepare func() error
	decide  func(fence *pb.Document) ([]*pb.Write, error)
}

// chunkTxn runs one attempt of chunk transaction c: it reads the fence
// document in a new transaction (retrying prev, the attempt before, when
// that one was aborted: the server then gives this one priority), runs
// c.prepare while the read is on its way, hands the fence document to
// c.decide, and commits the writes it returns. It returns the
// transaction's id, for the next attempt's prev.
//
// A commit error whose outcome is unknown comes back as an *unknownOutcome
// marked retry.Transient, as txn's do.
func (w *Writer) chunkTxn(ctx context.Context, c chunkTx, prev []byte) (tid []byte, err error) {
	tid, _, err = w.apiTxn(ctx, apiTx{docs: []string{c.fence}, prepare: c.prepare,
		decide: func(_ context.Context, _ []byte, found map[string]*pb.Document) ([]*pb.Write, error) {
			return c.decide(found[c.fence])
		}}, prev)
	return tid, err
}

// tracedChunk is writeChunk in a span of its own, under which the
// chunk's RPCs run; it counts the districts the chunk wrote and records
// its duration.
func (j *job) tracedChunk(index int, chunk []op) BatchResult {
	t := j.w.tel
	ctx, span := t.start(j.wctx, SpanChunk, attrChunkIndex.Int(index), attrChunkOps.Int(len(chunk)))
	r := j.writeChunk(ctx, index, chunk)
	outcome, attempts := chunkCommitted, r.RetryAttempts+1
	switch {
	case r.Success:
	case r.notAttempted:
		outcome, attempts = chunkNotAttempted, 0
	case errors.Is(r.Err, ErrFencedOut):
		outcome = chunkFencedOut
	default:
		outcome = chunkFailed
	}
	span.SetAttributes(attrChunkOutcome.String(outcome), attrAttempts.Int(attempts), attrDistricts.Int(len(r.DistrictIDs)))
	ctx = context.WithoutCancel(ctx)
	if attempts > 0 {
		t.chunkDuration.Record(ctx, float64(r.DurationMs)/1000, metric.WithAttributes(attrChunkOutcome.String(outcome)))
	}
	if r.Success {
		t.districts.Add(ctx, int64(len(r.DistrictIDs)))
	}
	endSpan(span, r.Err)
	return r
}
