package pgserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
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
// In -short mode (make test-short) Main starts no cluster and leaves *srv
// nil (run, if given, still runs): the tests that reach the cluster through
// TestPool, Tables or TestDatabase are skipped there, and a test that
// reaches it otherwise (pg.DSN) calls SkipShort first.
func Main(m *testing.M, srv **Server, run ...func() int) int {
	// TestMain runs before the test flags are parsed; -short is one.
	if !flag.Parsed() {
		flag.Parse()
	}
	if testing.Short() {
		if len(run) > 0 {
			return run[0]()
		}
		return m.Run()
	}
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

// SkipShort skips t in -short mode, where Main starts no cluster. The
// harness's own calls (TestPool, Tables, TestDatabase) do it; a test that
// reaches the cluster otherwise, through pg.DSN, calls it first. Without
// -short it does nothing; every test runs.
func SkipShort(t testing.TB) {
	t.Helper()
	harness.SkipShort(t, "PostgreSQL")
}

// TestPool returns a connection pool to the cluster for t, closed when t
// ends. configure, if not nil, adjusts the pool's configuration first.
func (s *Server) TestPool(t testing.TB, configure ...func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	SkipShort(t)
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
	SkipShort(t)
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
	SkipShort(t)
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
