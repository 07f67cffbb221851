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
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/batching"
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

// Defaults of a Writer: 50 operations per chunk, 3 chunks in flight.
const (
	DefaultCollection  = "snapshots"
	DefaultBatchSize   = 50
	DefaultConcurrency = 3
	DefaultLockTTL     = 30 * time.Second
	DefaultLockWait    = 30 * time.Second
	// DefaultContentionWait outlasts Firestore's 60 s expiry of an idle
	// transaction: a writer that died mid-chunk leaves its transaction's
	// lock on the root document until then.
	DefaultContentionWait = 90 * time.Second
	// DefaultRequestTimeout bounds how long acquiring the lock may wait for
	// the lock store to answer, beyond the lock wait.
	DefaultRequestTimeout = 30 * time.Second
	// DefaultGracePeriod leaves room, inside Cloud Run's 10 s between
	// SIGTERM and SIGKILL, for the manifest and the lock release after the
	// chunks in flight.
	DefaultGracePeriod = 5 * time.Second
	// DefaultRecordInterval is how often, at most, a write records the
	// chunks' progress in the root document: Firestore serialises commits
	// to one document, so the root is written about once a second however
	// many chunks are in flight.
	DefaultRecordInterval = time.Second
	// maxCommitBytes keeps one commit under Firestore's 10 MiB request limit.
	maxCommitBytes = 9 << 20
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

type config struct {
	collection   string
	batchSize    int
	concurrency  int
	retry        retry.Policy
	lockTTL      time.Duration
	lockWait     time.Duration
	reqTimeout   time.Duration
	contention   time.Duration
	grace        time.Duration
	skipComplete bool
	recordEvery  time.Duration
	// rewriteChanged: Repair re-writes what differs from the input
	// instead of refusing it.
	rewriteChanged bool
	log            *zap.Logger
	allowSwitch    bool
	api            *vkit.Client
	inlineBegin    bool
	now            func() time.Time
	beforeChunks   func(wctx context.Context) // test hook: runs between the root commit and the chunks
	// pageThreshold: the largest estimated root whose manifest stays
	// inline; pageSize: entries per manifest page beyond it (see paginate).
	pageThreshold int
	pageSize      int
}

// Option configures a Writer.
type Option func(*config)

// WithCollection sets the root collection (default "snapshots").
func WithCollection(name string) Option { return func(c *config) { c.collection = name } }

// WithBatchSize sets the operations per chunk (default 50, at most 500).
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithConcurrency sets how many chunks are in flight at once, at most
// (default 3). A write starts at one and adds one a round trip while the
// store answers without queueing, and runs fewer while its answers or the
// lock's renewals slow down, so that the lease is renewed in time
// (Result.LockRenewals; docs/lease.md).
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithRetryPolicy sets the per-chunk retry policy (default retry.DefaultPolicy).
func WithRetryPolicy(p retry.Policy) Option { return func(c *config) { c.retry = p } }

// WithLockTTL sets the lock's time to live; the lease renews it every TTL/3.
func WithLockTTL(d time.Duration) Option { return func(c *config) { c.lockTTL = d } }

// WithLockWait bounds how long Write waits for a held lock (0: try once).
func WithLockWait(d time.Duration) Option { return func(c *config) { c.lockWait = d } }

// WithContentionWait sets how long a transaction that finds a document
// locked by another transaction keeps retrying (default 90 s). It replaces
// the retry policy's ContentionWait: the root, finish and repair
// transactions and the chunks all use it, while the lease keeps the lock.
func WithContentionWait(d time.Duration) Option { return func(c *config) { c.contention = d } }

// WithRequestTimeout bounds how long Write waits for the lock store to
// answer (default 30 s): acquiring the lock gives up after the lock wait
// plus d with an error wrapping ErrTimeout, so an unreachable store fails
// the write instead of hanging it.
func WithRequestTimeout(d time.Duration) Option { return func(c *config) { c.reqTimeout = d } }

// WithGracePeriod sets how long chunks already in flight may run on after
// the write's context ends (default 5 s). A write whose context ends starts
// no new chunk, lets the running ones finish within the grace period,
// records in the manifest what was and was not written, and releases the
// lock, so an interrupted write is partial and exact, never unknown.
func WithGracePeriod(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithRecordInterval sets how often, at most, the write records its
// chunks' progress in the root document (default 1 s). Chunks never write
// the root: one recorder per write commits every outcome since its last
// record in one fenced transaction, so the root is written about once per
// interval whatever the concurrency, and lags the district documents by
// at most one interval plus one commit.
func WithRecordInterval(d time.Duration) Option { return func(c *config) { c.recordEvery = d } }

// WithSkipComplete makes Write leave a snapshot alone when the stored one is
// complete. The check runs inside the root transaction, under the lock, so
// two writers racing over the same date write it once.
func WithSkipComplete(skip bool) Option { return func(c *config) { c.skipComplete = skip } }

// WithRewriteChanged makes Repair re-write the districts whose stored data
// differs from the input (and the whole snapshot when the root payload
// does) instead of refusing with ErrMismatch.
func WithRewriteChanged(rewrite bool) Option { return func(c *config) { c.rewriteChanged = rewrite } }

// WithAPIClient sets the Firestore API client the district chunks'
// transactions run on: each chunk's fence read begins its transaction,
// which saves a round trip per chunk over the Firestore client's
// transactions. It must reach the same database as the Writer's
// firestore.Client: open both with the same options, or on one connection
// (option.WithGRPCConn). Without it NewWriter opens one as
// firestore.NewClient does by default: the emulator named by
// FIRESTORE_EMULATOR_HOST, else Firestore with Application Default
// Credentials. The caller closes a client it passed.
func WithAPIClient(c *vkit.Client) Option { return func(cfg *config) { cfg.api = c } }

// WithInlineBegin sets whether each chunk's fence read begins its
// transaction (the default: two round trips a chunk, the read and the
// commit) or a BeginTransaction call does first (three). When the answer
// to an inline read is lost to a broken connection, the transaction it
// began cannot be rolled back, and it keeps its read of the snapshot's
// fence document until Firestore expires it (about 60 s). Nothing a write
// does needs that document exclusively then — chunks and progress records
// only read it — except a finish that must settle a chunk commit of
// unknown outcome, which waits it out within the contention wait. Begun
// apart, every transaction can be rolled back at once.
func WithInlineBegin(inline bool) Option { return func(c *config) { c.inlineBegin = inline } }

// WithLogger sets the logger (default: none).
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.log = l } }

// WithAllowLockBackendSwitch lets a write replace a snapshot whose writer
// used another lock backend — the one-time step of migrating backends after
// every writer of the old one has stopped — or another lock key on this
// backend (ErrLockKeySwitch): either way its fence is not comparable with
// ours.
func WithAllowLockBackendSwitch(allow bool) Option {
	return func(c *config) { c.allowSwitch = allow }
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

// BatchResult is one chunk's outcome. Batch 0 is the root document.
type BatchResult struct {
	BatchIndex     int  `json:"batchIndex"`
	OperationCount int  `json:"operationCount"`
	Success        bool `json:"success"`
	RetryAttempts  int  `json:"retryAttempts"`
	// AbortedRetries counts the retries that followed an ABORTED answer
	// (contention: another transaction held a document this one needed).
	AbortedRetries int      `json:"abortedRetries"`
	DurationMs     int64    `json:"durationMs"`
	DistrictIDs    []string `json:"districtIds"`
	// Err is why the chunk failed (nil on success): match it with
	// errors.Is, e.g. against ErrFencedOut or context.Canceled, or a gRPC
	// status with status.Code. JSON renders it as its message, "error".
	Err     error `json:"-"`
	deletes int
	// unsure: a commit of this chunk may have been applied although no
	// attempt was seen to succeed; the finish reads its documents to decide.
	unsure    bool
	ops       []op
	committed time.Time // when the chunk's commit succeeded
}

// MarshalJSON renders Err as "error", its message, in the field order of
// the other results.
func (r BatchResult) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		BatchIndex     int      `json:"batchIndex"`
		OperationCount int      `json:"operationCount"`
		Success        bool     `json:"success"`
		RetryAttempts  int      `json:"retryAttempts"`
		AbortedRetries int      `json:"abortedRetries"`
		DurationMs     int64    `json:"durationMs"`
		Error          string   `json:"error,omitempty"`
		DistrictIDs    []string `json:"districtIds"`
	}{r.BatchIndex, r.OperationCount, r.Success, r.RetryAttempts, r.AbortedRetries, r.DurationMs, errText(r.Err), r.DistrictIDs})
}

// Result is what a write or repair did: its chunks, the districts written
// and not, and the fence it wrote under.
type Result struct {
	SnapshotID string `json:"snapshotId"`
	Complete   bool   `json:"complete"`
	// Skipped: WithSkipComplete found the stored snapshot complete, or
	// Repair found nothing to repair; nothing was written.
	Skipped           bool          `json:"skipped,omitempty"`
	TotalBatches      int           `json:"totalBatches"` // the root's transaction (batch 0) and the chunks
	SuccessfulBatches int           `json:"successfulBatches"`
	FailedBatches     int           `json:"failedBatches"`
	Chunks            int           `json:"chunks"` // the district chunks alone; Root reports batch 0
	SuccessfulChunks  int           `json:"successfulChunks"`
	FailedChunks      int           `json:"failedChunks"`
	DistrictsWritten  int           `json:"districtsWritten"`
	FailedDistricts   []string      `json:"failedDistricts"`
	StaleDeleted      int           `json:"staleDistrictsDeleted"`
	TotalDurationMs   int64         `json:"totalDurationMs"`
	Fence             string        `json:"fence"`
	BatchResults      []BatchResult `json:"batchResults"`
	// ManifestRecorded: the root document records this outcome (or, for a
	// skipped write, already recorded a complete one). When false, the
	// root still describes a write in progress and the lists above are
	// this process's own account; Repair completes the snapshot.
	ManifestRecorded bool `json:"manifestRecorded"`
	// LockLost: the lease ended mid-write, without a newer writer.
	LockLost bool `json:"lockLost,omitempty"`
	// DistrictsKept counts the districts a repair, or a write resuming an
	// unfinished write of the same input, found stored intact and recorded
	// without writing them again.
	DistrictsKept int `json:"districtsKept,omitempty"`
	// RootCommits counts the commits of this write that wrote the root
	// document — the root transaction, the progress records and the
	// finish: Firestore serialises commits to one document and rewrites
	// it whole, so this is what a write costs its hottest document. It
	// stays within the write's seconds + 5.
	RootCommits int `json:"rootCommits"`
	// LockWaitMs is how long acquiring the snapshot's lock took.
	LockWaitMs int64 `json:"lockWaitMs"`
	// LockRenewals is how the lock's renewals went during the write, and
	// whether it ran fewer chunks at once to keep them fast (shedding).
	LockRenewals LockRenewals `json:"lockRenewals"`
}

// op is one write of a chunk: a district set or a stale district delete.
// A set's document is built when its chunk is written, and not kept.
type op struct {
	districtID string
	district   *model.DistrictStatistics // the district to set; nil: delete
	bytes      int
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
	return w.run(ctx, "write", id, snap, w.write)
}

// run is the common part of Write and Repair: validate snap before any
// I/O, take the snapshot's lock, build the documents, run op under the
// lock (see begin for ctx and wctx) and release the lock after.
func (w *Writer) run(ctx context.Context, op, id string, snap *model.Snapshot,
	body func(ctx, wctx context.Context, lease *locking.Lease, in rootInput, log *zap.Logger) (*Result, error)) (*Result, error) {
	data, err := model.Prepare(snap, id)
	if err != nil {
		return nil, err
	}
	start := w.cfg.now()
	log := w.cfg.log.With(zap.String("snapshotId", id), zap.String("op", op))
	shed := newShedder(w.cfg.concurrency, w.cfg.lockTTL, log)
	lease, wctx, end, err := w.begin(ctx, id, log, shed.renewed)
	if err != nil {
		return nil, err
	}
	defer end()
	shed.start(time.Now())
	defer shed.stop()
	lockWait := w.cfg.now().Sub(start)
	in, err := w.newInput(id, snap, data, lease, start)
	if err != nil {
		return nil, err
	}
	in.lockWait, in.shed = lockWait, shed
	w.paginate(&in)
	return body(ctx, wctx, lease, in, log)
}

// newInput is what a write or repair by this lease builds its documents
// from: every district's document size and hash, from its data's (data,
// model.Prepare), and the payload's hash. The documents themselves are
// built chunk by chunk (document), so that a write never holds more than
// its chunks in flight.
func (w *Writer) newInput(id string, snap *model.Snapshot, data []model.DataSummary, lease *locking.Lease, start time.Time) (rootInput, error) {
	n := len(snap.Payload.Districts)
	in := rootInput{id: id, snap: snap, fence: lease.Fence(), backend: w.lockName, keyHash: locking.HashKey(lease.Key()), startedAt: start,
		docSizes: make(map[string]int, n), hashes: make(map[string]string, n), dataHashes: make(map[string]string, n), opBytes: make(map[string]int, n),
		contended: new(atomic.Bool), rootCommits: new(atomic.Int32)}
	sums, err := summarizeDistricts(snap, data, in.fence)
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

// write is Write once the lock is held: root, chunks, finish — or, when
// the stored snapshot is an unfinished write of this same input (a writer
// killed, or a partial write), its completion: the districts it stored
// are recorded as they are, and only what is missing is written.
func (w *Writer) write(ctx, wctx context.Context, lease *locking.Lease, in rootInput, log *zap.Logger) (*Result, error) {
	return w.writeAll(ctx, wctx, lease, in, !in.repairing, log)
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
func (w *Writer) writeAll(ctx, wctx context.Context, lease *locking.Lease, in rootInput, resume bool, log *zap.Logger) (*Result, error) {
	rootRes, err := w.writeRoot(wctx, in, resume, log)
	switch {
	case errors.Is(err, errResume):
		log.Info("the stored snapshot is an unfinished write of this input; keeping the districts it stored")
		return w.complete(ctx, wctx, lease, in, true, log)
	case errors.Is(err, errSkip):
		return w.skipped(in, log, "stored snapshot is complete; skipped"), nil
	}
	log = log.With(zap.String("fence", in.fence))
	res, err := w.rooted(in, lease, &rootRes, err, log)
	if err != nil {
		return res, err
	}
	if w.cfg.beforeChunks != nil {
		w.cfg.beforeChunks(wctx)
	}
	return w.districts(ctx, wctx, lease, in, in.ops(nil), res, log)
}

// skipped is the Result of a write or repair that found the snapshot
// complete and wrote nothing.
func (w *Writer) skipped(in rootInput, log *zap.Logger, msg string) *Result {
	log.Info(msg)
	return &Result{SnapshotID: in.id, Skipped: true, Complete: true, ManifestRecorded: true, FailedDistricts: []string{},
		TotalDurationMs: w.cfg.now().Sub(in.startedAt).Milliseconds(), LockWaitMs: in.lockWait.Milliseconds()}
}

// rooted starts the Result of a write or repair from its root transaction
// (nil when it never ran) and that transaction's error.
func (w *Writer) rooted(in rootInput, lease *locking.Lease, rootRes *BatchResult, err error, log *zap.Logger) (*Result, error) {
	res := &Result{SnapshotID: in.id, Fence: in.fence, FailedDistricts: []string{}}
	if rootRes != nil {
		res.BatchResults = append(res.BatchResults, *rootRes)
		logBatch(log, *rootRes)
	}
	if err != nil {
		if rootRes != nil {
			w.summarize(log, res, in)
		}
		if lost := lease.Err(); lost != nil && errors.Is(err, ErrRootFailed) && errors.Is(err, locking.ErrLeaseLost) {
			return res, w.lostBeforeRoot(in.id, rootRes != nil && rootRes.unsure, lost, log)
		}
		return res, w.leaseErr(lease, err)
	}
	return res, nil
}

// lostBeforeRoot is the error of a write or repair whose lease was lost
// before its root transaction committed, which the loss stopped: no
// district was attempted, and the stored snapshot is as it was — unless
// the root's commit was in flight (unsure), when it may have been written
// as a write in progress with no district yet, which a rerun completes.
// Either way it is not a failure of the root (ErrRootFailed): it matches
// ErrLockLost, and ErrNothingWritten when nothing was.
func (w *Writer) lostBeforeRoot(id string, unsure bool, lost error, log *zap.Logger) error {
	if unsure {
		log.Warn("lost the lock while the root document's commit was in flight; it may have been written, with no district; rerun the write", zap.Error(lost))
		return fmt.Errorf("snapshot %s: %w while the root document's commit was in flight: it may have been written, as a write in progress with no district written yet — rerun the write, which completes it (%w)",
			id, ErrLockLost, lost)
	}
	log.Warn("lost the lock before the root document was written; nothing was written; rerun the write", zap.Error(lost))
	return fmt.Errorf("snapshot %s: %w before the root document was written: %w — the stored snapshot is as it was; rerun the write (%w)",
		id, ErrLockLost, ErrNothingWritten, lost)
}

// districts writes ops in chunks after the root, then records the outcome
// in the manifest: the rest of a write or repair.
func (w *Writer) districts(ctx, wctx context.Context, lease *locking.Lease, in rootInput, ops []op, res *Result, log *zap.Logger) (*Result, error) {
	out, err := w.writeDistricts(ctx, wctx, in, ops, res, log)
	if err != nil {
		return res, err
	}
	var superseded atomic.Bool
	in.superseded = &superseded
	stop := w.watchSuperseded(ctx, lease, &superseded)
	// Already superseded, the finish's first attempt ends it (attemptWith).
	finishErr := w.finishing(ctx, log, func(ctx context.Context) error { return w.finish(ctx, in, res, out, log) })
	stop()
	if errors.Is(finishErr, errSuperseded) {
		// Fenced out in all but the root: see watchSuperseded.
		out.fenced, finishErr = true, nil
	}
	w.summarize(log, res, in)
	return res, w.ending(ctx, in.id, res, lease, finishErr, out.fenced, log)
}

// errSuperseded ends a finish whose lease, already lost, has passed to a
// newer holder.
var errSuperseded = errors.New("the lock has passed to a newer writer")

// supersededPoll is how often a writer whose lease is lost asks the lock
// store, while it records its manifest, whether a newer writer holds the
// lock.
const supersededPoll = time.Second

// watchSuperseded sets superseded once the lease, already lost, has passed
// to a newer holder: the lock on the snapshot's key is held under a higher
// fence. That writer is about to write the root (or waiting to), so this
// one's finish would only contend with its root transaction for the fence
// and root documents — on the emulator the two kept aborting each other
// for the whole contention wait, and the newer writer gave up (chaos row
// 4) — and the fence check would refuse the finish once the newer root
// landed. A superseded writer leaves the snapshot to the newer one, as a
// fenced-out writer does; its root says writing, recording no more than
// was written, until the newer writer replaces it (or a repair completes
// it). The store is asked once before it returns, so that a writer already
// superseded makes no attempt of its finish, then every supersededPoll (a
// partition may hide the newer holder at first, and the finish retries
// contention for minutes); lookups that fail decide nothing. The finish
// stops between attempts (attemptWith), never inside one: a transaction
// cut off by a cancelled context is not rolled back, and would hold its
// reads for Firestore's 60 s against the newer writer. stop ends the
// watch.
func (w *Writer) watchSuperseded(ctx context.Context, lease *locking.Lease, superseded *atomic.Bool) (stop func()) {
	if lease.Err() == nil || lease.Fence() == "" {
		return func() {}
	}
	newer := func(ctx context.Context) bool {
		lctx, lcancel := context.WithTimeout(ctx, 2*supersededPoll)
		defer lcancel()
		info, err := locking.GetByKey(lctx, w.locker, lease.Key())
		// Fences are fixed-width digit strings: they compare as strings.
		return err == nil && info != nil && info.Fence > lease.Fence()
	}
	wctx, end := context.WithCancel(context.WithoutCancel(ctx))
	if newer(wctx) {
		superseded.Store(true)
		end()
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(supersededPoll)
		defer tick.Stop()
		for {
			select {
			case <-wctx.Done():
				return
			case <-tick.C:
			}
			if newer(wctx) {
				superseded.Store(true)
				return
			}
		}
	}()
	return func() { end(); <-done }
}

// finishing runs the finish of a write or repair. It runs even when ctx was
// cancelled or the lease lost: the manifest must say what happened, and its
// fence check keeps it from touching a newer writer's snapshot.
func (w *Writer) finishing(ctx context.Context, log *zap.Logger, finish func(context.Context) error) error {
	log.Info("recording the manifest")
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.finishTimeout())
	defer cancel()
	return finish(fctx)
}

// begin takes the snapshot's lock; onRenewal learns of each of its
// renewals. The work of the write runs under the
// returned context: ctx ending stops new chunks, and this context, which
// the work in flight runs under, ends a grace period later, or at once if
// the lease is lost. end cancels it and releases the lock.
func (w *Writer) begin(ctx context.Context, id string, log *zap.Logger, onRenewal func(locking.RenewalStat)) (*locking.Lease, context.Context, func(), error) {
	t0 := time.Now()
	// The lock retry policy ends the wait; this bound is a backstop: the
	// lock wait, or the contention wait if a stalled transaction began
	// just before its end, plus one attempt.
	bound := w.cfg.lockWait + w.cfg.contention + w.cfg.reqTimeout
	actx, acancel := context.WithTimeoutCause(ctx, bound,
		fmt.Errorf("%w within %s: %w", ErrTimeout, bound, context.DeadlineExceeded))
	defer acancel()
	key, err := w.scope.LockKey(w.lockName, id)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	lease, err := locking.Acquire(actx, w.locker, key,
		locking.WithTTL(w.cfg.lockTTL), locking.WithRetry(w.lockRetry()), locking.OnRenewal(onRenewal))
	if err != nil {
		switch {
		case errors.Is(err, locking.ErrAcquisitionTimeout):
			return nil, nil, nil, fmt.Errorf("snapshot %s: %w", id, ErrLockHeld)
		case errors.Is(err, locking.ErrContended):
			return nil, nil, nil, fmt.Errorf("snapshot %s: acquiring the snapshot lock: the lock document stayed locked by another transaction "+
				"(a writer killed mid-transaction? Firestore frees it within 60 s) for the contention wait, %s: %w", id, w.cfg.contention, err)
		case ctx.Err() == nil && actx.Err() != nil:
			return nil, nil, nil, fmt.Errorf("snapshot %s: acquiring the snapshot lock: %w", id, context.Cause(actx))
		}
		return nil, nil, nil, fmt.Errorf("snapshot %s: acquiring the snapshot lock: %w", id, err)
	}
	log.Info("snapshot lock acquired", zap.String("fence", lease.Fence()),
		zap.String("keyHash", locking.HashKey(lease.Key())), zap.Int64("lockWaitMs", time.Since(t0).Milliseconds()))
	gctx, gcancel := graceful(ctx, w.cfg.grace)
	wctx, cancel := lease.Context(gctx)
	return lease, wctx, func() {
		cancel()
		gcancel()
		// Detached from ctx: a cancelled write must still hand the lock back.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		if err := lease.Release(rctx); err != nil && !errors.Is(err, locking.ErrLeaseLost) {
			log.Warn("releasing snapshot lock failed; it expires with its TTL", zap.Error(err))
		}
	}, nil
}

// ending is the error a write or repair that got as far as its chunks ends
// with, most telling first, and the log line that says so.
func (w *Writer) ending(ctx context.Context, id string, res *Result, lease *locking.Lease, finishErr error, fenced bool, log *zap.Logger) error {
	lost := lease.Err()
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
	case ctx.Err() != nil && !res.Complete:
		return fmt.Errorf("snapshot %s: %w: stopped before every chunk was written: %w; the manifest records what was written — `snapwriter repair` completes it",
			id, ErrPartial, context.Cause(ctx))
	case !res.Complete:
		return fmt.Errorf("snapshot %s: %w: %d of %d chunks failed, %d districts not written (%s); the manifest records them — `snapwriter repair` completes it",
			id, ErrPartial, res.FailedChunks, res.Chunks, len(res.FailedDistricts), firstFailure(res))
	}
	return nil
}

// firstFailure says which chunk failed first, and why: its error names
// what did not answer in time (its commit, within the retry policy's
// attempt timeout) or what refused it.
func firstFailure(res *Result) string {
	for _, b := range res.BatchResults {
		if !b.Success && b.Err != nil {
			return fmt.Sprintf("the first, chunk %d: %v", b.BatchIndex, b.Err)
		}
	}
	return "chunks whose outcome could not be confirmed"
}

// districtOutcome is what the chunks of a write or repair did, per district.
type districtOutcome struct {
	status, msgs map[string]string // district → manifest entry status, error message
	times        map[string]string // district → when its chunk committed (isoMillis)
	fenced       bool              // a chunk was refused for a newer fence
}

// writeDistricts adds deletes of the stale district documents to ops,
// commits them all in chunks (starting chunks only while ctx is live,
// running them under wctx), and records the outcome in res.
func (w *Writer) writeDistricts(ctx, wctx context.Context, in rootInput, ops []op, res *Result, log *zap.Logger) (districtOutcome, error) {
	stale, err := w.staleDistricts(wctx, in.id, in.snap)
	if err != nil {
		log.Warn("listing stale district documents failed; they are left in place", zap.Error(err))
	}
	for _, sid := range stale {
		ops = append(ops, op{districtID: sid, bytes: 256})
	}
	chunks, err := batching.Plan(ops, func(o op) (int, int) { return 1, o.bytes },
		batching.Limits{MaxOps: w.cfg.batchSize, MaxBytes: maxCommitBytes})
	if err != nil {
		return districtOutcome{}, fmt.Errorf("snapshot %s: planning chunks: %w", in.id, err)
	}
	first := len(res.BatchResults)
	rec := w.startRecorder(wctx, in, log)
	results := batching.Run(ctx, chunks, w.cfg.concurrency, func(ctx context.Context, i int, chunk []op) BatchResult {
		// Fewer at once while the store answers slowly (shedder).
		var epoch int
		admitted := false
		if in.shed != nil {
			if epoch, admitted = in.shed.enter(ctx, wctx); admitted {
				defer in.shed.leave()
			}
		}
		t0 := time.Now()
		r := w.writeChunk(ctx, wctx, in, first+i, chunk, log)
		if admitted && r.Success {
			in.shed.committed(time.Since(t0), epoch)
		}
		if r.Success {
			rec.add(r.DistrictIDs, r.committed)
		}
		logBatch(log, r)
		return r
	})
	rec.close()
	res.BatchResults = append(res.BatchResults, results...)
	w.tally(res)
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
				out.times[d] = isoMillis(r.committed)
			}
		}
	}
	return out
}

// lockRetry waits up to the lock wait for a held lock (or a lock backend
// failing transiently), with the lock library's default backoff; a lock
// wait of 0 makes a single attempt. A lock document locked by a dead
// transaction (a writer killed inside a lease extension) is waited out for
// the contention wait, as the root's is, and each attempt is bounded by the
// request timeout, so that a store that does not answer ends the wait.
func (w *Writer) lockRetry() locking.RetryPolicy {
	p := locking.DefaultRetryPolicy()
	p.MaxRetries = 0 // bounded by the wait, not a count
	// Waits of at most 4 s, so a lock freed or a dead transaction expired
	// is taken within 4 s, not after a wait grown to a minute.
	p.Max = 4 * time.Second
	p.Timeout = w.cfg.lockWait
	p.ContentionWait = w.cfg.contention
	p.AttemptTimeout = w.cfg.reqTimeout
	return p
}

// finishTimeout bounds the finish: long enough to outlast a stalled
// transaction (the contention wait) plus one attempt.
func (w *Writer) finishTimeout() time.Duration {
	return max(w.cfg.contention+w.cfg.retry.AttemptTimeout, time.Minute)
}

// leaseErr adds the lease's loss to a failure it caused.
func (w *Writer) leaseErr(lease *locking.Lease, err error) error {
	if lost := lease.Err(); lost != nil && !errors.Is(err, ErrFencedOut) {
		return fmt.Errorf("%w (%w: %w)", err, ErrLockLost, lost)
	}
	return err
}

func (w *Writer) root(id string) *firestore.DocumentRef {
	return w.client.Collection(w.cfg.collection).Doc(id)
}

// do runs fn as one transaction per attempt under the writer's retry
// policy (see attempt). unsure reports whether any attempt's commit had an
// unknown outcome.
func (w *Writer) do(ctx context.Context, in rootInput, log *zap.Logger, fn func(context.Context, *firestore.Transaction) error) (st retry.Stats, unsure bool, err error) {
	return w.attempt(ctx, in, log, func(ctx context.Context) error { return w.txn(ctx, fn) })
}

// attempt runs one transaction per call of try under the writer's retry
// policy. Contention (ABORTED) is retried for the contention wait, and the
// first time it happens in this write one WARNING says why. A commit whose
// outcome is unknown is retried as a fresh transaction: every write is a
// set or a delete, so repeating one that was applied changes nothing.
// unsure reports whether any attempt's commit had an unknown outcome.
func (w *Writer) attempt(ctx context.Context, in rootInput, log *zap.Logger, try func(context.Context) error) (st retry.Stats, unsure bool, err error) {
	return w.attemptWith(ctx, w.cfg.retry, in, log, try)
}

// attemptWith is attempt under policy p.
func (w *Writer) attemptWith(ctx context.Context, p retry.Policy, in rootInput, log *zap.Logger, try func(context.Context) error) (st retry.Stats, unsure bool, err error) {
	st, err = retry.Do(ctx, p, func(ctx context.Context) error {
		if in.superseded != nil && in.superseded.Load() {
			return retry.Permanent(errSuperseded)
		}
		err := try(ctx)
		unsure = unsure || errors.As(err, new(*unknownOutcome))
		return err
	}, retry.WithNotify(func(err error, wait time.Duration) {
		if status.Code(err) == codes.Aborted && in.contended.CompareAndSwap(false, true) {
			log.Warn("root locked by another transaction — a writer that stopped mid-chunk? Firestore releases it within 60 s; retrying",
				zap.Duration("contentionWait", w.cfg.contention), zap.Error(err))
		}
	}))
	return st, unsure, err
}

// writeRoot commits the root document in a transaction that refuses to
// replace a root written under a newer fence.
func (w *Writer) writeRoot(ctx context.Context, in rootInput, resume bool, log *zap.Logger) (BatchResult, error) {
	r := BatchResult{BatchIndex: 0, OperationCount: 1, DistrictIDs: []string{}}
	doc, pages, err := in.rootDoc()
	if err != nil {
		return r, err
	}
	ref := w.root(in.id)
	t0 := time.Now()
	st, unsure, err := w.do(ctx, in, log, func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		if snap.Exists() {
			if w.cfg.skipComplete && isComplete(snap.Data()) {
				return retry.Permanent(errSkip)
			}
			if err := w.checkPrior(ctx, snap.Data(), in); err != nil {
				return retry.Permanent(err)
			}
			if resume && resumable(snap.Data(), in) {
				return retry.Permanent(errResume)
			}
		}
		stored, err := w.storedPageIDs(tx, in.id)
		if err != nil {
			return err
		}
		if err := tx.Set(ref, doc); err != nil {
			return err
		}
		if err := w.setPages(tx, in.id, pages, stored); err != nil {
			return err
		}
		return w.setFence(tx, in, in.startedAt)
	})
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
	in.rootCommits.Add(1)
	return r, nil
}

// refusedByPrior reports whether err is checkPrior's refusal to replace the
// stored root, which is not a failure to write it.
func refusedByPrior(err error) bool {
	return errors.Is(err, ErrFencedOut) || errors.Is(err, ErrLockBackendSwitch) || errors.Is(err, ErrLockKeySwitch) ||
		errors.Is(err, ErrLockHeld)
}

// checkPrior decides whether a stored root may be replaced by this writer.
// Fence counters are per lock backend and per key, so the stored
// writerFence is compared with ours only when it was issued on our backend
// (writerLockBackend) and our key (writerLockKeyHash):
//
//   - another backend: ErrLockBackendSwitch, unless allowed;
//   - another key on our backend: ErrLockKeySwitch, unless allowed;
//   - a fence but no key: the root of a snapwriter from before keys named
//     the snapshot's document, whose fence counts on LegacyLockKey(id). It
//     is replaced (once: the new root records our key) unless a live lock
//     holds that key on our backend — a writer of that version at work —
//     which is ErrLockHeld (see checkLegacy);
//   - our key: ErrFencedOut when the stored fence is newer than ours.
func (w *Writer) checkPrior(ctx context.Context, data map[string]any, in rootInput) error {
	md := asMap(data["metadata"])
	storedBackend, _ := md["writerLockBackend"].(string)
	storedFence, _ := md["writerFence"].(string)
	storedKey, _ := md["writerLockKeyHash"].(string)
	ourKey := in.keyHash
	switch {
	case storedBackend != "" && storedBackend != in.backend:
		if w.cfg.allowSwitch {
			return nil
		}
		return fmt.Errorf("%w: stored by a %q-locked writer, this writer uses %q; stop every %s writer, then rerun once with --allow-lock-backend-switch",
			ErrLockBackendSwitch, storedBackend, in.backend, storedBackend)
	case storedKey == "" && storedFence != "":
		return w.checkLegacy(ctx, in.id)
	case storedKey != "" && storedKey != ourKey:
		if w.cfg.allowSwitch {
			return nil
		}
		return fmt.Errorf("%w: stored by a writer holding the lock key with hash %s, this writer's key has hash %s (another snapwriter version?), and fences of different keys are not comparable; stop every other writer of this snapshot, then rerun once with --allow-lock-backend-switch",
			ErrLockKeySwitch, storedKey, ourKey)
	}
	if fenceNewer(storedFence, in.fence) {
		return fmt.Errorf("%w: stored writerFence %s is newer than ours %s", ErrFencedOut, storedFence, in.fence)
	}
	return nil
}

// checkLegacy decides whether a root written under LegacyLockKey(id), by
// a snapwriter from before keys named the snapshot's document, may be
// replaced: only while no live lock holds that key on this writer's
// backend. Writers of that version do not take our key, so a live one
// would not be excluded by our lock; while one is at work on the snapshot
// this is ErrLockHeld. Its fence and ours count on different keys and are
// not compared.
func (w *Writer) checkLegacy(ctx context.Context, id string) error {
	key := LegacyLockKey(id)
	live, err := w.locker.IsLocked(ctx, key)
	if err != nil {
		return fmt.Errorf("checking the lock of earlier snapwriter versions on this snapshot (key hash %s): %w", locking.HashKey(key), err)
	}
	if live {
		return fmt.Errorf("%w: a writer of an earlier snapwriter version holds its lock on this snapshot's date (the key snapshot:<date>, hash %s), which our lock does not exclude; let it finish and stop every writer of that version, then rerun",
			ErrLockHeld, locking.HashKey(key))
	}
	return nil
}

// requireFence is the check the progress records and the finish make
// inside their transaction (chunks make it on the Firestore API, see
// fenceProblem): the snapshot must still carry this writer's fence. It
// reads the fence document, which every chunk reads too: a newer writer's
// root commit writes it, and so conflicts with the read.
func (w *Writer) requireFence(tx *firestore.Transaction, in rootInput) error {
	doc, err := tx.Get(w.fenceRef(in.id))
	if status.Code(err) == codes.NotFound {
		return retry.Permanent(fenceProblem(nil, in))
	}
	if err != nil {
		return err
	}
	md := doc.Data()
	f, _ := md["writerFence"].(string)
	b, _ := md["writerLockBackend"].(string)
	if err := fenceMismatch(f, b, in); err != nil {
		return retry.Permanent(err)
	}
	return nil
}

// fenceProblem is requireFence's check on the fence document as the
// Firestore API returns it (nil when it is missing).
func fenceProblem(doc *pb.Document, in rootInput) error {
	if doc == nil {
		return fmt.Errorf("%w: the snapshot's fence document is gone", ErrFencedOut)
	}
	f := doc.GetFields()
	return fenceMismatch(f["writerFence"].GetStringValue(), f["writerLockBackend"].GetStringValue(), in)
}

// fenceMismatch is ErrFencedOut unless the snapshot's fence document names
// this writer's fence and lock backend.
func fenceMismatch(fence, backend string, in rootInput) error {
	if fence != in.fence {
		return fmt.Errorf("%w: the snapshot carries writerFence %s, ours is %s", ErrFencedOut, fence, in.fence)
	}
	if backend != in.backend {
		return fmt.Errorf("%w: the snapshot was taken over by a %q-locked writer", ErrFencedOut, backend)
	}
	return nil
}

// fenceRef is snapshot id's fence document.
func (w *Writer) fenceRef(id string) *firestore.DocumentRef {
	return w.root(id).Collection(fenceCollection).Doc(fenceDocID)
}

// setFence adds to tx the write of the fence document with this writer's
// fence, as of at: every transaction that moves the root to this writer or
// records its outcome makes it, so chunk transactions in flight conflict.
func (w *Writer) setFence(tx *firestore.Transaction, in rootInput, at time.Time) error {
	return tx.Set(w.fenceRef(in.id), in.fenceDoc(at))
}

// writeChunk commits one chunk as a transaction that first verifies the
// fence, and writes the chunk's district documents and nothing else: no
// two chunks in flight write the same document, and none writes the root
// (the recorder does). The chunk starts only while start is live; once
// started it runs under ctx, which outlives start by the grace period. Its
// documents are encoded once, and every attempt commits the same messages:
// every write is a set or a delete, so an attempt that repeats one applied
// before (its outcome lost) changes nothing.
func (w *Writer) writeChunk(start, ctx context.Context, in rootInput, index int, chunk []op, log *zap.Logger) BatchResult {
	r := BatchResult{BatchIndex: index, OperationCount: len(chunk), DistrictIDs: []string{}, ops: chunk}
	for _, o := range chunk {
		if o.district != nil {
			r.DistrictIDs = append(r.DistrictIDs, o.districtID)
		} else {
			r.deletes++
		}
	}
	t0 := time.Now()
	for _, c := range []context.Context{start, ctx} {
		if c.Err() != nil {
			// Never started: the write was stopped or the lease lost.
			r.Err = fmt.Errorf("not attempted: %w", context.Cause(c))
			return r
		}
	}
	fenceName := w.fenceRef(in.id).Path
	var writes []*pb.Write // encoded once, during the first attempt's fence read
	encode := func() error {
		if writes != nil {
			return nil
		}
		var err error
		if writes, err = w.chunkWrites(in, chunk); err != nil {
			return retry.Permanent(err)
		}
		return nil
	}
	var prev []byte // the last attempt's transaction, when it was aborted
	st, unsure, err := w.attempt(ctx, in, log, func(ctx context.Context) error {
		if prev != nil {
			r.AbortedRetries++ // this attempt retries an aborted one
		}
		tid, err := w.chunkTxn(ctx, fenceName, prev, encode, func(fence *pb.Document) ([]*pb.Write, error) {
			if err := fenceProblem(fence, in); err != nil {
				return nil, retry.Permanent(err)
			}
			return writes, nil
		})
		prev = nil
		if status.Code(err) == codes.Aborted {
			prev = tid
		}
		return err
	})
	r.RetryAttempts, r.DurationMs = st.Retries, time.Since(t0).Milliseconds()
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		r.Err = err
		r.unsure = unsure && !errors.Is(err, ErrFencedOut)
		return r
	}
	r.Success, r.committed = true, time.Now()
	return r
}

// chunkWrites encodes a chunk's sets and deletes. Each district's
// document is built (its data read back from a lazily read input) and
// encoded in turn, so that only its encoding outlives this call.
func (w *Writer) chunkWrites(in rootInput, chunk []op) ([]*pb.Write, error) {
	districts := w.root(in.id).Collection("districts")
	writes := make([]*pb.Write, 0, len(chunk))
	for _, o := range chunk {
		name := districts.Doc(districtDocID(o.districtID)).Path
		if o.district == nil {
			writes = append(writes, deleteWrite(name))
			continue
		}
		doc, err := in.document(o)
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

// staleDistricts lists district documents of an earlier write of this
// snapshot that the new snapshot no longer has.
func (w *Writer) staleDistricts(ctx context.Context, id string, snap *model.Snapshot) ([]string, error) {
	keep := make(map[string]bool, len(snap.Payload.Districts))
	for _, d := range snap.Payload.Districts {
		keep[districtDocID(d.DistrictID)] = true
	}
	refs, err := w.root(id).Collection("districts").Select().Documents(ctx).GetAll()
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

// finish records the outcome in the root: manifest entries, lists,
// counts, status. Chunks whose outcome is unknown are decided inside the
// same transaction, by reading their documents, so the manifest it records
// is exact; it writes the fence document, so that no chunk commit still in
// flight can land after it.
func (w *Writer) finish(ctx context.Context, in rootInput, res *Result, out districtOutcome, log *zap.Logger) error {
	ref := w.root(in.id)
	var done Result
	// The finish retries transient failures until its own deadline (see
	// finishing), not --max-retries: a manifest not recorded leaves the
	// snapshot "in progress" until a repair, and on a connection reset
	// every second (chaos row 6) four attempts were not enough. Short
	// waits, so that more attempts fit.
	p := w.cfg.retry
	p.MaxRetries, p.Max = math.MaxInt32, min(p.Max, 4*time.Second)
	_, _, err := w.attemptWith(ctx, p, in, log, func(ctx context.Context) error {
		return w.txn(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if err := w.requireFence(tx, in); err != nil {
				return err
			}
			r, out, err := w.resolve(tx, in, res, out)
			if err != nil {
				return err
			}
			now := w.cfg.now()
			st := rootState{status: in.snap.Status, complete: r.Complete, entries: out.status, msgs: out.msgs, times: out.times, modified: now, finishedAt: now}
			for _, id := range districtIDs(in.snap) {
				st.complete = st.complete && in.stored(st, id)
			}
			if !st.complete {
				st.status = statusPartial
			}
			md, err := in.metadata(st)
			if err != nil {
				return retry.Permanent(err)
			}
			r.Complete = st.complete
			done = r
			mf, pages := in.split(in.manifest(st))
			if err := tx.Update(ref, []firestore.Update{{Path: "metadata", Value: md}, {Path: "manifest", Value: mf}}); err != nil {
				return err
			}
			if err := w.setPages(tx, in.id, pages, nil); err != nil {
				return err
			}
			if !anyUnsure(res) {
				return nil
			}
			// A chunk whose commit outcome is unknown may still land:
			// writing the fence document, which every chunk reads, makes
			// such a commit conflict with this one, so the outcome
			// recorded is exact. Only then: a chunk whose fence read
			// began its transaction and lost its answer holds that
			// document until Firestore expires the transaction (60 s),
			// and a finish writing it would wait as long.
			return w.setFence(tx, in, now)
		})
	})
	if err != nil {
		return err
	}
	in.rootCommits.Add(1)
	*res = done
	res.ManifestRecorded = true
	return nil
}

// anyUnsure reports whether a chunk of res has a commit of unknown outcome.
func anyUnsure(res *Result) bool {
	for _, b := range res.BatchResults {
		if b.unsure {
			return true
		}
	}
	return false
}

// tally fills the aggregate counts from the batch results (property 7).
func (w *Writer) tally(res *Result) {
	res.TotalBatches = len(res.BatchResults)
	res.SuccessfulBatches, res.FailedBatches, res.DistrictsWritten, res.StaleDeleted = 0, 0, 0, 0
	res.FailedDistricts = []string{}
	for _, r := range res.BatchResults {
		if r.Success {
			res.SuccessfulBatches++
			res.DistrictsWritten += len(r.DistrictIDs)
			res.StaleDeleted += r.deletes
		} else {
			res.FailedBatches++
			res.FailedDistricts = append(res.FailedDistricts, r.DistrictIDs...)
		}
	}
	res.Complete = res.FailedBatches == 0
	countChunks(res)
}

func (w *Writer) summarize(log *zap.Logger, res *Result, in rootInput) {
	if res.TotalBatches == 0 {
		w.tally(res)
	}
	res.TotalDurationMs = w.cfg.now().Sub(in.startedAt).Milliseconds()
	res.RootCommits, res.LockWaitMs = int(in.rootCommits.Load()), in.lockWait.Milliseconds()
	if in.shed != nil {
		res.LockRenewals = in.shed.summary()
	}
	lvl := zap.InfoLevel
	if !res.Complete {
		lvl = zap.WarnLevel
	}
	log.Log(lvl, "snapshot write finished",
		zap.Bool("complete", res.Complete),
		zap.Int("totalBatches", res.TotalBatches),
		zap.Int("successfulBatches", res.SuccessfulBatches),
		zap.Int("failedBatches", res.FailedBatches),
		zap.Int("districtsWritten", res.DistrictsWritten),
		zap.Strings("failedDistricts", res.FailedDistricts),
		zap.Int("staleDistrictsDeleted", res.StaleDeleted),
		zap.Int("rootCommits", res.RootCommits),
		zap.Int64("lockWaitMs", res.LockWaitMs),
		zap.Int("lockRenewals", res.LockRenewals.Count),
		zap.Int64("slowestLockRenewalMs", res.LockRenewals.SlowestMs),
		zap.Int("concurrencySheds", res.LockRenewals.Sheds),
		zap.Int("minConcurrency", res.LockRenewals.MinConcurrency),
		zap.Int("renewalPauses", res.LockRenewals.Pauses),
		zap.Int64("totalDurationMs", res.TotalDurationMs))
}

func logBatch(log *zap.Logger, r BatchResult) {
	fields := []zap.Field{
		zap.Int("batchIndex", r.BatchIndex),
		zap.Int("operationCount", r.OperationCount),
		zap.Bool("success", r.Success),
		zap.Int("retryAttempts", r.RetryAttempts),
		zap.Int64("durationMs", r.DurationMs),
		zap.Int("districts", len(r.DistrictIDs)),
	}
	if r.Err != nil {
		log.Warn("batch failed", append(fields, zap.String("error", r.Err.Error()))...)
		return
	}
	log.Info("batch committed", fields...)
}

// fenceNewer reports whether fence a is newer than b. Fences compare as
// equal-width decimal strings; a longer one is larger.
func fenceNewer(a, b string) bool {
	if len(a) != len(b) {
		return len(a) > len(b)
	}
	return a > b
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

// graceful returns a context that does not end with ctx but grace after it,
// with a cause naming both, and a function that releases its resources.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("grace period of %s over after %w", grace, context.Cause(ctx)))
		})
	})
	return gctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
