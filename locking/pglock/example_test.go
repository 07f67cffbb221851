package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/pglock"
)

// Example runs a function while holding a fenced lock kept in PostgreSQL,
// on the tables SyncGuard's TypeScript backend uses.
func Example() {
	ctx := context.Background()
	// NewPool applies ConfigurePool: a cancelled context stops the
	// operation on the server too.
	pool, err := pglock.NewPool(ctx, os.Getenv("LOCK_DSN")) // "postgres://locker@db:5432/ops"
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	backend, err := pglock.New(ctx, pool) // creates syncguard_locks and syncguard_fence_counters if missing
	if err != nil {
		log.Fatal(err)
	}
	defer backend.Close() // before the pool: it stops the backend's background work

	errFencedOut := errors.New("a newer lock holder has written the report")
	err = locking.Do(ctx, backend, "report:2026-11-20", func(ctx context.Context, l *locking.Lease) error {
		// ctx ends if the lock is lost. Stamp the fence on the row the
		// lock guards, and write only over an older fence: a holder that
		// lost the lock without noticing yet cannot overwrite its
		// successor. (Fences compare as strings.)
		tag, err := pool.Exec(ctx, `UPDATE reports SET body = $1, fence = $2 WHERE day = $3 AND fence <= $2`,
			"…", l.Fence(), "2026-11-20")
		if err == nil && tag.RowsAffected() == 0 {
			err = errFencedOut
		}
		return err
	}, locking.WithTTL(30*time.Second))
	switch {
	case errors.Is(err, locking.ErrAcquisitionTimeout):
		fmt.Println("someone else holds the lock")
	case errors.Is(err, errFencedOut), errors.Is(err, locking.ErrLeaseLost):
		fmt.Println("lost the lock mid-way; a newer holder took over")
	case err != nil:
		log.Fatal(err)
	}
}

// ExampleSchema prints the DDL for teams that create tables by migration;
// New then only checks them.
func ExampleSchema() {
	ddl, err := pglock.Schema(pglock.DefaultLockTable, pglock.DefaultFenceTable)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(ddl) // then pglock.New(ctx, pool, pglock.WithAutoCreateTables(false))
	// Output:
	// CREATE TABLE IF NOT EXISTS "syncguard_locks" (
	//   key TEXT PRIMARY KEY,
	//   lock_id TEXT NOT NULL,
	//   expires_at_ms BIGINT NOT NULL,
	//   acquired_at_ms BIGINT NOT NULL,
	//   fence TEXT NOT NULL,
	//   user_key TEXT NOT NULL
	// );
	// CREATE UNIQUE INDEX IF NOT EXISTS "idx_syncguard_locks_lock_id" ON "syncguard_locks" (lock_id);
	// CREATE INDEX IF NOT EXISTS "idx_syncguard_locks_expires" ON "syncguard_locks" (expires_at_ms);
	// CREATE TABLE IF NOT EXISTS "syncguard_fence_counters" (
	//   fence_key TEXT PRIMARY KEY,
	//   fence BIGINT NOT NULL DEFAULT 0,
	//   key_debug TEXT
	// );
}
