// Package snapshot writes and reads district-statistics snapshots in
// Firestore: a fenced root document first, then the district documents in
// chunked transactions — their progress recorded in the root about once a
// second, never by the chunks themselves — then the manifest that says
// what was written.
//
// A Writer holds the snapshot's lock (a locking.Backend) for the whole
// write, and every chunk checks the lock's fence in its transaction, so a
// writer that lost the lock can never overwrite a newer one's districts.
// The root never lists a district whose document is absent; a writer
// killed between two records leaves districts stored but not yet
// recorded, which Repair (or the same Write again) records without
// writing them again.
// An incomplete write is never silent: the manifest lists the districts
// not written, and Write returns ErrPartial beside its Result:
//
//	res, err := w.Write(ctx, "2026-11-20", snap)
//	switch {
//	case err == nil: // complete (or skipped: WithSkipComplete)
//	case errors.Is(err, snapshot.ErrPartial): // res.FailedDistricts; w.Repair(ctx, id, snap) completes it
//	case errors.Is(err, snapshot.ErrLockHeld): // another writer is at work; nothing written
//	default: // see Write for the other endings
//	}
//
// A Reader reads snapshots back in the input format (Get), lists them with
// their state (List, Summary, Latest) and checks what is stored against
// the manifest and an input (Verify).
package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/retry"
)

// Errors a write or repair can end with, beside model.ErrInvalid for bad
// input. Match them with errors.Is; one error may match several (a lost
// lock mid-write is ErrPartial and ErrLockLost).
var (
	// ErrPartial: the snapshot is incomplete — chunks failed, the write was
	// stopped, or the lock was lost — and its manifest records which
	// districts were written. The Result returned beside it says the same;
	// Repair completes the snapshot. A fenced-out write, one whose manifest
	// was not recorded and one whose root failed are not ErrPartial: they
	// return ErrFencedOut, ErrManifestNotRecorded and ErrRootFailed.
	ErrPartial = errors.New("snapshot written partially")
	// ErrLockHeld: another writer holds the snapshot's lock and did not let
	// go within the lock wait. Nothing was written.
	ErrLockHeld = errors.New("snapshot lock is held by another writer")
	// ErrFencedOut: a writer with a newer fence wrote this snapshot.
	// Whatever this writer had not committed was refused; the newer
	// writer's data is intact.
	ErrFencedOut = errors.New("fenced out by a newer writer")
	// ErrLockLost: this writer's lease ended mid-write (the lock could not
	// be renewed before it expired) and no newer writer has written the
	// snapshot. No chunk was started after the loss; what was committed
	// before it is recorded in the manifest, and Repair completes the rest.
	ErrLockLost = errors.New("lost the lock")
	// ErrManifestNotRecorded: the write's outcome could not be recorded in
	// the root document, which still describes a write in progress. Repair
	// (or writing the snapshot again) completes it.
	ErrManifestNotRecorded = errors.New("the manifest was not recorded")
	// ErrLockBackendSwitch: the snapshot was written under a different lock
	// backend, whose fences are not comparable with ours.
	ErrLockBackendSwitch = errors.New("snapshot was written under a different lock backend")
	// ErrLockKeySwitch: the snapshot was written under another lock key
	// (on the same backend), whose fences are not comparable with ours.
	ErrLockKeySwitch = errors.New("snapshot was written under a different lock key")
	// ErrRootFailed: the root document could not be written, so no district
	// was attempted.
	ErrRootFailed = errors.New("root document write failed")
	// ErrTimeout: the lock store did not answer within the lock wait plus
	// the request timeout. Nothing was written.
	ErrTimeout = errors.New("no answer from the lock store")
	// ErrNothingWritten: the write ended before its root document was
	// written (with ErrLockLost: the lease was lost first), so the stored
	// snapshot is as it was. Writing it again is all there is to do.
	ErrNothingWritten = errors.New("nothing was written")
)

// Writer writes snapshots. It is safe for concurrent use.
type Writer struct {
	client   *firestore.Client
	api      *vkit.Client // the chunks' transactions run on it
	ownAPI   bool         // api was opened by NewWriter, and Close closes it
	locker   locking.Backend
	cfg      config
	lockName string
	scope    LockScope // names the snapshots' lock keys (LockScope.LockKey)
}

// NewWriter returns a Writer that guards each snapshot with locker, under
// the key LockScope.LockKey gives for the client's project and database and
// the collection (ScopeOf). It fails when that key cannot be formed: an
// unknown project on a lock backend other than Firestore's.
func NewWriter(client *firestore.Client, locker locking.Backend, opts ...Option) (*Writer, error) {
	cfg := config{
		collection:  DefaultCollection,
		batchSize:   DefaultBatchSize,
		concurrency: DefaultConcurrency,
		retry:       retry.DefaultPolicy(),
		lockTTL:     DefaultLockTTL,
		lockWait:    DefaultLockWait,
		reqTimeout:  DefaultRequestTimeout,
		contention:  DefaultContentionWait,
		grace:       DefaultGracePeriod,
		recordEvery: DefaultRecordInterval,
		inlineBegin: true,
		log:         zap.NewNop(),
		now:         time.Now,

		pageThreshold: defaultPageThreshold,
		pageSize:      defaultPageSize,
	}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case client == nil || locker == nil:
		return nil, errors.New("snapshot: a Firestore client and a lock backend are required")
	case cfg.collection == "" || strings.Contains(cfg.collection, "/"):
		return nil, fmt.Errorf("snapshot: invalid collection name %q", cfg.collection)
	case cfg.batchSize < 1 || cfg.batchSize > 500:
		return nil, fmt.Errorf("snapshot: batch size %d is outside 1..500", cfg.batchSize)
	case cfg.concurrency < 1:
		return nil, fmt.Errorf("snapshot: concurrency %d must be at least 1", cfg.concurrency)
	case cfg.lockTTL < 3*time.Millisecond:
		return nil, fmt.Errorf("snapshot: lock TTL %s is too short", cfg.lockTTL)
	case cfg.lockWait < 0:
		return nil, fmt.Errorf("snapshot: lock wait %s is negative", cfg.lockWait)
	case cfg.reqTimeout <= 0:
		return nil, fmt.Errorf("snapshot: request timeout %s must be positive", cfg.reqTimeout)
	case cfg.grace < 0:
		return nil, fmt.Errorf("snapshot: grace period %s is negative", cfg.grace)
	case cfg.recordEvery <= 0:
		return nil, fmt.Errorf("snapshot: record interval %s must be positive", cfg.recordEvery)
	case cfg.contention < 0:
		return nil, fmt.Errorf("snapshot: contention wait %s is negative", cfg.contention)
	}
	cfg.retry.ContentionWait = cfg.contention
	if err := cfg.retry.Validate(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	lockName := locker.Capabilities().Backend
	scope, err := ScopeOf(client, cfg.collection)
	if err == nil {
		err = scope.validate(lockName)
	}
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	w := &Writer{client: client, locker: locker, cfg: cfg, lockName: lockName, scope: scope, api: cfg.api}
	if w.api == nil {
		if w.api, err = DialAPI(context.Background(), os.Getenv(emulatorHostEnv)); err != nil {
			return nil, fmt.Errorf("snapshot: opening the Firestore API client: %w", err)
		}
		w.ownAPI = true
	}
	return w, nil
}

// Close closes the Firestore API client NewWriter opened (none when one
// was given with WithAPIClient). The firestore.Client and the lock backend
// stay open: they are the caller's.
func (w *Writer) Close() error {
	if !w.ownAPI {
		return nil
	}
	return w.api.Close()
}

// Write stores snap under id: lock, root, chunks, finish, unlock. It
// returns nil when the snapshot is complete (written, or skipped as
// WithSkipComplete allows), and a Result whenever the root was attempted.
//
// A write that did not complete says why, for errors.Is: ErrPartial (some
// districts were not written; the manifest records which, and Repair
// completes them — with ErrLockLost too when the lease ended mid-write and
// nobody else wrote), ErrFencedOut (a newer writer took over),
// ErrManifestNotRecorded (the outcome could not be stored;
// Result.ManifestRecorded is false), ErrRootFailed, ErrLockHeld, ErrTimeout.
func (w *Writer) Write(ctx context.Context, id string, snap *model.Snapshot) (*Result, error) {
	return w.run(ctx, opWrite, id, snap)
}

// newInput is what a write or repair by the job's lease builds its
// documents from: every district's document size and hash, and the
// payload's hash. The documents themselves are built chunk by chunk
// (document), so that a write never holds more than its chunks in flight.
func (j *job) newInput(id string, snap *model.Snapshot, start time.Time) (rootInput, error) {
	n := len(snap.Payload.Districts)
	in := rootInput{id: id, snap: snap, fence: j.lease.Fence(), backend: j.w.lockName, keyHash: locking.HashKey(j.lease.Key()), startedAt: start,
		docSizes: make(map[string]int, n), hashes: make(map[string]string, n), dataHashes: make(map[string]string, n), opBytes: make(map[string]int, n)}
	sums, err := summarizeDistricts(snap, in.fence)
	if err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	for i, d := range snap.Payload.Districts {
		s := sums[i]
		in.docSizes[d.DistrictID], in.opBytes[d.DistrictID] = s.size, s.bytes
		in.hashes[d.DistrictID], in.dataHashes[d.DistrictID] = s.hash, s.dataHash
	}
	if in.payloadHash, err = payloadHash(snap); err != nil {
		return in, fmt.Errorf("snapshot %s: %w", id, err)
	}
	return in, nil
}

// write is Write once the lock is held: root, chunks, finish — or, when
// the stored snapshot is an unfinished write of this same input (a writer
// killed, or a partial write), its completion: the districts it stored
// are recorded as they are, and only what is missing is written.
func (j *job) write() error {
	return j.writeAll(!j.in.repairing)
}

// resumable reports whether stored root data of in's snapshot is an
// unfinished write (in progress when its writer died, or partial) of the
// same input, by the same lock backend and key: then Write need not write
// again what it stored.
func resumable(root map[string]any, in rootInput) bool {
	md := asMap(root["metadata"])
	str := func(k string) string { v, _ := md[k].(string); return v }
	return currentForm(md) && !writtenWhole(md) && str("payloadHash") == in.payloadHash &&
		str("writerLockBackend") == in.backend && str("writerLockKeyHash") == in.keyHash
}

// errResume ends a root transaction that found an unfinished write of the
// same input stored (resumable): the write completes it instead.
var errResume = errors.New("the stored snapshot is an unfinished write of this input")

// writeAll writes the whole snapshot: root, chunks, finish — unless resume
// and the root transaction finds an unfinished write of the same input
// stored, which it then completes (complete).
func (j *job) writeAll(resume bool) error {
	rootRes, err := j.writeRoot(resume)
	switch {
	case errors.Is(err, errResume):
		j.log.Info("the stored snapshot is an unfinished write of this input; keeping the districts it stored")
		return j.complete(true)
	case errors.Is(err, errSkip):
		j.skip("stored snapshot is complete; skipped")
		return nil
	}
	j.log = j.log.With(zap.String("fence", j.in.fence))
	if err := j.startResult(&rootRes, err); err != nil {
		return err
	}
	if j.w.cfg.beforeChunks != nil {
		j.w.cfg.beforeChunks(j.wctx)
	}
	return j.writeDistricts(j.in.ops(nil))
}

// skip makes the Result of a write or repair that found the snapshot
// complete and wrote nothing.
func (j *job) skip(msg string) {
	j.log.Info(msg)
	j.res = &Result{SnapshotID: j.in.id, Skipped: true, Complete: true, ManifestRecorded: true, FailedDistricts: []string{},
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
		return fmt.Errorf("snapshot %s: %w while the root document's commit was in flight: it may have been written, as a write in progress with no district written yet — rerun the write, which completes it (%w)",
			j.in.id, ErrLockLost, lost)
	}
	j.log.Warn("lost the lock before the root document was written; nothing was written; rerun the write", zap.Error(lost))
	return fmt.Errorf("snapshot %s: %w before the root document was written: %w — the stored snapshot is as it was; rerun the write (%w)",
		j.in.id, ErrLockLost, ErrNothingWritten, lost)
}

// writeDistricts writes ops in chunks after the root, then records the
// outcome in the manifest: the rest of a write or repair.
func (j *job) writeDistricts(ops []op) error {
	out, err := j.commitChunks(ops)
	if err != nil {
		return err
	}
	finishErr := j.finish(out)
	if errors.Is(finishErr, errSuperseded) {
		// Fenced out in all but the root: see watchSuperseded.
		out.fenced, finishErr = true, nil
	}
	j.summarize()
	return j.conclude(finishErr, out.fenced)
}

// conclude is the error a write or repair that got as far as its chunks
// ends with, most telling first, and the log line that says so.
func (j *job) conclude(finishErr error, fenced bool) error {
	id, res, log := j.in.id, j.res, j.log
	lost := j.lease.Err()
	res.LockLost = lost != nil && !fenced && !errors.Is(finishErr, ErrFencedOut)
	switch {
	case errors.Is(finishErr, ErrFencedOut):
		log.Warn("fenced out: a newer writer has taken the snapshot over; nothing more was written", zap.Error(finishErr))
		return fmt.Errorf("snapshot %s: %w", id, finishErr)
	case fenced:
		log.Warn("fenced out: a newer writer has taken the snapshot over; nothing more was written")
		return fmt.Errorf("snapshot %s: %w", id, ErrFencedOut)
	case finishErr != nil:
		err := fmt.Errorf("snapshot %s: %w: %w; the root still says the write is in progress — `snapwriter repair` (or writing it again) completes it",
			id, ErrManifestNotRecorded, finishErr)
		if lost != nil {
			err = fmt.Errorf("%w (and %w: %w)", err, ErrLockLost, lost)
		}
		log.Error("the manifest was not recorded: the root still says the write is in progress; repair or a rerun completes it",
			zap.Error(err), zap.Int("districtsWritten", res.DistrictsWritten), zap.Int("districtsNotConfirmed", len(res.FailedDistricts)))
		return err
	case lost != nil && !res.Complete:
		log.Warn("lost the lock mid-write; the manifest records what was written", zap.Error(lost))
		return fmt.Errorf("snapshot %s: %w: %w: %w; the manifest records what was written — `snapwriter repair` completes it", id, ErrPartial, ErrLockLost, lost)
	case lost != nil:
		// Every chunk and the finish passed the fence check: what is
		// stored is this writer's complete snapshot.
		log.Warn("lost the lock after every district was written; the snapshot is complete", zap.Error(lost))
	case j.ctx.Err() != nil && !res.Complete:
		return fmt.Errorf("snapshot %s: %w: stopped before every chunk was written: %w; the manifest records what was written — `snapwriter repair` completes it",
			id, ErrPartial, context.Cause(j.ctx))
	case !res.Complete:
		return fmt.Errorf("snapshot %s: %w: %d of %d chunks failed, %d districts not written (%s); the manifest records them — `snapwriter repair` completes it",
			id, ErrPartial, res.FailedBatches, res.TotalBatches, len(res.FailedDistricts), firstFailure(res))
	}
	return nil
}

func (w *Writer) root(id string) *firestore.DocumentRef {
	return w.client.Collection(w.cfg.collection).Doc(id)
}

// inTxn is fn as a job's retry runs it: one transaction per attempt (txn).
func (w *Writer) inTxn(fn func(context.Context, *firestore.Transaction) error) func(context.Context) error {
	return func(ctx context.Context) error { return w.txn(ctx, fn) }
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
	st, unsure, err := j.retry(j.wctx, j.w.cfg.retry, j.w.inTxn(func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if snap.Exists() {
			if j.w.cfg.skipComplete && isComplete(snap.Data()) {
				return retry.Permanent(errSkip)
			}
			if err := j.checkPrior(ctx, snap.Data()); err != nil {
				return retry.Permanent(err)
			}
			if resume && resumable(snap.Data(), *in) {
				return retry.Permanent(errResume)
			}
		}
		stored, err := j.w.storedPageIDs(tx, in.id)
		if err != nil {
			return err
		}
		if err := tx.Set(ref, doc); err != nil {
			return err
		}
		if err := j.w.setPages(tx, in.id, pages, stored); err != nil {
			return err
		}
		return j.setFence(tx, in.startedAt)
	}))
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	if err != nil {
		r.Err, r.unsure = err, unsure
		if errors.Is(err, errSkip) || errors.Is(err, errResume) {
			return r, err
		}
		if refusedByPrior(err) {
			return r, fmt.Errorf("snapshot %s: %w", in.id, err)
		}
		return r, fmt.Errorf("snapshot %s: %w: %w", in.id, ErrRootFailed, err)
	}
	r.Success = true
	j.rootCommits.Add(1)
	return r, nil
}

// errSkip ends a write that WithSkipComplete found nothing to do for.
var errSkip = errors.New("stored snapshot is complete")

// isComplete reports whether a stored root is a complete snapshot, as the
// application's readers take it: status "success" and writeComplete not
// false (roots of the application's writer may lack the flag), and no
// write at work on it.
func isComplete(root map[string]any) bool {
	md := asMap(root["metadata"])
	return md["status"] == statusSuccess && writtenWhole(md)
}
