package pgserver

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A fresh cluster starts, answers as PostgreSQL 15 or newer on loopback, and
// leaves nothing behind when stopped.
func TestStartStop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops clusters of its own: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, WithoutReuse())
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	var v int
	if err := conn.QueryRow(ctx, "SELECT current_setting('server_version_num')::int").Scan(&v); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if v < 150000 {
		t.Errorf("server_version_num %d; want PostgreSQL 15 or newer", v)
	}
	dir := s.dir
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data directory %s left behind (%v)", dir, err)
	}
	if _, err := pgx.Connect(ctx, s.DSN); err == nil {
		t.Error("the cluster still answers after Stop")
	}
}

// Kill takes the cluster away as a crash would; Restart brings it back on
// the same port with its data (a durable cluster: the default one commits
// without waiting for the WAL, so a crash may lose its last commits); a
// reused cluster is never killed.
func TestKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and stops clusters of its own: skipped in -short mode")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	s, err := Start(ctx, WithoutReuse(), Durable())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	conn, err := pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := conn.Ping(ctx); err == nil {
		t.Error("a connection still answers after Kill")
	}
	_ = conn.Close(ctx)
	if _, err := pgx.Connect(ctx, s.DSN); err == nil {
		t.Error("the cluster accepts connections after Kill")
	}
	if err := s.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, s.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var v int
	if err := conn.QueryRow(ctx, "SELECT v FROM kept").Scan(&v); err != nil || v != 42 {
		t.Errorf("after Restart: %d, %v; want the row written before Kill", v, err)
	}
	if err := (&Server{DSN: s.DSN}).Kill(ctx); err == nil {
		t.Error("Kill of a reused cluster succeeded")
	}
}
