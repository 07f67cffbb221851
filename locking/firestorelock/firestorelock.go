// Package firestorelock is the Cloud Firestore lock backend, laid out as
// SyncGuard's so Go and TypeScript services can share locks: lock documents
// in "locks" keyed by the NFC key, persistent fence counters in
// "fence_counters", client time with the shared liveness predicate, and
// every acquire, release and extend one transaction.
package firestorelock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/locking"
)

// Default collection names, as SyncGuard's.
const (
	DefaultLockCollection  = "locks"
	DefaultFenceCollection = "fence_counters"
)

// Firestore's document id limit, in bytes; MakeStorageKey hashes beyond it.
const maxDocIDBytes = 1500

// acquireAttempts bounds the client's own retries of a contended acquire
// transaction (ABORTED); contention beyond that is reported, not hidden.
const acquireAttempts = 10

// Backend is the Firestore lock backend. It is safe for concurrent use.
type Backend struct {
	client *firestore.Client
	locks  *firestore.CollectionRef
	fences *firestore.CollectionRef
	now    func() time.Time
}

var _ locking.Backend = (*Backend)(nil)

// Option configures New.
type Option func(*config)

type config struct {
	locks, fences string
	now           func() time.Time
}

// WithCollections sets the lock and fence counter collections (defaults
// "locks" and "fence_counters"). They must differ, so nothing that cleans
// up locks can ever touch a fence counter.
func WithCollections(locks, fences string) Option {
	return func(c *config) { c.locks, c.fences = locks, fences }
}

// WithClock sets the clock that decides expiry (default time.Now); for tests.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// New returns a backend on client. It fails with InvalidArgument for a bad
// configuration.
func New(client *firestore.Client, opts ...Option) (*Backend, error) {
	cfg := config{locks: DefaultLockCollection, fences: DefaultFenceCollection, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	for _, c := range []string{cfg.locks, cfg.fences} {
		if c == "" || len(c) > maxDocIDBytes || strings.Contains(c, "/") || c == "." || c == ".." || reservedID.MatchString(c) {
			return nil, locking.Errorf(locking.InvalidArgument, "config", "invalid collection name %q", c)
		}
	}
	if cfg.locks == cfg.fences {
		return nil, locking.Errorf(locking.InvalidArgument, "config", "the fence counter collection must differ from the lock collection (%q)", cfg.locks)
	}
	if client == nil {
		return nil, locking.Errorf(locking.InvalidArgument, "config", "nil Firestore client")
	}
	return &Backend{client: client, locks: client.Collection(cfg.locks), fences: client.Collection(cfg.fences), now: cfg.now}, nil
}

// Capabilities: fencing, client time.
func (b *Backend) Capabilities() locking.Capabilities {
	return locking.Capabilities{Backend: "firestore", SupportsFencing: true, TimeAuthority: "client"}
}

var reservedID = regexp.MustCompile(`^__.*__$`)

// docIDs validates key and derives the lock and fence document ids.
func docIDs(op, key string) (nkey, lockID, fenceID string, err error) {
	nkey, err = locking.NormalizeAndValidateKey(key)
	if err != nil {
		return "", "", "", withOp(err, op)
	}
	// Firestore would read these as paths or reserved ids.
	if strings.Contains(nkey, "/") || nkey == "." || nkey == ".." || reservedID.MatchString(nkey) {
		return "", "", "", &locking.Error{Code: locking.InvalidArgument, Op: op, KeyHash: locking.HashKey(nkey),
			Err: errors.New(`key cannot be a Firestore document id: it contains "/", is "." or "..", or matches __.*__`)}
	}
	if lockID, err = locking.MakeStorageKey("", nkey, maxDocIDBytes, 0); err != nil {
		return "", "", "", withOp(err, op)
	}
	if fenceID, err = locking.MakeStorageKey("", "fence:"+lockID, maxDocIDBytes, 0); err != nil {
		return "", "", "", withOp(err, op)
	}
	return nkey, lockID, fenceID, nil
}

func withOp(err error, op string) error {
	var le *locking.Error
	if errors.As(err, &le) {
		c := *le
		c.Op = op
		return &c
	}
	return err
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
	if snap == nil || !snap.Exists() {
		return lockDoc{}, false
	}
	d := snap.Data()
	l := lockDoc{}
	l.lockID, _ = d["lockId"].(string)
	l.key, _ = d["key"].(string)
	l.fence, _ = d["fence"].(string)
	l.expiresAtMs = millis(d["expiresAtMs"])
	l.acquiredAtMs = millis(d["acquiredAtMs"])
	return l, true
}

// millis reads a time in ms stored as an integer or, by other clients, a
// double.
func millis(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case float64:
		if math.IsNaN(x) {
			return 0
		}
		return int64(math.Floor(x))
	}
	return 0
}

// Acquire takes key for ttl in one transaction that reads the lock and its
// fence counter and, if no live lock holds key, writes both.
func (b *Backend) Acquire(ctx context.Context, key string, ttl time.Duration) (locking.AcquireResult, error) {
	const op = "acquire"
	nkey, lockDocID, fenceDocID, err := docIDs(op, key)
	if err != nil {
		return locking.AcquireResult{}, err
	}
	if err := locking.ValidateTTL(ttl); err != nil {
		return locking.AcquireResult{}, withOp(err, op)
	}
	keyHash := locking.HashKey(nkey)
	if err := ctx.Err(); err != nil {
		return locking.AcquireResult{}, mapErr(op, keyHash, err)
	}
	lockID, err := locking.NewLockID()
	if err != nil {
		return locking.AcquireResult{}, err
	}
	lockRef, fenceRef := b.locks.Doc(lockDocID), b.fences.Doc(fenceDocID)
	var res locking.AcquireResult
	err = b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = locking.AcquireResult{}
		snaps, err := tx.GetAll([]*firestore.DocumentRef{lockRef, fenceRef})
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Client time, read inside the transaction (the spec's ADR-010).
		now := b.now()
		if cur, ok := readLock(snaps[0]); ok && locking.IsLive(cur.expiresAtMs, now.UnixMilli()) {
			return nil
		}
		next := uint64(1)
		if snaps[1].Exists() {
			s, _ := snaps[1].Data()["fence"].(string)
			n, err := locking.ParseFence(s)
			if err != nil {
				return err
			}
			next = n + 1
		}
		fence, err := locking.FormatFence(next)
		if err != nil {
			return err
		}
		expires := now.Add(ttl)
		if err := tx.Set(lockRef, map[string]any{
			"lockId":       lockID,
			"expiresAtMs":  expires.UnixMilli(),
			"acquiredAtMs": now.UnixMilli(),
			"key":          key,
			"fence":        fence,
		}); err != nil {
			return err
		}
		if err := tx.Set(fenceRef, map[string]any{"fence": fence, "keyDebug": key}); err != nil {
			return err
		}
		res = locking.AcquireResult{OK: true, LockID: lockID, ExpiresAt: time.UnixMilli(expires.UnixMilli()), Fence: fence}
		return nil
	}, firestore.MaxAttempts(acquireAttempts))
	if err != nil {
		return locking.AcquireResult{}, mapErr(op, keyHash, err)
	}
	return res, nil
}

// byLockID reads, inside tx, the lock document lockID names. Duplicates
// (which only a bug or a foreign client could create) are refused rather
// than guessed at, so the query has no Limit(1).
func (b *Backend) byLockID(tx *firestore.Transaction, lockID string) (*firestore.DocumentSnapshot, lockDoc, bool, error) {
	snaps, err := tx.Documents(b.locks.Where("lockId", "==", lockID)).GetAll()
	if err != nil {
		return nil, lockDoc{}, false, err
	}
	switch len(snaps) {
	case 0:
		return nil, lockDoc{}, false, nil
	case 1:
		d, ok := readLock(snaps[0])
		return snaps[0], d, ok, nil
	}
	return nil, lockDoc{}, false, locking.Errorf(locking.Internal, "", "%d lock documents carry one lockId", len(snaps))
}

// Release deletes the lock lockID names if it is live and still lockID's.
func (b *Backend) Release(ctx context.Context, lockID string) (bool, error) {
	const op = "release"
	if err := locking.ValidateLockID(lockID); err != nil {
		return false, withOp(err, op)
	}
	if err := ctx.Err(); err != nil {
		return false, mapIDErr(op, lockID, err)
	}
	var ok bool
	err := b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		ok = false
		snap, d, found, err := b.byLockID(tx, lockID)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Explicit ownership check after the index lookup (ADR-003).
		if !found || d.lockID != lockID || !locking.IsLive(d.expiresAtMs, b.now().UnixMilli()) {
			return nil
		}
		ok = true
		return tx.Delete(snap.Ref)
	}, firestore.MaxAttempts(acquireAttempts))
	if err != nil {
		return false, mapIDErr(op, lockID, err)
	}
	return ok, nil
}

// Extend sets the live lock lockID names to expire at now+ttl.
func (b *Backend) Extend(ctx context.Context, lockID string, ttl time.Duration) (locking.ExtendResult, error) {
	const op = "extend"
	if err := locking.ValidateLockID(lockID); err != nil {
		return locking.ExtendResult{}, withOp(err, op)
	}
	if err := locking.ValidateTTL(ttl); err != nil {
		return locking.ExtendResult{}, withOp(err, op)
	}
	if err := ctx.Err(); err != nil {
		return locking.ExtendResult{}, mapIDErr(op, lockID, err)
	}
	var res locking.ExtendResult
	err := b.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		res = locking.ExtendResult{}
		snap, d, found, err := b.byLockID(tx, lockID)
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		now := b.now()
		if !found || d.lockID != lockID || !locking.IsLive(d.expiresAtMs, now.UnixMilli()) {
			return nil // never revive an expired lock
		}
		expires := now.Add(ttl).UnixMilli()
		res = locking.ExtendResult{OK: true, ExpiresAt: time.UnixMilli(expires)}
		return tx.Update(snap.Ref, []firestore.Update{{Path: "expiresAtMs", Value: expires}})
	}, firestore.MaxAttempts(acquireAttempts))
	if err != nil {
		return locking.ExtendResult{}, mapIDErr(op, lockID, err)
	}
	return res, nil
}

// IsLocked reports whether a live lock holds key. It only reads.
func (b *Backend) IsLocked(ctx context.Context, key string) (bool, error) {
	info, err := b.lookupKey(ctx, "isLocked", key)
	return info != nil, err
}

// LookupKey describes the live lock on key, sanitized; nil if none.
func (b *Backend) LookupKey(ctx context.Context, key string) (*locking.LockInfo, error) {
	return b.lookupKey(ctx, "lookup", key)
}

func (b *Backend) lookupKey(ctx context.Context, op, key string) (*locking.LockInfo, error) {
	nkey, lockDocID, _, err := docIDs(op, key)
	if err != nil {
		return nil, err
	}
	snap, err := b.locks.Doc(lockDocID).Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, mapErr(op, locking.HashKey(nkey), err)
	}
	return b.info(snap), nil
}

// LookupLockID describes the live lock lockID names, sanitized; nil if none.
func (b *Backend) LookupLockID(ctx context.Context, lockID string) (*locking.LockInfo, error) {
	const op = "lookup"
	if err := locking.ValidateLockID(lockID); err != nil {
		return nil, withOp(err, op)
	}
	snaps, err := b.locks.Where("lockId", "==", lockID).Documents(ctx).GetAll()
	if err != nil {
		return nil, mapIDErr(op, lockID, err)
	}
	if len(snaps) > 1 {
		return nil, &locking.Error{Code: locking.Internal, Op: op, LockIDHash: locking.HashKey(lockID),
			Err: fmt.Errorf("%d lock documents carry one lockId", len(snaps))}
	}
	if len(snaps) == 0 {
		return nil, nil
	}
	if d, _ := readLock(snaps[0]); d.lockID != lockID {
		return nil, nil
	}
	return b.info(snaps[0]), nil
}

func (b *Backend) info(snap *firestore.DocumentSnapshot) *locking.LockInfo {
	d, ok := readLock(snap)
	if !ok || !locking.IsLive(d.expiresAtMs, b.now().UnixMilli()) {
		return nil
	}
	return &locking.LockInfo{
		KeyHash:    locking.HashKey(d.key),
		LockIDHash: locking.HashKey(d.lockID),
		ExpiresAt:  time.UnixMilli(d.expiresAtMs),
		AcquiredAt: time.UnixMilli(d.acquiredAtMs),
		Fence:      d.fence,
	}
}

func mapIDErr(op, lockID string, err error) error {
	e := mapErr(op, "", err)
	var le *locking.Error
	if errors.As(e, &le) && le.LockIDHash == "" {
		le.LockIDHash = locking.HashKey(lockID)
	}
	return e
}

// mapErr maps a Firestore error to the lock contract's codes, per the
// backend spec's table; a cancelled context is Aborted.
func mapErr(op, keyHash string, err error) error {
	var le *locking.Error
	if errors.As(err, &le) {
		c := *le
		if c.Op == "" {
			c.Op = op
		}
		if c.KeyHash == "" {
			c.KeyHash = keyHash
		}
		return &c
	}
	code := locking.Internal
	switch {
	case errors.Is(err, context.Canceled):
		code = locking.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		code = locking.NetworkTimeout
	default:
		switch status.Code(err) {
		case codes.Canceled:
			code = locking.Aborted
		case codes.Unavailable, codes.Internal, codes.Aborted:
			code = locking.ServiceUnavailable
		case codes.DeadlineExceeded:
			code = locking.NetworkTimeout
		case codes.PermissionDenied, codes.Unauthenticated:
			code = locking.AuthFailed
		case codes.InvalidArgument, codes.FailedPrecondition:
			code = locking.InvalidArgument
		case codes.ResourceExhausted:
			code = locking.RateLimited
		}
	}
	return &locking.Error{Code: code, Op: op, KeyHash: keyHash, Err: err}
}
