package pglock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/backendkit"
	"github.com/snapwriter/snapwriter/locking/internal/closetest"
	"github.com/snapwriter/snapwriter/locking/locktest"
	"github.com/snapwriter/snapwriter/pgserver"
)

// counter reads a key's fence counter (-1: no row).
func counter(t *testing.T, pool *pgxpool.Pool, fences, key string) int64 {
	t.Helper()
	k, err := storage().Keys("test", key)
	if err != nil {
		t.Fatal(err)
	}
	fenceKey := k.FenceKey
	var n int64
	err = pool.QueryRow(t.Context(), `SELECT fence FROM `+ident(fences)+` WHERE fence_key = $1`, fenceKey).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1
	}
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lockRows counts the rows of a lock table.
func lockRows(t *testing.T, pool *pgxpool.Pool, locks string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM `+ident(locks)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// 32 goroutines acquiring a never-seen key at once (its counter row absent)
// get exactly one winner, with fence 1; then 100 rounds of 8 contenders
// each produce exactly one winner per round and strictly increasing fences.
func TestAbsentRowRace(t *testing.T) {
	t.Parallel()
	b, _, fences := testBackend(t)
	ctx := t.Context()
	const key = "absent-row"
	race := func(n int) []locking.AcquireResult {
		wins, errs := locktest.AcquireAtOnce(ctx, b, key, time.Minute, n)
		for _, err := range errs {
			t.Error(err)
		}
		return wins
	}
	wins := race(32)
	if len(wins) != 1 || wins[0].Fence != "000000000000001" {
		t.Fatalf("32 acquires of a new key: %d winners %v; want one with fence 1", len(wins), wins)
	}
	fencesSeen := []string{wins[0].Fence}
	if ok, err := b.Release(ctx, wins[0].LockID); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for round := range 100 {
		w := race(8)
		if len(w) != 1 {
			t.Fatalf("round %d: %d winners; want exactly 1", round, len(w))
		}
		fencesSeen = append(fencesSeen, w[0].Fence)
		if ok, err := b.Release(ctx, w[0].LockID); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	for i := 1; i < len(fencesSeen); i++ {
		if fencesSeen[i] <= fencesSeen[i-1] {
			t.Fatalf("fence %d %s not above %s", i, fencesSeen[i], fencesSeen[i-1])
		}
	}
	if got := counter(t, b.pool, fences, key); got != 101 {
		t.Errorf("counter = %d after 101 acquisitions", got)
	}
}

// The liveness predicate in SQL decides exactly as locking.IsLive, at and
// around the tolerance boundary and at the extremes.
func TestLivePredicateMatchesIsLive(t *testing.T) {
	t.Parallel()
	pool := testPool(t)
	tol := locking.TimeTolerance.Milliseconds()
	now := time.Now().UnixMilli()
	var cases [][2]int64
	for _, d := range []int64{-tol - 2, -tol - 1, -tol, -tol + 1, -tol + 2, -1, 0, 1, 30_000, -30_000} {
		cases = append(cases, [2]int64{now + d, now})
	}
	cases = append(cases, [2]int64{0, now}, [2]int64{1 << 53, now}, [2]int64{now, 0})
	q := `SELECT ` + livePredicate("$1::bigint", "$2::bigint")
	for _, c := range cases {
		var got bool
		if err := pool.QueryRow(t.Context(), q, c[0], c[1]).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if want := locking.IsLive(c[0], c[1]); got != want {
			t.Errorf("expires %d, now %d (Δ %d ms): SQL says live=%v, IsLive %v", c[0], c[1], c[0]-c[1], got, want)
		}
	}
}

// Server time decides: clients whose clocks are an hour fast, an hour slow
// or right see the same outcomes, get expiries by the server's clock, and
// a skewed client is warned about.
func TestServerTimeAuthority(t *testing.T) {
	t.Parallel()
	locks, fences := pgserver.Tables(t)
	pool := testPool(t)
	type step struct {
		What string
		OK   bool
	}
	run := func(skew time.Duration, key string) ([]step, *observer.ObservedLogs) {
		core, logs := observer.New(zap.WarnLevel)
		b, err := New(t.Context(), pool, WithTables(locks, fences), WithLogger(zap.New(core)),
			WithClock(func() time.Time { return time.Now().Add(skew) }))
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		var s []step
		add := func(what string, ok bool, err error) {
			if err != nil {
				t.Fatalf("skew %s: %s: %v", skew, what, err)
			}
			s = append(s, step{what, ok})
		}
		const ttl = 300 * time.Millisecond
		before := time.Now()
		a, err := b.Acquire(ctx, key, ttl)
		add("acquire", a.OK, err)
		// Expiry by the server's clock (the real one here), not the client's.
		if !locktest.Within(a.ExpiresAt, before.Add(ttl), time.Now().Add(ttl), 50*time.Millisecond) {
			t.Errorf("skew %s: ExpiresAt %s is not the server's now + ttl (~%s)", skew, a.ExpiresAt, before.Add(ttl))
		}
		c, err := b.Acquire(ctx, key, ttl)
		add("contend", c.OK, err)
		locked, err := b.IsLocked(ctx, key)
		add("isLocked", locked, err)
		e, err := b.Extend(ctx, a.LockID, ttl)
		add("extend", e.OK, err)
		info, err := b.LookupKey(ctx, key)
		add("lookup", info != nil, err)
		// The server's real clock decides: wait out the tolerance (no
		// sooner can the lock be free), then poll until it is.
		time.Sleep(time.Until(e.ExpiresAt.Add(locking.TimeTolerance)))
		deadline := time.Now().Add(time.Second)
		for locked, err = b.IsLocked(ctx, key); err == nil && locked && time.Now().Before(deadline); locked, err = b.IsLocked(ctx, key) {
			time.Sleep(10 * time.Millisecond)
		}
		add("isLocked after expiry", locked, err)
		e, err = b.Extend(ctx, a.LockID, ttl)
		add("extend after expiry", e.OK, err)
		a2, err := b.Acquire(ctx, key, ttl)
		add("reacquire", a2.OK, err)
		ok, err := b.Release(ctx, a.LockID)
		add("stale release", ok, err)
		ok, err = b.Release(ctx, a2.LockID)
		add("release", ok, err)
		return s, logs
	}
	var (
		mu   sync.Mutex
		got  = map[time.Duration][]step{}
		warn = map[time.Duration]int{}
		wg   sync.WaitGroup
	)
	for _, skew := range []time.Duration{0, time.Hour, -time.Hour} {
		wg.Go(func() {
			s, logs := run(skew, "skew-"+skew.String())
			mu.Lock()
			defer mu.Unlock()
			got[skew], warn[skew] = s, logs.FilterMessageSnippet("client clock").Len()
		})
	}
	wg.Wait()
	want := []step{{"acquire", true}, {"contend", false}, {"isLocked", true}, {"extend", true}, {"lookup", true},
		{"isLocked after expiry", false}, {"extend after expiry", false}, {"reacquire", true}, {"stale release", false}, {"release", true}}
	for skew, s := range got {
		if !slices.Equal(s, want) {
			t.Errorf("skew %s: outcomes %v; want %v", skew, s, want)
		}
	}
	if warn[0] != 0 || warn[time.Hour] == 0 || warn[-time.Hour] == 0 {
		t.Errorf("clock warnings: %v; want none for the right clock, some for skewed ones", warn)
	}
}

// queryCounter counts the queries a pool sends.
type queryCounter struct{ n atomic.Int64 }

func (q *queryCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	q.n.Add(1)
	return ctx
}
func (q *queryCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// Table names that are not plain lowercase identifiers, and a lock table
// equal to the fence table, are refused with InvalidArgument before any
// SQL is sent; Schema refuses them too.
func TestTableNameValidation(t *testing.T) {
	t.Parallel()
	qc := &queryCounter{}
	pool := testPool(t, func(c *pgxpool.Config) { c.ConnConfig.Tracer = qc })
	bad := [][2]string{
		{"locks; DROP TABLE x", "fences"},
		{"locks", "fences; DROP TABLE x --"},
		{`locks"; DROP TABLE x; --`, "fences"},
		{"it's", "fences"},
		{"", "fences"},
		{"locks", ""},
		{"Locks", "fences"},
		{"public.locks", "fences"},
		{"1locks", "fences"},
		{"lo cks", "fences"},
		{"locks\x00", "fences"},
		{"lócks", "fences"},
		{strings.Repeat("l", 52), "fences"},
		{"same", "same"},
	}
	for _, c := range bad {
		_, err := New(t.Context(), pool, WithTables(c[0], c[1]))
		if !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("New(tables %q, %q) = %v; want InvalidArgument", c[0], c[1], err)
		}
		if _, err := Schema(c[0], c[1]); !errors.Is(err, locking.ErrInvalidArgument) {
			t.Errorf("Schema(%q, %q) = %v; want InvalidArgument", c[0], c[1], err)
		}
	}
	if _, err := New(t.Context(), nil); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("New(nil pool) = %v", err)
	}
	if _, err := New(t.Context(), pool, WithPoolWait(0)); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("New(pool wait 0) = %v", err)
	}
	if n := qc.n.Load(); n != 0 {
		t.Errorf("%d queries sent while validating bad configurations; want none", n)
	}
	// The longest accepted name works end to end.
	long := strings.Repeat("l", maxTableName)
	if _, err := New(t.Context(), pool, WithTables(long, "f"+long[1:])); err != nil {
		t.Errorf("a %d-byte table name: %v", maxTableName, err)
	}
}

// Schema creates exactly SyncGuard's layout; WithAutoCreateTables(false)
// refuses missing tables and accepts Schema's; concurrent New calls on new
// tables all succeed.
func TestSchema(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	pool := testPool(t)
	locks, fences := pgserver.Tables(t)
	if _, err := New(ctx, pool, WithTables(locks, fences), WithAutoCreateTables(false)); !errors.Is(err, locking.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("New without tables and without auto-create = %v; want InvalidArgument naming the missing table", err)
	}
	ddl, err := Schema(locks, fences)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("Schema's SQL: %v\n%s", err, ddl)
	}
	if _, err := pool.Exec(ctx, ddl); err != nil {
		t.Fatalf("Schema's SQL is not idempotent: %v", err)
	}
	if _, err := New(ctx, pool, WithTables(locks, fences), WithAutoCreateTables(false)); err != nil {
		t.Fatal(err)
	}
	cols := func(table string) []string {
		rows, _ := pool.Query(ctx, `SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' ' || coalesce(column_default, '-')
FROM information_schema.columns WHERE table_name = $1 ORDER BY ordinal_position`, table)
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	wantLocks := []string{"key text NO -", "lock_id text NO -", "expires_at_ms bigint NO -", "acquired_at_ms bigint NO -",
		"fence text NO -", "user_key text NO -"}
	wantFences := []string{"fence_key text NO -", "fence bigint NO 0", "key_debug text YES -"}
	if got := cols(locks); !slices.Equal(got, wantLocks) {
		t.Errorf("lock table columns %q; want %q", got, wantLocks)
	}
	if got := cols(fences); !slices.Equal(got, wantFences) {
		t.Errorf("fence table columns %q; want %q", got, wantFences)
	}
	rows, _ := pool.Query(ctx, `SELECT indexdef FROM pg_indexes WHERE tablename = $1 ORDER BY indexname`, locks)
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	wantIdx := []string{
		fmt.Sprintf("CREATE INDEX idx_%s_expires ON public.%s USING btree (expires_at_ms)", locks, locks),
		fmt.Sprintf("CREATE UNIQUE INDEX idx_%s_lock_id ON public.%s USING btree (lock_id)", locks, locks),
		fmt.Sprintf("CREATE UNIQUE INDEX %s_pkey ON public.%s USING btree (key)", locks, locks),
	}
	if !slices.Equal(idx, wantIdx) {
		t.Errorf("indexes %q; want %q", idx, wantIdx)
	}

	// A lock table without the unique lock_id index is refused.
	l2, f2 := pgserver.Tables(t)
	if _, err := pool.Exec(ctx, `CREATE TABLE `+l2+` (key TEXT PRIMARY KEY, lock_id TEXT NOT NULL, expires_at_ms BIGINT NOT NULL,
 acquired_at_ms BIGINT NOT NULL, fence TEXT NOT NULL, user_key TEXT NOT NULL); CREATE TABLE `+f2+` (fence_key TEXT PRIMARY KEY, fence BIGINT NOT NULL DEFAULT 0, key_debug TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := New(ctx, pool, WithTables(l2, f2), WithAutoCreateTables(false)); !errors.Is(err, locking.ErrInvalidArgument) ||
		!strings.Contains(err.Error(), "unique index") {
		t.Errorf("New on a lock table without the lock_id index = %v", err)
	}

	// Eight processes' worth of New on the same new tables at once.
	l3, f3 := pgserver.Tables(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := New(ctx, testPool(t), WithTables(l3, f3)); err != nil {
				t.Errorf("concurrent New: %v", err)
			}
		})
	}
	wg.Wait()
}

// A fence at the maximum is handed out once; the next acquire fails with
// Internal and writes nothing. Past the warning threshold, acquires log a
// warning naming the key by hash only.
func TestFenceLimits(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.WarnLevel)
	b, locks, fences := testBackend(t, WithLogger(zap.New(core)))
	ctx := t.Context()
	const key = "nearly-exhausted"
	r := locktest.MustAcquire(t, b, key, time.Minute)
	if ok, _ := b.Release(ctx, r.LockID); !ok {
		t.Fatal("release")
	}
	k, _ := storage().Keys("test", key)
	fenceKey := k.FenceKey
	if _, err := b.pool.Exec(ctx, `UPDATE `+ident(fences)+` SET fence = $1 WHERE fence_key = $2`, int64(backendkit.MaxFence-1), fenceKey); err != nil {
		t.Fatal(err)
	}
	r = locktest.MustAcquire(t, b, key, time.Minute)
	if r.Fence != "900000000000000" {
		t.Errorf("fence %s; want the maximum", r.Fence)
	}
	if logs.FilterMessageSnippet("warning threshold").Len() == 0 {
		t.Error("no warning past the threshold")
	}
	for _, e := range logs.All() {
		if strings.Contains(fmt.Sprint(e.ContextMap()), key) {
			t.Errorf("log entry names the raw key: %v", e.ContextMap())
		}
	}
	if ok, _ := b.Release(ctx, r.LockID); !ok {
		t.Fatal("release")
	}
	_, err := b.Acquire(ctx, key, time.Minute)
	if !errors.Is(err, locking.ErrInternal) {
		t.Fatalf("acquire past the maximum = %v; want Internal", err)
	}
	if n := lockRows(t, b.pool, locks); n != 0 {
		t.Errorf("%d lock rows after the refused acquire", n)
	}
	if got := counter(t, b.pool, fences, key); got != backendkit.MaxFence {
		t.Errorf("counter %d after the refused acquire; want it left at the maximum", got)
	}
}

// holdAdvisory opens a transaction holding key's advisory lock, as an
// acquire in progress (ours or a TypeScript peer's) does; the returned
// func commits it.
func holdAdvisory(t *testing.T, pool *pgxpool.Pool, key string) (pid uint32, done func()) {
	t.Helper()
	k, _ := storage().Keys("test", key)
	storageKey := k.LockKey
	tx, err := pool.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock(hashtext($1))`, storageKey); err != nil {
		t.Fatal(err)
	}
	return tx.Conn().PgConn().PID(), func() { _ = tx.Commit(context.Background()) }
}

// waitingPID returns the backend waiting for an advisory lock (other than
// skip), waiting up to 5 s for one to appear.
func waitingPID(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var pid int
		err := pool.QueryRow(t.Context(), `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted LIMIT 1`).Scan(&pid)
		if err == nil {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("no acquire is waiting on an advisory lock")
	return 0
}

// Killing an acquire's connection while it waits for the key, or a peer's
// connection half-way through its acquire transaction, leaves no lock and
// no counter increment behind, and the pool carries on.
func TestKilledConnection(t *testing.T) {
	// Not parallel: it watches pg_locks for the one waiting acquire.
	b, locks, fences := testBackend(t)
	admin := pg.TestPool(t)
	ctx := t.Context()
	const key = "killed"

	// 1. Our acquire, killed while waiting behind another holder.
	_, commit := holdAdvisory(t, admin, key)
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, key, time.Minute)
		errc <- err
	}()
	pid := waitingPID(t, admin)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	err := <-errc
	if !errors.Is(err, locking.ErrServiceUnavailable) {
		t.Errorf("acquire on a killed connection = %v; want ServiceUnavailable", err)
	}
	commit()
	if n := lockRows(t, b.pool, locks); n != 0 {
		t.Errorf("%d lock rows after the killed acquire", n)
	}
	if c := counter(t, b.pool, fences, key); c != -1 {
		t.Errorf("fence counter %d after the killed acquire; want none", c)
	}

	// 2. A peer killed after writing its lock row and counter, before
	// committing.
	peer := pg.TestPool(t)
	tx, err := peer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	k, _ := storage().Keys("test", key)
	storageKey, fenceKey := k.LockKey, k.FenceKey
	lockID, _ := backendkit.NewLockID()
	for _, s := range []struct {
		sql  string
		args []any
	}{
		{`SELECT pg_advisory_xact_lock(hashtext($1))`, []any{storageKey}},
		{`INSERT INTO ` + ident(fences) + ` (fence_key, fence, key_debug) VALUES ($1, 0, $2) ON CONFLICT DO NOTHING`, []any{fenceKey, key}},
		{`UPDATE ` + ident(fences) + ` SET fence = fence + 1 WHERE fence_key = $1`, []any{fenceKey}},
		{`INSERT INTO ` + ident(locks) + ` VALUES ($1, $2, 9e15, 0, '000000000000001', $3)`, []any{storageKey, lockID, key}},
	} {
		if _, err := tx.Exec(ctx, s.sql, s.args...); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		r, err := b.Acquire(ctx, key, time.Minute)
		if err == nil && !r.OK {
			err = errors.New("acquire found the key locked")
		}
		if err == nil && r.Fence != "000000000000001" {
			err = fmt.Errorf("fence %s; want 1: the killed peer's increment survived", r.Fence)
		}
		errc <- err
	}()
	waitingPID(t, admin)
	if _, err := admin.Exec(ctx, `SELECT pg_terminate_backend($1)`, tx.Conn().PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Errorf("acquire after the peer was killed: %v", err)
	}
	// The peer's connection is dead; rolling back hands it back to the
	// pool, which discards it.
	_ = tx.Rollback(ctx)
	// 3. The pool recovered: every operation works.
	if ok, err := b.IsLocked(ctx, key); !ok || err != nil {
		t.Errorf("IsLocked = %v, %v", ok, err)
	}
}

// Cancelling an acquire that waits behind another holder returns Aborted
// within 500 ms and stops it on the server: when the holder finishes, the
// cancelled acquire has written nothing.
func TestCancelStopsServerSide(t *testing.T) {
	b, locks, fences := testBackend(t)
	admin := pg.TestPool(t)
	const key = "cancelled"
	_, commit := holdAdvisory(t, admin, key)
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Acquire(ctx, key, time.Minute)
		errc <- err
	}()
	waitingPID(t, admin)
	cancelled := time.Now()
	cancel()
	err := <-errc
	if d := time.Since(cancelled); d > 500*time.Millisecond {
		t.Errorf("acquire returned %s after cancellation; want < 500 ms", d)
	}
	if !errors.Is(err, locking.ErrAborted) {
		t.Errorf("cancelled acquire = %v; want Aborted", err)
	}
	commit()
	time.Sleep(200 * time.Millisecond) // nothing to poll for: give a server that had not stopped time to finish
	if n := lockRows(t, b.pool, locks); n != 0 {
		t.Errorf("%d lock rows: the cancelled acquire completed on the server", n)
	}
	if c := counter(t, b.pool, fences, key); c != -1 {
		t.Errorf("fence counter %d: the cancelled acquire completed on the server", c)
	}
	locktest.MustAcquire(t, b, key, time.Minute)
}

// With every pool connection busy past the pool wait, operations fail with
// RateLimited; the caller's own deadline still wins when it is sooner.
func TestPoolExhausted(t *testing.T) {
	t.Parallel()
	locks, fences := pgserver.Tables(t)
	pool := testPool(t, func(c *pgxpool.Config) { c.MaxConns = 1 })
	b, err := New(t.Context(), pool, WithTables(locks, fences), WithPoolWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	held, err := pool.Acquire(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	_, err = b.Acquire(t.Context(), "k", time.Minute)
	if !errors.Is(err, locking.ErrRateLimited) {
		t.Errorf("acquire on an exhausted pool = %v; want RateLimited", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.IsLocked(ctx, "k"); !errors.Is(err, locking.ErrNetworkTimeout) {
		t.Errorf("isLocked with a sooner deadline = %v; want NetworkTimeout", err)
	}
	held.Release()
	locktest.MustAcquire(t, b, "k", time.Minute)
}

// The Go backend and a peer running SyncGuard's literal transactions (as
// SyncGuard's TypeScript backend does) on the same tables exclude each
// other and share one fence sequence.
func TestSpecPeerInterop(t *testing.T) {
	t.Parallel()
	b, locks, fences := testBackend(t)
	peer := specPeer{pool: b.pool, locks: locks, fences: fences}
	ctx := t.Context()
	const key = "shared"
	var last string
	for i := range 10 {
		var holder, other interface {
			Acquire(context.Context, string, time.Duration) (locking.AcquireResult, error)
			Release(context.Context, string) (bool, error)
		} = b, peer
		if i%2 == 1 {
			holder, other = peer, b
		}
		r, err := holder.Acquire(ctx, key, time.Minute)
		if err != nil || !r.OK || r.Fence <= last {
			t.Fatalf("round %d: acquire %+v, %v (last fence %s)", i, r, err, last)
		}
		last = r.Fence
		if o, err := other.Acquire(ctx, key, time.Minute); err != nil || o.OK {
			t.Fatalf("round %d: the other side acquired a held lock: %+v, %v", i, o, err)
		}
		if ok, err := other.Release(ctx, r.LockID); !ok || err != nil {
			t.Fatalf("round %d: release by lockId from the other side: %v, %v", i, ok, err)
		}
	}
	if last != "000000000000010" {
		t.Errorf("last fence %s; want 10", last)
	}
	// Concurrently, from both sides: never two holders at once.
	var holders, overlaps atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		var be interface {
			Acquire(context.Context, string, time.Duration) (locking.AcquireResult, error)
			Release(context.Context, string) (bool, error)
		} = b
		if i%2 == 1 {
			be = peer
		}
		wg.Go(func() {
			for range 15 {
				r, err := be.Acquire(ctx, key, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				if !r.OK {
					continue
				}
				if holders.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(time.Millisecond) // hold the lock a while, so that an overlap would show
				holders.Add(-1)
				if ok, err := be.Release(ctx, r.LockID); !ok || err != nil {
					t.Errorf("release: %v, %v", ok, err)
				}
			}
		})
	}
	wg.Wait()
	if overlaps.Load() != 0 {
		t.Errorf("%d overlapping holders between the Go backend and the spec peer", overlaps.Load())
	}
}

// IsLocked with cleanup deletes only a lock row expired past the guard and
// never a fence counter; without it IsLocked writes nothing.
func TestCleanupInIsLocked(t *testing.T) {
	t.Parallel()
	done := make(chan bool, 1)
	b, locks, fences := testBackend(t, WithCleanupInIsLocked(true))
	b.cleanupDone = func(deleted bool, err error) {
		if err != nil {
			t.Error(err)
		}
		done <- deleted
	}
	ctx := t.Context()
	r := locktest.MustAcquire(t, b, "old", time.Minute)
	// Age the lock: expired 10 s ago.
	if _, err := b.pool.Exec(ctx, `UPDATE `+ident(locks)+` SET expires_at_ms = expires_at_ms - 70000 WHERE lock_id = $1`, r.LockID); err != nil {
		t.Fatal(err)
	}
	if locked, err := b.IsLocked(ctx, "old"); locked || err != nil {
		t.Fatalf("IsLocked = %v, %v", locked, err)
	}
	select {
	case deleted := <-done:
		if !deleted {
			t.Error("cleanup did not delete the expired row")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cleanup")
	}
	if n := lockRows(t, b.pool, locks); n != 0 {
		t.Errorf("%d lock rows after cleanup", n)
	}
	if c := counter(t, b.pool, fences, "old"); c != 1 {
		t.Errorf("fence counter %d after cleanup; want 1, untouched", c)
	}
	// A lock only just expired (within the guard) is left alone.
	r = locktest.MustAcquire(t, b, "recent", time.Minute)
	if _, err := b.pool.Exec(ctx, `UPDATE `+ident(locks)+` SET expires_at_ms = expires_at_ms - 61500 WHERE lock_id = $1`, r.LockID); err != nil {
		t.Fatal(err)
	}
	if locked, _ := b.IsLocked(ctx, "recent"); locked {
		t.Error("a lock expired 1.5 s ago reads as locked")
	}
	_ = b.Close() // waits for any cleanup IsLocked started
	select {
	case <-done:
		t.Error("cleanup started for a lock within the guard")
	default:
	}
	if n := lockRows(t, b.pool, locks); n != 1 {
		t.Errorf("%d lock rows; the recently expired lock was deleted", n)
	}
}

// Close waits for the cleanup in flight, and after it IsLocked starts
// none, while the backend's operations go on working on the pool.
func TestCloseStopsCleanups(t *testing.T) {
	t.Parallel()
	b, locks, _ := testBackend(t, WithCleanupInIsLocked(true))
	cleanups := make(chan error, 4)
	b.cleanupDone = func(_ bool, err error) { cleanups <- err }
	closetest.CloseStopsCleanups(t, closetest.Backend{Backend: b, Close: b.Close, Cleanups: cleanups,
		Expire: func(t *testing.T, rs ...locking.AcquireResult) {
			for _, r := range rs {
				if _, err := b.pool.Exec(t.Context(), `UPDATE `+ident(locks)+` SET expires_at_ms = expires_at_ms - 70000 WHERE lock_id = $1`, r.LockID); err != nil {
					t.Fatal(err)
				}
			}
		}})
}
