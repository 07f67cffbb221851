// Package firestorelock keeps locking's locks in Cloud Firestore: a
// locking.Backend for Acquire, Do and Lease. Its storage is laid out as
// SyncGuard's Firestore backend's, so Go and TypeScript services can share
// locks on one database:
//
//   - lock documents in "locks", id = the NFC-normalised key, fields lockId
//     (string), expiresAtMs and acquiredAtMs (integer Unix ms), key (the
//     caller's key) and fence (15-digit string);
//   - fence counters in "fence_counters", id = "fence:" + the lock
//     document id, fields fence and keyDebug, never deleted, so fences keep
//     increasing across releases;
//   - client time (the Backend's clock) with locking.IsLive for every
//     liveness decision;
//   - acquire, release and extend each one transaction; release and extend
//     find the lock by a query on lockId (Firestore's automatic single-field
//     index serves it), or, called by a Lease, read it by key.
//
// Close the Backend when done with it (it does not close the client).
package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"cloud.google.com/go/firestore"
	vkit "cloud.google.com/go/firestore/apiv1"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/fstx"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// Default collection names, as SyncGuard's.
const (
	DefaultLockCollection  = "locks"
	DefaultFenceCollection = "fence_counters"
)

// Document fields, as SyncGuard's.
const (
	fieldLockID     = "lockId"
	fieldExpiresAt  = "expiresAtMs"
	fieldAcquiredAt = "acquiredAtMs"
	fieldKey        = "key"
	fieldFence      = "fence"
	fieldKeyDebug   = "keyDebug"
)

// maxDocIDBytes is Firestore's document id limit; MakeStorageKey hashes
// beyond it (never, with 512-byte keys, but the derivation is SyncGuard's).
const maxDocIDBytes = 1500

// txAttempts bounds the client's own retries of a transaction that
// Firestore aborted for contention. Contention on one lock document is
// normal (every contender reads it), so a few retries are cheap insurance;
// beyond them the error is reported, not hidden.
const txAttempts = 10

// acquireTxAttempts bounds the client's retries of an acquire transaction.
// Fewer than txAttempts: past a few, ABORTED means a transaction that
// died holding the lock document (Firestore keeps its locks 60 s), and the
// client's own backoff (1 s doubling to 30 s) would hold one Acquire call
// for minutes; reported as locking.ErrContended, locking.Acquire waits it
// out under its policy's ContentionWait instead.
const acquireTxAttempts = 3

// Cleanup in IsLocked (WithCleanupInIsLocked): an expired lock document is
// deleted only once its expiry is this far in the past, beyond the
// liveness predicate's own tolerance: the ±2 s of client clock skew
// SyncGuard documents for Firestore, plus a guard of 1 s, so that no
// client whose clock lags ours can still be extending it.
const (
	cleanupSkew  = 2 * time.Second
	cleanupGuard = time.Second
	// cleanupSlots bounds the cleanups in flight per Backend, so a burst
	// of IsLocked calls cannot become a burst of writes; an IsLocked that
	// finds them all busy skips its cleanup.
	cleanupSlots = 4
	// cleanupTimeout bounds one cleanup, which runs detached from the
	// IsLocked call that started it.
	cleanupTimeout = 10 * time.Second
)

// Backend is the Firestore lock backend. It is safe for concurrent use.
type Backend struct {
	client *firestore.Client
	// api, when set (WithAPIClient), runs acquire, and release and extend
	// by key, as transactions begun by their read: two round trips each.
	api *vkit.Client
	// reads begins the reads of the transactions on api, and Close waits
	// for those a cancelled call left to finish and roll back.
	reads fstx.Pending
	// gates gives the transactions on api their turns on each lock
	// document (gatedAttempt).
	gates   docGates
	locks   *firestore.CollectionRef
	fences  *firestore.CollectionRef
	now     func() time.Time
	log     *zap.Logger
	cleanup bool
	kit     backendkit.Storage
	// janitor runs the cleanups IsLocked starts; Close stops it.
	janitor *backendkit.Janitor
	// cleanupDone, if set (by tests), is called after each cleanup with
	// whether it deleted the document.
	cleanupDone func(deleted bool, err error)
}

var (
	_ locking.Backend        = (*Backend)(nil)
	_ locking.DebugLookuper  = (*Backend)(nil)
	_ locking.ReasonReporter = (*Backend)(nil)
)

// Option configures New.
type Option func(*config)

type config struct {
	api           *vkit.Client
	locks, fences string
	now           func() time.Time
	log           *zap.Logger
	cleanup       bool
}

// WithCollections sets the lock and fence counter collections (defaults
// DefaultLockCollection and DefaultFenceCollection). They must differ and
// be valid collection ids, so nothing that cleans up locks can ever touch a
// fence counter.
func WithCollections(locks, fences string) Option {
	return func(c *config) { c.locks, c.fences = locks, fences }
}

// WithAPIClient makes Acquire, and release and extend by key
// (ReleaseKey, ExtendKey: a Lease's), run on the Firestore API client api
// (on the same project and database as the Backend's client): each one
// transaction whose read begins it (BatchGetDocuments with
// new_transaction), so that it is two round trips, the read and the
// commit, instead of the client's RunTransaction's three
// (BeginTransaction first). The transactions are the same — the same
// reads, checks and writes — and so is the layout. Closing api stays the
// caller's.
func WithAPIClient(api *vkit.Client) Option { return func(c *config) { c.api = api } }

// WithClock sets the clock that decides expiry (default time.Now). Firestore
// has no server clock a transaction can read, so the client's is the time
// authority; tests move it to expire locks without waiting.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithCleanupInIsLocked makes IsLocked delete the expired lock document it
// finds (default false: IsLocked only reads), so that abandoned locks do
// not pile up. The trade-offs:
//
//   - The cleanup is best-effort and fire-and-forget: it runs on its own
//     goroutine after IsLocked has decided its result, never changes that
//     result, never delays it, and never makes IsLocked fail. At most 4
//     run at once per Backend (more are skipped), each bounded by 10 s;
//     Close stops them.
//   - Only a document expired for more than 3 s (2 s client skew plus a
//     1 s guard, on top of the liveness tolerance) is deleted, and only
//     inside a transaction that re-reads it and finds it still that
//     expired and still carrying the lockId IsLocked saw: a lock
//     re-acquired or extended meanwhile is left alone. Fence counters are
//     never touched, so fences keep increasing.
//   - IsLocked is then no longer a pure read: tests that count documents
//     or writes will see the deletions, some time after IsLocked returns.
func WithCleanupInIsLocked(enabled bool) Option { return func(c *config) { c.cleanup = enabled } }

// WithLogger sets where the backend logs what an operator should know
// (default: nowhere): a fence past 090000000000000, long before fences run
// out, and lock documents sharing one lockId, which only a bug or a foreign
// client can create. Entries name locks by key hash only.
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.log = l } }

// New returns a backend using client. It fails with InvalidArgument for a
// nil client or clock, or collections that are invalid or the same.
func New(client *firestore.Client, opts ...Option) (*Backend, error) {
	cfg := config{locks: DefaultLockCollection, fences: DefaultFenceCollection, now: time.Now, log: zap.NewNop()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	invalid := func(format string, args ...any) error {
		return &locking.Error{Code: locking.InvalidArgument, Op: "config", Err: fmt.Errorf(format, args...)}
	}
	switch {
	case client == nil:
		return nil, invalid("nil Firestore client")
	case cfg.now == nil:
		return nil, invalid("nil clock")
	case cfg.log == nil:
		return nil, invalid("nil logger")
	case !validCollectionID(cfg.locks):
		return nil, invalid("invalid lock collection id %q", cfg.locks)
	case !validCollectionID(cfg.fences):
		return nil, invalid("invalid fence counter collection id %q", cfg.fences)
	case cfg.locks == cfg.fences:
		return nil, invalid("the fence counter collection must differ from the lock collection (both %q)", cfg.locks)
	}
	return &Backend{client: client, api: cfg.api, locks: client.Collection(cfg.locks), fences: client.Collection(cfg.fences), now: cfg.now, log: cfg.log,
		cleanup: cfg.cleanup, kit: backendkit.Storage{MaxIDBytes: maxDocIDBytes, Classify: classify},
		janitor: backendkit.NewJanitor(cleanupSlots, cleanupTimeout)}, nil
}

// validCollectionID reports whether id can name a top-level collection.
func validCollectionID(id string) bool {
	return id != "" && len(id) <= maxDocIDBytes && utf8.ValidString(id) && !strings.Contains(id, "/") &&
		id != "." && id != ".." && !(len(id) >= 4 && strings.HasPrefix(id, "__") && strings.HasSuffix(id, "__"))
}

// Capabilities reports fencing and client time.
func (b *Backend) Capabilities() locking.Capabilities {
	return locking.Capabilities{Backend: "firestore", SupportsFencing: true, TimeAuthority: "client"}
}

// lockDoc is a lock document as stored.
type lockDoc struct {
	lockID       string
	expiresAtMs  int64
	acquiredAtMs int64
	key          string
	fence        string
}

func readLock(snap *firestore.DocumentSnapshot) (lockDoc, bool) {
	return readLockFields(dataOf(snap))
}

// dataOf is snap's fields, nil when it does not exist.
func dataOf(snap *firestore.DocumentSnapshot) map[string]any {
	if snap == nil || !snap.Exists() {
		return nil
	}
	return snap.Data()
}

// readLockFields is readLock of a lock document's fields (nil: none).
func readLockFields(d map[string]any) (lockDoc, bool) {
	if d == nil {
		return lockDoc{}, false
	}
	l := lockDoc{expiresAtMs: millis(d[fieldExpiresAt]), acquiredAtMs: millis(d[fieldAcquiredAt])}
	l.lockID, _ = d[fieldLockID].(string)
	l.key, _ = d[fieldKey].(string)
	l.fence, _ = d[fieldFence].(string)
	return l, true
}

// millis reads a Unix-ms time that we store as an integer but other
// clients (JavaScript numbers) may store as a double. A fractional value
// rounds up: for an integer threshold t, x > t exactly when ceil(x) > t,
// so IsLive decides as SyncGuard's float comparison does. A missing or
// unreadable value is 0, i.e. long expired.
func millis(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		switch {
		case math.IsNaN(x):
			return 0
		case x >= math.MaxInt64:
			return math.MaxInt64
		case x <= math.MinInt64:
			return math.MinInt64
		}
		return int64(math.Ceil(x))
	case time.Time:
		return x.UnixMilli()
	}
	return 0
}

// Acquire takes key for ttl. One transaction reads the lock document and
// its fence counter; if no live lock holds key it writes a new lock with
// the next fence and advances the counter.
func (b *Backend) Acquire(ctx context.Context, key string, ttl time.Duration) (locking.AcquireResult, error) {
	c, err := b.kit.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locking.AcquireResult{}, err
	}
	e, lockID := c.Errors, c.LockID
	lockRef, fenceRef := b.locks.Doc(c.LockKey), b.fences.Doc(c.FenceKey)
	var res locking.AcquireResult
	// decide is the transaction's work once it has read the lock document
	// and the fence counter (nil when missing): the writes of a new lock,
	// or none while a live lock holds key.
	decide := func(ctx context.Context, lock, counter map[string]any) ([]write, error) {
		res = locking.AcquireResult{}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Client time, taken inside the transaction after the reads (a
		// read may have waited), decides liveness and the new expiry alike.
		nowMs := b.now().UnixMilli()
		cur, held := readLockFields(lock)
		if held && locking.IsLive(cur.expiresAtMs, nowMs) {
			return nil, nil
		}
		var last uint64
		if counter != nil {
			s, _ := counter[fieldFence].(string)
			// A counter we cannot read is refused, not restarted at 1:
			// restarting would hand out fences already used.
			var err error
			if last, err = backendkit.ParseFence(s); err != nil {
				return nil, err
			}
		}
		// Defence in depth: a lock document stamped above the counter (the
		// counter deleted, which must never happen) must not see its fence
		// reissued.
		if n, err := backendkit.ParseFence(cur.fence); held && err == nil && n > last {
			last = n
		}
		fence, err := backendkit.FormatFence(last + 1)
		if err != nil {
			return nil, err
		}
		expiresMs := nowMs + ttl.Milliseconds()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		res = locking.AcquireResult{OK: true, LockID: lockID, ExpiresAt: time.UnixMilli(expiresMs), Fence: fence}
		return []write{
			{ref: lockRef, set: map[string]any{
				fieldLockID:     lockID,
				fieldExpiresAt:  expiresMs,
				fieldAcquiredAt: nowMs,
				fieldKey:        key,
				fieldFence:      fence,
			}},
			{ref: fenceRef, set: map[string]any{fieldFence: fence, fieldKeyDebug: key}},
		}, nil
	}
	// Cancellation is checked on entering the transaction, after the
	// reads, and before the writes.
	if b.api != nil {
		err = b.apiTransaction(ctx, acquireTxAttempts, []*firestore.DocumentRef{lockRef, fenceRef},
			func(ctx context.Context, docs []map[string]any) ([]write, error) {
				return decide(ctx, docs[0], docs[1])
			})
	} else {
		err = b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			// Both documents in one read (a missing one is a snapshot that
			// does not exist, not an error).
			snaps, err := tx.GetAll([]*firestore.DocumentRef{lockRef, fenceRef})
			if err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			writes, err := decide(ctx, dataOf(snaps[0]), dataOf(snaps[1]))
			if err != nil {
				return err
			}
			return applyWrites(tx, writes)
		}, firestore.MaxAttempts(acquireTxAttempts))
	}
	if err != nil {
		return locking.AcquireResult{}, e.Map(ctx, contention(err))
	}
	if backendkit.FenceNeedsWarning(res.Fence) {
		// Years of headroom remain, but a key acquired this often needs an
		// operator to plan for the maximum before acquires start failing.
		b.log.Warn("lock fence is past the warning threshold; acquires fail with Internal above the maximum",
			zap.String("keyHash", e.KeyHash), zap.String("fence", res.Fence),
			zap.Uint64("maxFence", backendkit.MaxFence))
	}
	return res, nil
}

// Release deletes the lock lockID names if it is live and still lockID's;
// false otherwise. Safe to call with any lockId: it never touches another
// holder's lock, and a second release returns false.
func (b *Backend) Release(ctx context.Context, lockID string) (bool, error) {
	ok, _, err := b.ReleaseWithReason(ctx, lockID)
	return ok, err
}

// ReleaseWithReason is Release, also saying why it changed nothing:
// locking.ReasonNotFound when no lock document carries lockID,
// locking.ReasonExpired when it does but is no longer live. The reason
// comes from the transaction's own read, at no extra cost.
func (b *Backend) ReleaseWithReason(ctx context.Context, lockID string) (bool, locking.Reason, error) {
	return b.mutate(ctx, "release", lockID, release)
}

// Extend sets the live lock lockID names to expire at now+ttl; OK false if
// it is not found or not live. An expired lock is never revived, even if
// its document is still there.
func (b *Backend) Extend(ctx context.Context, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	r, _, err := b.ExtendWithReason(ctx, lockID, ttl)
	return r, err
}

// ExtendWithReason is Extend, also saying why it changed nothing, as
// ReleaseWithReason does.
func (b *Backend) ExtendWithReason(ctx context.Context, lockID string, ttl time.Duration) (locking.ExtendResult, locking.Reason, error) {
	const op = "extend"
	if err := locking.ValidateTTL(ttl); err != nil {
		return locking.ExtendResult{}, "", backendkit.WithOp(err, op)
	}
	var expiresMs int64
	ok, reason, err := b.mutate(ctx, op, lockID, func(ref *firestore.DocumentRef, nowMs int64) write {
		expiresMs = nowMs + ttl.Milliseconds()
		return write{ref: ref, update: map[string]any{fieldExpiresAt: expiresMs}}
	})
	if err != nil || !ok {
		return locking.ExtendResult{}, reason, err
	}
	return locking.ExtendResult{OK: true, ExpiresAt: time.UnixMilli(expiresMs)}, "", nil
}

// ReleaseKey is Release for a caller that also knows the lock's key (a
// Lease): it reads the key's lock document in the transaction and verifies
// the lockId on it, instead of querying by lockId. See locking.KeyedBackend.
func (b *Backend) ReleaseKey(ctx context.Context, key, lockID string) (bool, error) {
	ok, _, err := b.mutateAt(ctx, "release", key, lockID, release)
	return ok, err
}

// ExtendKey is Extend for a caller that also knows the lock's key; see
// ReleaseKey.
func (b *Backend) ExtendKey(ctx context.Context, key, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	const op = "extend"
	if err := locking.ValidateTTL(ttl); err != nil {
		return locking.ExtendResult{}, backendkit.WithOp(err, op)
	}
	var expiresMs int64
	ok, _, err := b.mutateAt(ctx, op, key, lockID, func(ref *firestore.DocumentRef, nowMs int64) write {
		expiresMs = nowMs + ttl.Milliseconds()
		return write{ref: ref, update: map[string]any{fieldExpiresAt: expiresMs}}
	})
	if err != nil || !ok {
		return locking.ExtendResult{}, err
	}
	return locking.ExtendResult{OK: true, ExpiresAt: time.UnixMilli(expiresMs)}, nil
}

var _ locking.KeyedBackend = (*Backend)(nil)

// release is the change a release makes to the lock document ref.
func release(ref *firestore.DocumentRef, _ int64) write { return write{ref: ref, del: true} }

// mutate is release and extend: in one transaction it finds the lock
// lockID names by query, verifies it is live and lockID's, and applies
// change. It reports whether change was applied and, if not, why.
func (b *Backend) mutate(ctx context.Context, op, lockID string,
	change func(ref *firestore.DocumentRef, nowMs int64) write) (bool, locking.Reason, error) {
	return b.mutateAt(ctx, op, "", lockID, change)
}

// mutateAt is mutate; with a key it reads that key's lock document directly
// (one document read, no query; on the API client when the Backend has
// one, WithAPIClient) and the lockId check below decides ownership exactly
// as after the query.
func (b *Backend) mutateAt(ctx context.Context, op, key, lockID string,
	change func(ref *firestore.DocumentRef, nowMs int64) write) (bool, locking.Reason, error) {
	var k backendkit.Keys
	if key != "" {
		var err error
		if k, err = b.kit.Keys(op, key); err != nil {
			return false, "", err
		}
	}
	e, err := b.kit.BeginLockID(ctx, op, lockID)
	if err != nil {
		return false, "", err
	}
	var keyRef *firestore.DocumentRef
	if key != "" {
		keyRef = b.locks.Doc(k.LockKey)
		e.KeyHash = k.KeyHash
		e.Secrets = append(e.Secrets, key, k.Key, k.LockKey)
	}
	var (
		applied bool
		reason  locking.Reason
	)
	// decide is the transaction's work once it has read the lock document
	// ref (d; found false when there is none): the change, or none.
	decide := func(ctx context.Context, ref *firestore.DocumentRef, d lockDoc, found bool) ([]write, error) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		nowMs := b.now().UnixMilli()
		// Explicit ownership check after the index lookup (the query may
		// have returned a stale document), then the one liveness predicate.
		switch {
		case !found || d.lockID != lockID:
			reason = locking.ReasonNotFound
			return nil, nil
		case !locking.IsLive(d.expiresAtMs, nowMs):
			reason = locking.ReasonExpired
			return nil, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		applied = true
		return []write{change(ref, nowMs)}, nil
	}
	if keyRef != nil && b.api != nil {
		err = b.apiTransaction(ctx, txAttempts, []*firestore.DocumentRef{keyRef},
			func(ctx context.Context, docs []map[string]any) ([]write, error) {
				applied, reason = false, ""
				d, found := readLockFields(docs[0])
				return decide(ctx, keyRef, d, found)
			})
	} else {
		err = b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			applied, reason = false, ""
			// Cancellation is checked on entering the transaction, after the
			// read, and before the write.
			if err := ctx.Err(); err != nil {
				return err
			}
			var (
				snap *firestore.DocumentSnapshot
				d    lockDoc
				err  error
			)
			if keyRef != nil {
				snap, err = tx.Get(keyRef)
				if status.Code(err) == codes.NotFound {
					snap, err = nil, nil
				}
				d, _ = readLock(snap)
			} else {
				snap, d, err = b.findByLockID(tx.Documents(b.locks.Where(fieldLockID, "==", lockID)), e)
			}
			if err != nil {
				return err
			}
			ref := keyRef
			if snap != nil {
				ref = snap.Ref
			}
			writes, err := decide(ctx, ref, d, snap != nil)
			if err != nil {
				return err
			}
			return applyWrites(tx, writes)
		}, firestore.MaxAttempts(txAttempts))
	}
	if err != nil {
		return false, "", e.Map(ctx, err)
	}
	return applied, reason, nil
}

// findByLockID reads the lock documents a lockId query returns: nil if
// none, the one if one. More than one is refused with Internal rather than
// guessed at (hence no Limit(1)): only a bug or a foreign client can create
// duplicates, and acting on the wrong one could release someone else's
// lock. It adds what it finds to e's
// secrets, since an error about the document would quote its path.
func (b *Backend) findByLockID(it *firestore.DocumentIterator, e *backendkit.OpErrors) (*firestore.DocumentSnapshot, lockDoc, error) {
	snaps, err := it.GetAll()
	if err != nil {
		return nil, lockDoc{}, err
	}
	for _, s := range snaps {
		d, _ := readLock(s)
		e.Secrets = append(e.Secrets, s.Ref.ID, d.key)
	}
	switch len(snaps) {
	case 0:
		return nil, lockDoc{}, nil
	case 1:
		d, _ := readLock(snaps[0])
		if e.KeyHash == "" && d.key != "" {
			e.KeyHash = locking.HashKey(d.key)
		}
		return snaps[0], d, nil
	}
	// Log duplicates and fail safe; by hashes only.
	b.log.Warn("lock documents share one lockId; refusing to act on any of them",
		zap.String("op", e.Op), zap.String("lockIdHash", e.LockIDHash), zap.Int("documents", len(snaps)))
	return nil, lockDoc{}, &locking.Error{Code: locking.Internal,
		Err: fmt.Errorf("%d lock documents carry this lockId; refusing to pick one", len(snaps))}
}

// IsLocked reports whether a live lock holds key. It only reads, unless
// WithCleanupInIsLocked asked it to delete an expired lock document in the
// background (see there).
func (b *Backend) IsLocked(ctx context.Context, key string) (bool, error) {
	r, err := b.readKey(ctx, "isLocked", key)
	if err != nil {
		return false, err
	}
	nowMs := b.now().UnixMilli()
	live := r.found && r.d.lockID != "" && locking.IsLive(r.d.expiresAtMs, nowMs)
	if b.cleanup && r.found && !live && r.d.lockID != "" && pastCleanupGuard(r.d.expiresAtMs, nowMs) {
		b.startCleanup(ctx, r.ref, r.d.lockID)
	}
	return live, nil
}

// LookupKey describes the live lock on key, sanitized; nil if there is
// none. It only reads.
func (b *Backend) LookupKey(ctx context.Context, key string) (*locking.LockInfo, error) {
	r, err := b.readKey(ctx, "lookup", key)
	if err != nil || !r.found {
		return nil, err
	}
	return b.info(r.d, r.keyHash), nil
}

// LookupKeyDebug is LookupKey with the raw key and lockId, for debugging
// only: never log the result's Key or LockID. Use locking.GetByKeyRaw.
func (b *Backend) LookupKeyDebug(ctx context.Context, key string) (*locking.LockInfoDebug, error) {
	r, err := b.readKey(ctx, "lookup", key)
	if err != nil || !r.found {
		return nil, err
	}
	return debugInfo(b.info(r.d, r.keyHash), r.d, r.nkey), nil
}

// keyRead is a lock document read by key.
type keyRead struct {
	nkey, keyHash string
	ref           *firestore.DocumentRef
	d             lockDoc
	found         bool
}

// readKey validates key and reads its lock document, checking ctx before
// and after the read.
func (b *Backend) readKey(ctx context.Context, op, key string) (keyRead, error) {
	c, err := b.kit.BeginKey(ctx, op, key)
	if err != nil {
		return keyRead{}, err
	}
	r := keyRead{nkey: c.Key, keyHash: c.KeyHash, ref: b.locks.Doc(c.LockKey)}
	snap, err := r.ref.Get(ctx)
	switch {
	case status.Code(err) == codes.NotFound:
	case err != nil:
		return keyRead{}, c.Errors.Map(ctx, err)
	}
	if ctx.Err() != nil {
		return keyRead{}, c.Errors.Ended(ctx)
	}
	if err == nil {
		r.d, r.found = readLock(snap)
	}
	return r, nil
}

// LookupLockID describes the live lock lockID names, sanitized; nil if
// there is none. It only reads, with a plain query: it is diagnostic, and
// release and extend re-check everything in their transactions.
func (b *Backend) LookupLockID(ctx context.Context, lockID string) (*locking.LockInfo, error) {
	info, _, _, err := b.lookupLockID(ctx, lockID)
	return info, err
}

// LookupLockIDDebug is LookupLockID with the raw key and lockId, for
// debugging only: never log the result's Key or LockID. Use
// locking.GetByIDRaw.
func (b *Backend) LookupLockIDDebug(ctx context.Context, lockID string) (*locking.LockInfoDebug, error) {
	info, d, docID, err := b.lookupLockID(ctx, lockID)
	if err != nil || info == nil {
		return nil, err
	}
	return debugInfo(info, d, docID), nil
}

func (b *Backend) lookupLockID(ctx context.Context, lockID string) (*locking.LockInfo, lockDoc, string, error) {
	e, err := b.kit.BeginLockID(ctx, "lookup", lockID)
	if err != nil {
		return nil, lockDoc{}, "", err
	}
	// No Limit(1): findByLockID must see duplicates to refuse them.
	snap, d, err := b.findByLockID(b.locks.Where(fieldLockID, "==", lockID).Documents(ctx), e)
	if err != nil {
		return nil, lockDoc{}, "", e.Map(ctx, err)
	}
	if ctx.Err() != nil {
		return nil, lockDoc{}, "", e.Ended(ctx)
	}
	// Explicit ownership check after the index lookup.
	if snap == nil || d.lockID != lockID {
		return nil, lockDoc{}, "", nil
	}
	keyHash := locking.HashKey(d.key)
	if d.key == "" {
		keyHash = locking.HashKey(snap.Ref.ID)
	}
	return b.info(d, keyHash), d, snap.Ref.ID, nil
}

// debugInfo adds the raw key and lockId to info (nil stays nil). A
// document without a key field (a foreign client's) names its key by
// fallbackKey, the normalised key or document id.
func debugInfo(info *locking.LockInfo, d lockDoc, fallbackKey string) *locking.LockInfoDebug {
	if info == nil {
		return nil
	}
	key := d.key
	if key == "" {
		key = fallbackKey
	}
	return &locking.LockInfoDebug{LockInfo: *info, Key: key, LockID: d.lockID}
}

// pastCleanupGuard reports whether a lock that expired at expiresAtMs is
// expired enough, at nowMs, for cleanup to delete it.
func pastCleanupGuard(expiresAtMs, nowMs int64) bool {
	return nowMs-expiresAtMs > (cleanupSkew + cleanupGuard).Milliseconds()
}

// startCleanup deletes the expired lock document ref in the background if a
// cleanup slot is free; otherwise it does nothing. It never blocks.
func (b *Backend) startCleanup(ctx context.Context, ref *firestore.DocumentRef, lockID string) {
	b.janitor.TryGo(ctx, func(ctx context.Context) {
		deleted, err := b.cleanupExpired(ctx, ref, lockID)
		if b.cleanupDone != nil {
			b.cleanupDone(deleted, err)
		}
	})
}

// Close stops the background cleanups IsLocked starts with
// WithCleanupInIsLocked, cancelling those in flight, and waits for them to
// return, and for the reads that cancelled calls on the API client
// (WithAPIClient) left to finish and roll back their transactions, so
// that no goroutine of the backend outlives it. It does not
// close the Firestore client passed to New: that stays the caller's, and
// the backend's operations keep working on it, but IsLocked starts no more
// cleanups. Close is idempotent and returns nil.
func (b *Backend) Close() error {
	b.janitor.Close()
	b.reads.Wait()
	return nil
}

// cleanupExpired deletes the lock document ref in a transaction that
// re-reads it and deletes it only if it still carries lockID and is still
// expired past the cleanup guard, so a lock acquired or extended since
// IsLocked looked is never touched. It only ever deletes from the lock
// collection, never a fence counter. It reports whether it deleted.
func (b *Backend) cleanupExpired(ctx context.Context, ref *firestore.DocumentRef, lockID string) (bool, error) {
	if ref.Parent == nil || ref.Parent.Path != b.locks.Path {
		return false, &locking.Error{Code: locking.Internal, Op: "cleanup", LockIDHash: locking.HashKey(lockID),
			Err: errors.New("refusing to clean up a document outside the lock collection")}
	}
	e := b.kit.Errors("cleanup")
	e.LockIDHash, e.Secrets = locking.HashKey(lockID), []string{lockID, ref.ID}
	var deleted bool
	err := b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		deleted = false
		snap, err := tx.Get(ref)
		switch {
		case status.Code(err) == codes.NotFound:
			return nil // gone already
		case err != nil:
			return err
		}
		d, found := readLock(snap)
		if !found || d.lockID != lockID || !pastCleanupGuard(d.expiresAtMs, b.now().UnixMilli()) {
			return nil
		}
		deleted = true
		return tx.Delete(ref)
	}, firestore.MaxAttempts(3))
	if err != nil {
		return false, e.Map(ctx, err)
	}
	return deleted, nil
}

// info is the sanitized view of a live lock; nil if it is not live.
func (b *Backend) info(d lockDoc, keyHash string) *locking.LockInfo {
	if d.lockID == "" || !locking.IsLive(d.expiresAtMs, b.now().UnixMilli()) {
		return nil
	}
	return &locking.LockInfo{
		KeyHash:    keyHash,
		LockIDHash: locking.HashKey(d.lockID),
		ExpiresAt:  time.UnixMilli(d.expiresAtMs),
		AcquiredAt: time.UnixMilli(d.acquiredAtMs),
		Fence:      d.fence,
	}
}

// contention marks err as locking.ErrContended when Firestore aborted the
// transaction: after the client's retries that means another transaction
// holds the lock document (see acquireTxAttempts).
func contention(err error) error {
	if status.Code(err) == codes.Aborted {
		return fmt.Errorf("%w: %w", locking.ErrContended, err)
	}
	return err
}

// classify maps gRPC codes as SyncGuard does: UNAVAILABLE, INTERNAL and
// ABORTED (contention the client's retries did not resolve) are
// ServiceUnavailable; DEADLINE_EXCEEDED NetworkTimeout; PERMISSION_DENIED
// and UNAUTHENTICATED AuthFailed; INVALID_ARGUMENT and FAILED_PRECONDITION
// InvalidArgument; RESOURCE_EXHAUSTED RateLimited; a cancelled context
// Aborted; the rest Internal.
func classify(ctx context.Context, err error) locking.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return locking.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		return locking.NetworkTimeout
	}
	switch status.Code(err) {
	case codes.Canceled:
		return locking.Aborted
	case codes.DeadlineExceeded:
		return locking.NetworkTimeout
	case codes.Unavailable, codes.Internal, codes.Aborted:
		return locking.ServiceUnavailable
	case codes.PermissionDenied, codes.Unauthenticated:
		return locking.AuthFailed
	case codes.InvalidArgument, codes.FailedPrecondition:
		return locking.InvalidArgument
	case codes.ResourceExhausted:
		return locking.RateLimited
	}
	if ctx.Err() != nil {
		// The client surfaced the cancellation some other way.
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return locking.NetworkTimeout
		}
		return locking.Aborted
	}
	return locking.Internal
}
