package snapshot

import (
	"context"
	"time"

	vkit "cloud.google.com/go/firestore/apiv1"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/retry"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
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
	progress       Progress // told the districts stored (WithProgress); nil: no one
	allowSwitch    bool
	api            *vkit.Client
	inlineBegin    bool
	now            func() time.Time
	beforeChunks   func(wctx context.Context) // test hook: runs between the root commit and the chunks
	// pageThreshold: the largest estimated root whose manifest stays
	// inline; pageSize: entries per manifest page beyond it (see paginate).
	pageThreshold int
	pageSize      int
	otel          otelOptions // WithTracerProvider, WithMeterProvider
	// maintenance pauses the writes' chunks at its notices (nil: never).
	maintenance *Maintenance
	// budget paces the district chunks (WithWriteBudget); configure makes
	// one when none was given.
	budget *pacing.Budget
	// gate, when set, checks a write's input against what readers have
	// before anything is written (WithGate).
	gate *gate.Options
}

// defaultConfig is a Writer's configuration before its options.
func defaultConfig() config {
	return config{
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

		pageThreshold: layout.DefaultPageThreshold,
		pageSize:      layout.DefaultPageSize,
	}
}

// Option configures a Writer; NewWriter refuses one out of its bounds
// (CheckOptions) with an *OptionError naming the Setting it sets.
type Option func(*config)

// WithCollection sets the root collection (default "snapshots").
func WithCollection(name string) Option { return func(c *config) { c.collection = name } }

// WithBatchSize sets the operations per chunk (default 50, at most
// MaxBatchSize). A chunk holds no more than a tenth of a second of the
// write budget's share either (pacing.Budget.MaxCommit): 50 at 500/s,
// 12 for each of four writers sharing it.
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithConcurrency sets how many chunks are in flight at once, at most
// (default 3, at most MaxConcurrency). A write starts at one and adds one a round trip while the
// store answers without queueing, and runs fewer while its answers or the
// lock's renewals slow down, so that the lease is renewed in time
// (Result.LockRenewals; docs/lease.md).
func WithConcurrency(n int) Option { return func(c *config) { c.concurrency = n } }

// WithRetryPolicy sets the per-chunk retry policy (default retry.DefaultPolicy).
func WithRetryPolicy(p retry.Policy) Option { return func(c *config) { c.retry = p } }

// WithLockTTL sets the lock's time to live (at least MinLockTTL); the
// lease renews it every TTL/3.
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
// chunks' progress in the root document (default 1 s, within
// MinRecordInterval..MaxRecordInterval). Chunks never write
// the root: one recorder per write commits every outcome since its last
// record in one fenced transaction, so the root is written about once per
// interval whatever the concurrency, and lags the district documents by
// at most one interval plus two commits (the record under way when a
// chunk committed, and the next).
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

// WithMaintenance makes every write, repair and prune of the Writer heed
// m's notices that the process is about to be paused (default: none): at
// a notice it starts no new chunk and renews its lock at once; when the
// pause ends it confirms the lock before the next chunk (see Maintenance).
// Give one Maintenance to every Writer of a process.
func WithMaintenance(m *Maintenance) Option { return func(c *config) { c.maintenance = m } }

// WithGate turns the publication gate on for Write (DESIGN.md §10): once
// the snapshot's lock is held and before anything is written, the input
// is checked against what readers have — the newest complete snapshot
// dated before it (the count rule: no live district may go missing) and,
// when the date is stored complete, that stored snapshot (the value rule:
// a changed district holds unless o.AllowValueChanges; a removed one
// always holds; at a month-end closing, the field classes of o.Policy
// bound the changes instead). A held write writes nothing and ends with a
// *HeldError (ErrHeld); Result.Gate is the gate's report either way. The
// closing rule applies by the input's own metadata (gate.IsClosingPeriod),
// whatever o.Closing says. A nil o.Policy is gate.DefaultPolicy (as for
// gate.NewCheck). Repair is
// not gated: it completes what a gated write let through.
func WithGate(o gate.Options) Option { return func(c *config) { c.gate = &o } }

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
