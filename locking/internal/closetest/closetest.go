// Package closetest checks, for the backends in this module, that Close
// stops the background cleanups IsLocked starts (WithCleanupInIsLocked)
// and leaves the backend usable on the caller's client or pool.
package closetest

import (
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/locking/locktest"
)

// Backend is a backend with cleanup in IsLocked enabled, and what the test
// needs to drive it.
type Backend struct {
	locking.Backend
	// Close is the backend's Close.
	Close func() error
	// Expire makes the given locks expired far enough for IsLocked to
	// clean them up.
	Expire func(t *testing.T, locks ...locking.AcquireResult)
	// Cleanups receives the outcome of every cleanup, as it ends.
	Cleanups <-chan error
}

// CloseStopsCleanups checks that Close waits for the cleanup in flight,
// that IsLocked starts none after it, and that the backend's operations
// still work, on the client or pool Close leaves open.
func CloseStopsCleanups(t *testing.T, b Backend) {
	t.Helper()
	ctx := t.Context()
	b.Expire(t, locktest.MustAcquire(t, b, "a", time.Second), locktest.MustAcquire(t, b, "b", time.Second))
	if locked, err := b.IsLocked(ctx, "a"); locked || err != nil { // starts a cleanup
		t.Fatal(locked, err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.Cleanups: // deleted, or cancelled by Close: either way, over
		t.Logf("cleanup in flight at Close ended with %v", err)
	default:
		t.Fatal("Close returned before the cleanup in flight had")
	}
	if locked, err := b.IsLocked(ctx, "b"); locked || err != nil {
		t.Fatalf("IsLocked after Close = %v, %v", locked, err)
	}
	// Idempotent, and it would wait for a cleanup started since.
	if err := b.Close(); err != nil {
		t.Errorf("second Close = %v", err)
	}
	if len(b.Cleanups) != 0 {
		t.Error("IsLocked started a cleanup after Close")
	}
	if r, err := b.Acquire(ctx, "b", time.Minute); err != nil || !r.OK {
		t.Errorf("Acquire after Close = %+v, %v; the client or pool is the caller's and still open", r, err)
	}
}
