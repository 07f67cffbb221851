// Package pglock keeps locking's locks in PostgreSQL: a locking.Backend
// for Acquire, Do and Lease, on SyncGuard's tables, so Go and TypeScript
// services can share locks on one database:
//
//   - syncguard_locks(key TEXT PRIMARY KEY, lock_id TEXT, expires_at_ms
//     BIGINT, acquired_at_ms BIGINT, fence TEXT, user_key TEXT), every
//     column NOT NULL, with a unique index on lock_id and an index on
//     expires_at_ms (Schema has the exact DDL);
//   - syncguard_fence_counters(fence_key TEXT PRIMARY KEY, fence BIGINT,
//     key_debug TEXT), never deleted from, so fences keep increasing;
//   - the server's clock as the time authority;
//   - acquires serialised per key with
//     pg_advisory_xact_lock(hashtext(storageKey)),
//     exactly as SyncGuard's, so peers in either language exclude each other.
//
// Every operation is one round trip. Acquire pipelines SyncGuard's three
// steps (advisory lock; INSERT the fence counter … DO NOTHING; then one
// statement that reads the lock row FOR UPDATE, and only if it is not live
// increments the counter and writes the lock) as one pgx batch, which
// PostgreSQL runs as one implicit transaction: it commits or rolls back
// whole, and each statement sees what the previous ones did. Release and
// extend are single statements that find the row by lock_id FOR UPDATE,
// check ownership and liveness, and delete or update it. SyncGuard's
// equivalents take eight round trips (acquire) and five (release, extend),
// BEGIN and COMMIT included.
//
// Because the decision is made on the server in the same statement, the
// liveness predicate of release, extend and acquire is SQL (with
// locking.TimeTolerance); a test holds it to locking.IsLive, which decides
// the read-only operations.
//
// Close the Backend when done with it, before the pool (it does not close
// the pool).
package pglock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
)

// Default table names, as SyncGuard's.
const (
	DefaultLockTable  = "syncguard_locks"
	DefaultFenceTable = "syncguard_fence_counters"
)

// maxStorageKeyBytes is SyncGuard's PostgreSQL key limit (B-tree tuple
// size); MakeStorageKey hashes beyond it (never, with 512-byte keys).
const maxStorageKeyBytes = 1700

// maxTableName keeps "idx_<table>_lock_id" within PostgreSQL's 63-byte
// identifiers, so index names are never silently truncated into each other.
const maxTableName = 51

// tableName is what a table name must look like: a lowercase SQL identifier,
// so the quoted names we use and the unquoted ones in SyncGuard's DDL name
// the same table.
var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// DefaultPoolWait bounds how long an operation waits for a free connection
// when every connection of the pool is busy before failing with
// RateLimited (see WithPoolWait).
const DefaultPoolWait = 5 * time.Second

// Cleanup in IsLocked (WithCleanupInIsLocked): only a lock expired for more
// than cleanupGuard beyond the liveness tolerance is deleted.
const (
	cleanupGuard   = 3 * time.Second
	cleanupSlots   = 4
	cleanupTimeout = 10 * time.Second
)

// Backend is the PostgreSQL lock backend. It is safe for concurrent use.
type Backend struct {
	pool     *pgxpool.Pool
	now      func() time.Time
	log      *zap.Logger
	poolWait time.Duration
	cleanup  bool
	janitor  *backendkit.Janitor // runs the cleanups IsLocked starts; Close stops it
	// cleanupDone, if set (by tests), is called after each cleanup.
	cleanupDone func(deleted bool, err error)
	q           queries
	kit         backendkit.Storage
}

var (
	_ locking.Backend        = (*Backend)(nil)
	_ locking.DebugLookuper  = (*Backend)(nil)
	_ locking.ReasonReporter = (*Backend)(nil)
)

// Option configures New.
type Option func(*config)

type config struct {
	locks, fences string
	autoCreate    bool
	cleanup       bool
	log           *zap.Logger
	now           func() time.Time
	poolWait      time.Duration
}

// WithTables sets the lock and fence counter tables (defaults
// DefaultLockTable and DefaultFenceTable). Each must be a lowercase SQL
// identifier ([a-z_][a-z0-9_]*, at most 51 bytes; use the connection's
// search_path for a schema) and they must differ, so nothing that cleans up
// locks can ever touch a fence counter. Anything else fails New with
// InvalidArgument before any SQL is sent.
func WithTables(locks, fences string) Option {
	return func(c *config) { c.locks, c.fences = locks, fences }
}

// WithAutoCreateTables sets whether New creates the tables and indexes that
// are missing (default true, as SyncGuard's autoCreateTables). With false,
// New only checks that they exist; create them beforehand with Schema.
func WithAutoCreateTables(enabled bool) Option { return func(c *config) { c.autoCreate = enabled } }

// WithCleanupInIsLocked makes IsLocked delete, in the background, the
// expired lock row it finds (default false: IsLocked only reads). Only a
// row expired for over 3 s beyond the liveness tolerance and still carrying
// the lockId IsLocked saw is deleted, by one statement that re-checks both;
// fence counters are never touched. At most 4 cleanups run at once; Close
// stops them.
func WithCleanupInIsLocked(enabled bool) Option { return func(c *config) { c.cleanup = enabled } }

// WithLogger sets where the backend logs warnings (default: nowhere): a
// fence past backendkit.FenceWarnThreshold, and a client clock more than
// locking.TimeTolerance off the server's. Entries name locks by hash only.
func WithLogger(l *zap.Logger) Option { return func(c *config) { c.log = l } }

// WithClock sets the client's clock (default time.Now). It decides nothing:
// the server's clock is the time authority. It is read only to warn (see
// WithLogger) when the client's clock is off the server's, since times this
// backend returns (ExpiresAt, AcquiredAt) are the server's.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// WithPoolWait bounds how long an operation waits for a pool connection
// while all of them are busy (default DefaultPoolWait); past it the
// operation fails with RateLimited. The caller's context still bounds the
// whole operation.
func WithPoolWait(d time.Duration) Option { return func(c *config) { c.poolWait = d } }

// New returns a backend on pool, creating the tables if they are missing
// (see WithAutoCreateTables) or checking that they exist. It fails with
// InvalidArgument, sending no SQL, for a nil pool or invalid options.
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Backend, error) {
	cfg := config{locks: DefaultLockTable, fences: DefaultFenceTable, autoCreate: true,
		log: zap.NewNop(), now: time.Now, poolWait: DefaultPoolWait}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	switch {
	case pool == nil:
		return nil, invalidConfig("nil pool")
	case cfg.log == nil:
		return nil, invalidConfig("nil logger")
	case cfg.now == nil:
		return nil, invalidConfig("nil clock")
	case cfg.poolWait <= 0:
		return nil, invalidConfig("pool wait %s is not positive", cfg.poolWait)
	}
	if err := validateTables(cfg.locks, cfg.fences); err != nil {
		return nil, err
	}
	b := &Backend{pool: pool, now: cfg.now, log: cfg.log, poolWait: cfg.poolWait, cleanup: cfg.cleanup,
		janitor: backendkit.NewJanitor(cleanupSlots, cleanupTimeout), q: newQueries(cfg.locks, cfg.fences),
		kit: storage()}
	if cfg.autoCreate {
		if err := b.createTables(ctx, cfg.locks, cfg.fences); err != nil {
			return nil, err
		}
	}
	if err := b.checkTables(ctx, cfg.locks, cfg.fences); err != nil {
		return nil, err
	}
	return b, nil
}

func invalidConfig(format string, args ...any) error {
	return &locking.Error{Code: locking.InvalidArgument, Op: "config", Err: fmt.Errorf(format, args...)}
}

// validateTables checks the configuration before any SQL: both names valid
// identifiers (nothing else is ever put into SQL text), and distinct.
func validateTables(locks, fences string) error {
	for _, t := range []struct{ what, name string }{{"lock", locks}, {"fence counter", fences}} {
		if !tableName.MatchString(t.name) || len(t.name) > maxTableName {
			return invalidConfig("invalid %s table name %q: want a lowercase SQL identifier ([a-z_][a-z0-9_]*, at most %d bytes)",
				t.what, t.name, maxTableName)
		}
	}
	if locks == fences {
		return invalidConfig("the fence counter table must differ from the lock table (both %q)", locks)
	}
	return nil
}

// Schema returns the SQL that creates the lock and fence counter tables and
// their indexes (idempotently: IF NOT EXISTS throughout), for teams that
// create tables by migration and use WithAutoCreateTables(false). Empty
// names are invalid, as in WithTables: pass DefaultLockTable and
// DefaultFenceTable for the defaults. The layout is SyncGuard's, so its
// TypeScript backend and this one can share the tables.
func Schema(locks, fences string) (string, error) {
	if err := validateTables(locks, fences); err != nil {
		return "", err
	}
	return strings.Join(schemaStatements(locks, fences), ";\n") + ";\n", nil
}

func schemaStatements(locks, fences string) []string {
	l, f := ident(locks), ident(fences)
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + l + ` (
  key TEXT PRIMARY KEY,
  lock_id TEXT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  acquired_at_ms BIGINT NOT NULL,
  fence TEXT NOT NULL,
  user_key TEXT NOT NULL
)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + ident("idx_"+locks+"_lock_id") + ` ON ` + l + ` (lock_id)`,
		`CREATE INDEX IF NOT EXISTS ` + ident("idx_"+locks+"_expires") + ` ON ` + l + ` (expires_at_ms)`,
		`CREATE TABLE IF NOT EXISTS ` + f + ` (
  fence_key TEXT PRIMARY KEY,
  fence BIGINT NOT NULL DEFAULT 0,
  key_debug TEXT
)`,
	}
}

// ident quotes a validated table or index name.
func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

// schemaLockKey serialises schema creation across processes: concurrent
// CREATE TABLE IF NOT EXISTS can otherwise fail on PostgreSQL's catalog.
const schemaLockKey = "syncguard:schema"

func (b *Backend) createTables(ctx context.Context, locks, fences string) error {
	err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, schemaLockKey); err != nil {
			return err
		}
		for _, s := range schemaStatements(locks, fences) {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return mapErr(ctx, "config", err)
	}
	return nil
}

// checkTables fails with InvalidArgument unless both tables exist and the
// lock table has the unique lock_id index that release and extend rely on.
func (b *Backend) checkTables(ctx context.Context, locks, fences string) error {
	var hasLocks, hasFences, hasIndex bool
	err := b.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, to_regclass($2) IS NOT NULL,
  EXISTS (SELECT 1 FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
          WHERE i.indrelid = to_regclass($1) AND i.indisunique AND i.indnatts = 1 AND a.attname = 'lock_id')`,
		ident(locks), ident(fences)).Scan(&hasLocks, &hasFences, &hasIndex)
	if err != nil {
		return mapErr(ctx, "config", err)
	}
	switch {
	case !hasLocks:
		return invalidConfig("lock table %q does not exist: create it with pglock.Schema or WithAutoCreateTables(true)", locks)
	case !hasFences:
		return invalidConfig("fence counter table %q does not exist: create it with pglock.Schema or WithAutoCreateTables(true)", fences)
	case !hasIndex:
		return invalidConfig("lock table %q has no unique index on lock_id: see pglock.Schema", locks)
	}
	return nil
}

// ConfigurePool sets what this backend needs of a pool's connections: a
// cancelled context sends PostgreSQL a cancel request at once (pgx's default
// only drops the connection), so an operation waiting on a lock is stopped
// on the server too and its transaction rolls back, instead of the server
// completing it later for nobody. NewPool applies it; call it on your own
// pgxpool.Config otherwise.
func ConfigurePool(cfg *pgxpool.Config) {
	cfg.ConnConfig.BuildContextWatcherHandler = func(c *pgconn.PgConn) ctxwatch.Handler {
		// The deadline is the fallback when the cancel request cannot
		// reach the server; it stays within the contract's 500 ms.
		return &pgconn.CancelRequestContextWatcherHandler{Conn: c, DeadlineDelay: 250 * time.Millisecond}
	}
}

// NewPool is pgxpool.New with ConfigurePool applied.
func NewPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr(ctx, "config", Redact(dsn, err))
	}
	return pool, nil
}

// Capabilities reports fencing and server time.
func (b *Backend) Capabilities() locking.Capabilities {
	return locking.Capabilities{Backend: "postgres", SupportsFencing: true, TimeAuthority: "server"}
}

// storage is what PostgreSQL takes: keys up to the B-tree limit, no NUL.
func storage() backendkit.Storage {
	return backendkit.Storage{MaxIDBytes: maxStorageKeyBytes, CheckKey: checkKey, Classify: classify}
}

// checkKey refuses a key with NUL, which PostgreSQL text cannot hold,
// before any I/O rather than as a server error after it.
func checkKey(nkey string) error {
	if strings.ContainsRune(nkey, 0) {
		return errors.New("key contains a NUL character, which PostgreSQL text cannot store")
	}
	return nil
}

// Acquire takes key for ttl if no live lock holds it: one round trip, one
// transaction (see the package comment).
func (b *Backend) Acquire(ctx context.Context, key string, ttl time.Duration) (locking.AcquireResult, error) {
	c, err := b.kit.BeginAcquire(ctx, key, ttl)
	if err != nil {
		return locking.AcquireResult{}, err
	}
	e, lockID, nkey, storageKey, fenceKey := c.Errors, c.LockID, c.Key, c.LockKey, c.FenceKey

	var (
		nowMs, curExpires, newExpires *int64
		free                          bool
		fence                         *string
	)
	err = b.withConn(ctx, func(conn *pgxpool.Conn) error {
		batch := &pgx.Batch{}
		batch.Queue(b.q.acquireLock, storageKey)
		batch.Queue(b.q.acquireCounter, fenceKey, nkey)
		batch.Queue(b.q.acquire, storageKey, fenceKey, lockID, ttl.Milliseconds(), nkey, int64(backendkit.MaxFence)).
			QueryRow(func(r pgx.Row) error { return r.Scan(&nowMs, &curExpires, &free, &fence, &newExpires) })
		return conn.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return locking.AcquireResult{}, e.Map(ctx, err)
	}
	if nowMs != nil {
		b.checkClock(*nowMs)
	}
	switch {
	case !free:
		return locking.AcquireResult{}, nil
	case fence == nil || newExpires == nil:
		// Not live, yet no counter increment: the counter is at the maximum
		// (the statement refuses to pass it), and nothing was written.
		return locking.AcquireResult{}, e.Map(ctx, &locking.Error{Code: locking.Internal,
			Err: fmt.Errorf("fence counter is at the maximum %d; rotate the key namespace", uint64(backendkit.MaxFence))})
	}
	if _, err := backendkit.ParseFence(*fence); err != nil {
		return locking.AcquireResult{}, e.Map(ctx, err)
	}
	if backendkit.FenceNeedsWarning(*fence) {
		b.log.Warn("lock fence is past the warning threshold; acquires fail with Internal above the maximum",
			zap.String("keyHash", e.KeyHash), zap.String("fence", *fence), zap.Uint64("maxFence", backendkit.MaxFence))
	}
	return locking.AcquireResult{OK: true, LockID: lockID, ExpiresAt: time.UnixMilli(*newExpires), Fence: *fence}, nil
}

// Release deletes the lock lockID names if it is live and still lockID's;
// false otherwise. One statement.
func (b *Backend) Release(ctx context.Context, lockID string) (bool, error) {
	ok, _, err := b.ReleaseWithReason(ctx, lockID)
	return ok, err
}

// ReleaseWithReason is Release, also saying why it changed nothing
// (locking.ReasonNotFound or locking.ReasonExpired), from the statement's
// own read.
func (b *Backend) ReleaseWithReason(ctx context.Context, lockID string) (bool, locking.Reason, error) {
	ok, reason, _, err := b.mutate(ctx, "release", b.q.release, lockID)
	return ok, reason, err
}

// Extend sets the live lock lockID names to expire ttl after the server's
// now; OK false if it is not found or not live. One statement.
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
	ok, reason, expires, err := b.mutate(ctx, op, b.q.extend, lockID, ttl.Milliseconds())
	if err != nil || !ok {
		return locking.ExtendResult{}, reason, err
	}
	return locking.ExtendResult{OK: true, ExpiresAt: time.UnixMilli(expires)}, "", nil
}

// mutate runs release's or extend's statement for lockID: it finds the row
// by lock_id FOR UPDATE and changes it only if it carries lockID (the
// explicit ownership check) and is live. It reports whether it changed the
// row, why not, and the row's new expiry.
func (b *Backend) mutate(ctx context.Context, op, sql, lockID string, args ...any) (bool, locking.Reason, int64, error) {
	e, err := b.kit.BeginLockID(ctx, op, lockID)
	if err != nil {
		return false, "", 0, err
	}
	var (
		nowMs, changed  int64
		curExpires, exp *int64
		curLockID       *string
	)
	err = b.withConn(ctx, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, sql, append([]any{lockID}, args...)...).Scan(&nowMs, &curExpires, &curLockID, &changed, &exp)
	})
	if err != nil {
		return false, "", 0, e.Map(ctx, err)
	}
	b.checkClock(nowMs)
	switch {
	case curLockID == nil || *curLockID != lockID:
		return false, locking.ReasonNotFound, 0, nil
	case changed == 0:
		return false, locking.ReasonExpired, 0, nil
	}
	if exp == nil {
		return true, "", 0, nil
	}
	return true, "", *exp, nil
}

// IsLocked reports whether a live lock holds key, by the server's clock. It
// only reads, unless WithCleanupInIsLocked asked it to delete an expired
// row in the background.
func (b *Backend) IsLocked(ctx context.Context, key string) (bool, error) {
	r, err := b.readKey(ctx, "isLocked", key)
	if err != nil {
		return false, err
	}
	live := r.found && locking.IsLive(r.expiresAtMs, r.nowMs)
	if b.cleanup && r.found && !live && r.nowMs-r.expiresAtMs > (locking.TimeTolerance+cleanupGuard).Milliseconds() {
		b.startCleanup(ctx, r.storageKey, r.lockID)
	}
	return live, nil
}

// LookupKey describes the live lock on key, sanitized; nil if there is
// none. It only reads.
func (b *Backend) LookupKey(ctx context.Context, key string) (*locking.LockInfo, error) {
	r, err := b.readKey(ctx, "lookup", key)
	if err != nil {
		return nil, err
	}
	return r.info(), nil
}

// LookupKeyDebug is LookupKey with the raw key and lockId, for debugging
// only: never log the result's Key or LockID. Use locking.GetByKeyRaw.
func (b *Backend) LookupKeyDebug(ctx context.Context, key string) (*locking.LockInfoDebug, error) {
	r, err := b.readKey(ctx, "lookup", key)
	if err != nil {
		return nil, err
	}
	return r.debug(), nil
}

// LookupLockID describes the live lock lockID names, sanitized; nil if
// there is none. It only reads, and is diagnostic: release and extend
// re-check everything themselves.
func (b *Backend) LookupLockID(ctx context.Context, lockID string) (*locking.LockInfo, error) {
	r, err := b.readLockID(ctx, lockID)
	if err != nil {
		return nil, err
	}
	return r.info(), nil
}

// LookupLockIDDebug is LookupLockID with the raw key and lockId, for
// debugging only: never log the result's Key or LockID. Use
// locking.GetByIDRaw.
func (b *Backend) LookupLockIDDebug(ctx context.Context, lockID string) (*locking.LockInfoDebug, error) {
	r, err := b.readLockID(ctx, lockID)
	if err != nil {
		return nil, err
	}
	return r.debug(), nil
}

// row is a lock row as read, with the server's time of the read.
type row struct {
	nowMs                     int64
	found                     bool
	storageKey, lockID, fence string
	userKey                   string
	expiresAtMs, acquiredAtMs int64
}

// info is the sanitized view of a live lock; nil if it is not live.
func (r row) info() *locking.LockInfo {
	if !r.found || r.lockID == "" || !locking.IsLive(r.expiresAtMs, r.nowMs) {
		return nil
	}
	return &locking.LockInfo{
		KeyHash:    locking.HashKey(r.userKey),
		LockIDHash: locking.HashKey(r.lockID),
		ExpiresAt:  time.UnixMilli(r.expiresAtMs),
		AcquiredAt: time.UnixMilli(r.acquiredAtMs),
		Fence:      r.fence,
	}
}

func (r row) debug() *locking.LockInfoDebug {
	info := r.info()
	if info == nil {
		return nil
	}
	return &locking.LockInfoDebug{LockInfo: *info, Key: r.userKey, LockID: r.lockID}
}

// readKey validates key and reads its lock row, with the server's time.
func (b *Backend) readKey(ctx context.Context, op, key string) (row, error) {
	c, err := b.kit.BeginKey(ctx, op, key)
	if err != nil {
		return row{}, err
	}
	r, err := b.read(ctx, c.Errors, b.q.readKey, c.LockKey)
	if err != nil {
		return row{}, err
	}
	if r.found && r.userKey == "" {
		r.userKey = c.Key
	}
	return r, nil
}

// readLockID validates lockID and reads the row carrying it, verifying the
// lock_id it got back (an explicit ownership check, not trusting the index).
func (b *Backend) readLockID(ctx context.Context, lockID string) (row, error) {
	e, err := b.kit.BeginLockID(ctx, "lookup", lockID)
	if err != nil {
		return row{}, err
	}
	r, err := b.read(ctx, e, b.q.readLockID, lockID)
	if err != nil || !r.found || r.lockID != lockID {
		return row{}, err
	}
	if r.userKey == "" {
		r.userKey = r.storageKey
	}
	return r, nil
}

// read runs a lookup query begun (and its context checked) by
// BeginKey or BeginLockID.
func (b *Backend) read(ctx context.Context, e *backendkit.OpErrors, sql string, arg string) (row, error) {
	var (
		r                           row
		key, lockID, fence, userKey *string
		expiresAtMs, acquiredAtMs   *int64
	)
	err := b.withConn(ctx, func(conn *pgxpool.Conn) error {
		return conn.QueryRow(ctx, sql, arg).Scan(&r.nowMs, &key, &lockID, &expiresAtMs, &acquiredAtMs, &fence, &userKey)
	})
	if err != nil {
		return row{}, e.Map(ctx, err)
	}
	if ctx.Err() != nil {
		return row{}, e.Ended(ctx)
	}
	b.checkClock(r.nowMs)
	if key == nil {
		return r, nil
	}
	r.found = true
	r.storageKey, r.lockID, r.fence, r.userKey = *key, deref(lockID), deref(fence), deref(userKey)
	r.expiresAtMs, r.acquiredAtMs = deref(expiresAtMs), deref(acquiredAtMs)
	return r, nil
}

// deref is *p, or the zero value for a NULL column.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// startCleanup deletes the expired lock row in the background if a cleanup
// slot is free; otherwise it does nothing. It never blocks.
func (b *Backend) startCleanup(ctx context.Context, storageKey, lockID string) {
	b.janitor.TryGo(ctx, func(ctx context.Context) {
		var tag pgconn.CommandTag
		err := b.withConn(ctx, func(conn *pgxpool.Conn) error {
			var err error
			tag, err = conn.Exec(ctx, b.q.cleanup, storageKey, lockID, (locking.TimeTolerance + cleanupGuard).Milliseconds())
			return err
		})
		if b.cleanupDone != nil {
			b.cleanupDone(err == nil && tag.RowsAffected() == 1, err)
		}
	})
}

// Close stops the background cleanups IsLocked starts with
// WithCleanupInIsLocked, cancelling those in flight, and waits for them to
// return, so that no goroutine of the backend outlives it. It does not
// close the pool passed to New: that stays the caller's, and the backend's
// operations keep working on it, but IsLocked starts no more cleanups.
// Close the backend before the pool. Close is idempotent and returns nil.
func (b *Backend) Close() error {
	b.janitor.Close()
	return nil
}

// checkClock warns when the client's clock is off the server's by more
// than the liveness tolerance: nothing here depends on it, but code that
// compares returned times with time.Now does.
func (b *Backend) checkClock(serverMs int64) {
	skew := time.Duration(b.now().UnixMilli()-serverMs) * time.Millisecond
	if skew > locking.TimeTolerance || skew < -locking.TimeTolerance {
		b.log.Warn("client clock is off the PostgreSQL server's; the server's decides lock expiry, and times returned are the server's",
			zap.Duration("skew", skew))
	}
}

// errPoolWait is the cause of a pool wait that ran out.
var errPoolWait = errors.New("pool wait ran out")

// withConn runs fn on a pool connection, waiting at most the pool wait for
// one while all are busy.
func (b *Backend) withConn(ctx context.Context, fn func(*pgxpool.Conn) error) error {
	wctx, cancel := context.WithTimeoutCause(ctx, b.poolWait, errPoolWait)
	conn, err := b.pool.Acquire(wctx)
	exhausted := err != nil && ctx.Err() == nil && context.Cause(wctx) == errPoolWait
	cancel()
	if exhausted {
		st := b.pool.Stat()
		if st.AcquiredConns() >= st.MaxConns() {
			return &locking.Error{Code: locking.RateLimited,
				Err: fmt.Errorf("connection pool exhausted: all %d connections busy for %s", st.MaxConns(), b.poolWait)}
		}
		return &locking.Error{Code: locking.ServiceUnavailable,
			Err: fmt.Errorf("no connection to PostgreSQL within %s: %w", b.poolWait, err)}
	}
	if err != nil {
		return err
	}
	defer conn.Release()
	return fn(conn)
}

// mapErr for operations that name no lock.
func mapErr(ctx context.Context, op string, err error) error {
	return storage().Errors(op).Map(ctx, err)
}

// classify maps errors as SyncGuard does. A cancelled context is Aborted
// and an expired one NetworkTimeout, whatever error the driver surfaced
// them as.
func classify(ctx context.Context, err error) locking.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return locking.Aborted
	case errors.Is(err, context.DeadlineExceeded):
		return locking.NetworkTimeout
	}
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return locking.NetworkTimeout
		}
		return locking.Aborted
	}
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return classifySQLState(pg.Code)
	}
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return locking.NetworkTimeout
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, new(*pgconn.ConnectError)), errors.As(err, &ne), pgconn.SafeToRetry(err):
		return locking.ServiceUnavailable
	case strings.Contains(err.Error(), "closed pool"), strings.Contains(err.Error(), "conn closed"):
		// pgxpool's and pgx's closed-pool/connection errors are plain
		// errors without a type to match.
		return locking.ServiceUnavailable
	}
	return locking.Internal
}

// classifySQLState maps a SQLSTATE: connection exceptions, insufficient
// resources, operator intervention (a terminated backend, a shutdown) and
// transaction rollbacks (serialization failure, deadlock) are transient;
// authorization failures AuthFailed; data exceptions, integrity violations
// and a missing table or column InvalidArgument; a statement or lock
// timeout NetworkTimeout; the rest Internal.
func classifySQLState(code string) locking.Code {
	switch code {
	case "57014", "55P03": // query_canceled (statement_timeout), lock_not_available
		return locking.NetworkTimeout
	case "42501": // insufficient_privilege
		return locking.AuthFailed
	case "42P01", "42703": // undefined_table, undefined_column: misconfigured tables
		return locking.InvalidArgument
	}
	if len(code) < 2 {
		return locking.Internal
	}
	switch code[:2] {
	case "08", "53", "57", "40":
		return locking.ServiceUnavailable
	case "28":
		return locking.AuthFailed
	case "22", "23":
		return locking.InvalidArgument
	}
	return locking.Internal
}
