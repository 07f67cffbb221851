package lockstore_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/lockstore"
	"github.com/snapwriter/snapwriter/locking/pglock"
	"github.com/snapwriter/snapwriter/pgserver"
)

var (
	emu *emulator.Emulator
	pg  *pgserver.Server
)

func TestMain(m *testing.M) {
	os.Exit(pgserver.Main(m, &pg, func() int { return emulator.Main(m, &emu) }))
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		c    lockstore.Config
		want error // nil: valid
	}{
		{lockstore.Config{Backend: lockstore.Firestore}, nil},
		{lockstore.Config{Backend: lockstore.Postgres, DSN: "postgres://locker@db:5432/ops"}, nil},
		{lockstore.Config{Backend: lockstore.Postgres, DSN: "host=db dbname=ops"}, nil},
		{lockstore.Config{}, lockstore.ErrUnknownBackend},
		{lockstore.Config{Backend: "etcd"}, lockstore.ErrUnknownBackend},
		{lockstore.Config{Backend: lockstore.Firestore, DSN: "host=db"}, lockstore.ErrDSNUnused},
		{lockstore.Config{Backend: lockstore.Postgres}, lockstore.ErrDSNRequired},
		{lockstore.Config{Backend: lockstore.Postgres, DSN: "postgres://u:s3cret@db:port/ops"}, locking.ErrInvalidArgument},
	} {
		err := tc.c.Check()
		if (tc.want == nil) != (err == nil) || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("Check(%+v) = %v, want %v", tc.c, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Check(%+v) shows the password: %v", tc.c, err)
		}
	}
	if err := (lockstore.Config{Backend: "etcd"}).Check(); !strings.Contains(err.Error(), `"etcd"`) {
		t.Errorf("unknown backend: %v does not name it", err)
	}
}

// use acquires and releases a lock on b, and closes it.
func use(t *testing.T, b locking.Backend, closeB func(), backend string) {
	t.Helper()
	defer closeB()
	if got := b.Capabilities().Backend; got != backend {
		t.Errorf("backend %q, want %q", got, backend)
	}
	ctx := context.Background()
	r, err := b.Acquire(ctx, "lockstore-test", time.Minute)
	if err != nil || !r.OK {
		t.Fatalf("Acquire = %+v, %v", r, err)
	}
	if ok, err := b.Release(ctx, r.LockID); !ok || err != nil {
		t.Errorf("Release = %v, %v", ok, err)
	}
}

func TestOpenFirestore(t *testing.T) {
	ctx := context.Background()
	b, closeB, err := lockstore.Open(ctx, lockstore.Config{Backend: lockstore.Firestore}, emu.TestClient(t))
	if err != nil {
		t.Fatal(err)
	}
	use(t, b, closeB, lockstore.Firestore)

	if _, _, err := lockstore.Open(ctx, lockstore.Config{Backend: lockstore.Firestore}, nil); !errors.Is(err, locking.ErrInvalidArgument) {
		t.Errorf("Open without a client = %v", err)
	}
	if _, _, err := lockstore.Open(ctx, lockstore.Config{Backend: "etcd"}, emu.TestClient(t)); !errors.Is(err, lockstore.ErrUnknownBackend) {
		t.Errorf("Open of an unknown backend = %v", err)
	}
}

func TestOpenPostgres(t *testing.T) {
	ctx := context.Background()
	locks, fences := pgserver.Tables(t)
	c := lockstore.Config{Backend: lockstore.Postgres, DSN: pg.DSN}
	tables := lockstore.WithPostgresOptions(pglock.WithTables(locks, fences))

	// Tables that are missing, and may not be created: InvalidArgument.
	_, _, err := lockstore.Open(ctx, c, nil, tables, lockstore.WithPostgresOptions(pglock.WithAutoCreateTables(false)))
	if !errors.Is(err, locking.ErrInvalidArgument) || !strings.HasPrefix(err.Error(), "PostgreSQL lock tables: ") {
		t.Errorf("Open without the tables = %v", err)
	}

	b, closeB, err := lockstore.Open(ctx, c, nil, tables, lockstore.WithConnectTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	use(t, b, closeB, lockstore.Postgres)

	// Nothing listens on port 1: the error names what failed, not the password.
	c.DSN = "postgres://locker:s3cret@127.0.0.1:1/ops?connect_timeout=5"
	_, _, err = lockstore.Open(ctx, c, nil, lockstore.WithConnectTimeout(10*time.Second))
	if err == nil || !strings.HasPrefix(err.Error(), "connecting to the PostgreSQL lock database: ") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Open of an unreachable database = %v", err)
	}
}
