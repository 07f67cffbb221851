package pglock

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/pgserver"
)

// pg is the cluster the package's tests share; each test uses its own
// tables (pgserver.Tables).
var pg *pgserver.Server

func TestMain(m *testing.M) { os.Exit(pgserver.Main(m, &pg)) }

// testPool is a pool on the shared cluster configured as NewPool does.
func testPool(t testing.TB, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	return pg.TestPool(t, append([]func(*pgxpool.Config){ConfigurePool}, configure...)...)
}

// testBackend is a backend on fresh tables, with opts.
func testBackend(t testing.TB, opts ...Option) (*Backend, string, string) {
	t.Helper()
	locks, fences := pgserver.Tables(t)
	b, err := New(context.Background(), testPool(t), append([]Option{WithTables(locks, fences)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b, locks, fences
}
