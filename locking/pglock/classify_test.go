package pglock

import (
	"context"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snapwriter/snapwriter/locking"
)

// SyncGuard's error table: SQLSTATE classes, connection errors and the
// caller's context, each to its code.
func TestClassify(t *testing.T) {
	t.Parallel()
	pgErr := func(code string) error { return fmt.Errorf("acquire: %w", &pgconn.PgError{Code: code}) }
	cases := []struct {
		name string
		err  error
		want locking.Code
	}{
		{"connection failure", pgErr("08006"), locking.ServiceUnavailable},
		{"too many connections", pgErr("53300"), locking.ServiceUnavailable},
		{"admin shutdown", pgErr("57P01"), locking.ServiceUnavailable},
		{"serialization failure", pgErr("40001"), locking.ServiceUnavailable},
		{"deadlock", pgErr("40P01"), locking.ServiceUnavailable},
		{"invalid password", pgErr("28P01"), locking.AuthFailed},
		{"insufficient privilege", pgErr("42501"), locking.AuthFailed},
		{"numeric out of range", pgErr("22003"), locking.InvalidArgument},
		{"unique violation", pgErr("23505"), locking.InvalidArgument},
		{"undefined table", pgErr("42P01"), locking.InvalidArgument},
		{"undefined column", pgErr("42703"), locking.InvalidArgument},
		{"statement timeout", pgErr("57014"), locking.NetworkTimeout},
		{"lock not available", pgErr("55P03"), locking.NetworkTimeout},
		{"syntax error", pgErr("42601"), locking.Internal},
		{"internal error", pgErr("XX000"), locking.Internal},
		{"empty sqlstate", pgErr(""), locking.Internal},
		{"context cancelled", fmt.Errorf("x: %w", context.Canceled), locking.Aborted},
		{"context deadline", fmt.Errorf("x: %w", context.DeadlineExceeded), locking.NetworkTimeout},
		{"connection reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, locking.ServiceUnavailable},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, locking.ServiceUnavailable},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), locking.ServiceUnavailable},
		{"closed pool", fmt.Errorf("closed pool"), locking.ServiceUnavailable},
		{"anything else", fmt.Errorf("boom"), locking.Internal},
	}
	for _, c := range cases {
		if got := classify(context.Background(), c.err); got != c.want {
			t.Errorf("%s (%v): %v; want %v", c.name, c.err, got, c.want)
		}
	}
	// A cancelled or expired caller's context wins over whatever error the
	// driver reported for it.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if got := classify(cancelled, io.EOF); got != locking.Aborted {
		t.Errorf("EOF under a cancelled context: %v; want Aborted", got)
	}
	expired, cancel2 := context.WithTimeout(context.Background(), 0)
	defer cancel2()
	<-expired.Done()
	if got := classify(expired, pgErr("57014")); got != locking.NetworkTimeout {
		t.Errorf("query_canceled under an expired context: %v; want NetworkTimeout", got)
	}
}
