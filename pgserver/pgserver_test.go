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
