package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/snapwriter/snapwriter/internal/harness"
)

// Main runs a package's tests against one cluster: it reuses the one DSNEnv
// names (as `make test` provides) or starts its own, and stores it in *srv
// for the tests. Use it from TestMain:
//
//	var pg *pgserver.Server
//	func TestMain(m *testing.M) { os.Exit(pgserver.Main(m, &pg)) }
//
// A package whose tests need PostgreSQL fails, never skips, when no
// cluster can be started. run, if given, runs the tests instead of m.Run
// (to nest another harness's Main).
//
// In -short mode (make test-short) the tests that reach the cluster through
// TestPool, Tables or TestDatabase are skipped there, unless they are smoke
// tests (Smoke).
func Main(m *testing.M, srv **Server, run ...func() int) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	s, err := Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: cannot start PostgreSQL:", err)
		return 1
	}
	*srv = s
	defer s.Stop()
	if len(run) > 0 {
		return run[0]()
	}
	return m.Run()
}

// Smoke makes t, and its subtests, a smoke test: one of the few tests
// that still reach PostgreSQL (or the Firestore emulator) in -short mode.
// Call it first thing in the test. Without -short it does nothing; every
// test runs.
func Smoke(t testing.TB) { harness.MarkSmoke(t) }

// skipUnlessSmoke skips t, in -short mode only, unless it is a smoke test.
func skipUnlessSmoke(t testing.TB) {
	t.Helper()
	harness.SkipUnlessSmoke(t, "PostgreSQL")
}

// TestPool returns a connection pool to the cluster for t, closed when t
// ends. configure, if not nil, adjusts the pool's configuration first.
func (s *Server) TestPool(t testing.TB, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	skipUnlessSmoke(t)
	cfg, err := pgxpool.ParseConfig(s.DSN)
	if err != nil {
		t.Fatalf("pgserver: %v", err)
	}
	for _, c := range configure {
		c(cfg)
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatalf("pgserver: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Tables returns a lock table and a fence table name unique to this run, so
// tests sharing one cluster never see each other's rows.
func Tables(t testing.TB) (locks, fences string) {
	t.Helper()
	skipUnlessSmoke(t)
	var b [5]byte
	_, _ = rand.Read(b[:])
	p := "t" + hex.EncodeToString(b[:])
	return p + "_locks", p + "_fences"
}

// TestDatabase creates a database of its own for t on the cluster and
// returns its DSN; it is dropped when t ends. Use it where code under test
// uses fixed table names (a CLI, say), so parallel tests stay apart.
func (s *Server) TestDatabase(t testing.TB) string {
	t.Helper()
	skipUnlessSmoke(t)
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "t" + hex.EncodeToString(b[:])
	cfg, err := pgxpool.ParseConfig(s.DSN)
	if err != nil {
		t.Fatalf("pgserver: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("pgserver: %v", err)
	}
	// The name is ours and safe; CREATE DATABASE takes no parameters.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		conn.Close()
		t.Fatalf("pgserver: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.Close()
	})
	u, err := url.Parse(s.DSN)
	if err != nil {
		t.Fatalf("pgserver: DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}
