package pglock

import (
	"context"
	"testing"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/locktest"
)

// conformanceBackend is the PostgreSQL backend with a record count, so the
// suite can check that rejected operations and lookups write nothing.
type conformanceBackend struct {
	*Backend
	locks, fences string
}

// CountRecords counts the lock rows and fence counters.
func (b conformanceBackend) CountRecords(ctx context.Context) (int, error) {
	var n int
	err := b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM `+ident(b.locks)+`) + (SELECT count(*) FROM `+ident(b.fences)+`)`).Scan(&n)
	return n, err
}

// The PostgreSQL backend passes the backend-neutral conformance suite, each
// subtest on tables of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Run(t, func(t *testing.T) locking.Backend {
		b, locks, fences := testBackend(t)
		return conformanceBackend{Backend: b, locks: locks, fences: fences}
	})
}
