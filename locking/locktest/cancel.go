package locktest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// testCancelledContext: every operation called with an already-cancelled
// context fails fast (< 500 ms) with an error matching locking.ErrAborted
// and changes nothing; so do the Acquire and Do helpers cancelled while
// waiting for a held lock.
func testCancelledContext(t *testing.T, b locking.Backend) {
	held := MustAcquire(t, b, "cancel-held", 10*time.Second)
	n := records(t, b)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error { _, err := b.Acquire(ctx, "cancel-free", 10*time.Second); return err }},
		{"Release", func() error { _, err := b.Release(ctx, held.LockID); return err }},
		{"Extend", func() error { _, err := b.Extend(ctx, held.LockID, time.Minute); return err }},
		{"IsLocked", func() error { _, err := b.IsLocked(ctx, "cancel-held"); return err }},
		{"LookupKey", func() error { _, err := b.LookupKey(ctx, "cancel-held"); return err }},
		{"LookupLockID", func() error { _, err := b.LookupLockID(ctx, held.LockID); return err }},
	}
	for _, c := range calls {
		start := time.Now()
		err := c.call()
		if d := time.Since(start); d > cancelBound {
			t.Errorf("%s with a cancelled context took %s; want < %s", c.name, d, cancelBound)
		}
		wantCode(t, err, locking.ErrAborted, c.name+" with a cancelled context")
	}
	wantRecords(t, b, n, "after operations with a cancelled context")
	wantLocked(t, b, "cancel-free", false, "after a cancelled acquire")
	info, err := b.LookupLockID(t.Context(), held.LockID)
	if err != nil || info == nil || info.Fence != held.Fence || !info.ExpiresAt.Equal(held.ExpiresAt) {
		t.Errorf("held lock after cancelled release/extend: %+v, %v; want it unchanged", info, err)
	}

	// The helpers, waiting on the held lock, stop promptly when cancelled.
	patient := locking.WithRetry(locking.RetryPolicy{Initial: 20 * time.Millisecond, Max: 20 * time.Millisecond,
		Multiplier: 1, Jitter: 0.5, MaxRetries: policy.Unlimited, TotalTimeout: time.Minute})
	helpers := []struct {
		name string
		call func(ctx context.Context, b locking.Backend) error
	}{
		{"locking.Acquire", func(ctx context.Context, b locking.Backend) error {
			l, err := locking.Acquire(ctx, b, "cancel-held", patient)
			if l != nil {
				_ = l.Release(context.Background())
			}
			return err
		}},
		{"locking.Do", func(ctx context.Context, b locking.Backend) error {
			return locking.Do(ctx, b, "cancel-held", func(context.Context, *locking.Lease) error {
				return errors.New("fn ran although the lock is held")
			}, patient)
		}},
	}
	for _, h := range helpers {
		// Through a telemetry decorator of its own, so the test knows when
		// one of the helper's attempts has found the lock held: the helper
		// is then waiting.
		refused := make(chan struct{}, 1)
		watched := locking.WithTelemetry(b, func(e locking.Event) {
			if e.Type == locking.EventAcquire && e.Reason == locking.ReasonLocked {
				select {
				case refused <- struct{}{}:
				default:
				}
			}
		}, false)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- h.call(ctx, watched) }()
		select {
		case <-refused:
		case err := <-done:
			cancel()
			t.Fatalf("%s returned before it was cancelled: %v", h.name, err)
		case <-time.After(10 * time.Second):
			cancel()
			t.Fatalf("%s found the lock held in no attempt within 10 s", h.name)
		}
		cancelled := time.Now()
		cancel()
		select {
		case err := <-done:
			if d := time.Since(cancelled); d > cancelBound {
				t.Errorf("%s returned %s after cancellation; want < %s", h.name, d, cancelBound)
			}
			wantCode(t, err, locking.ErrAborted, h.name+" cancelled while waiting")
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not return within 10 s of cancellation", h.name)
		}
	}
}

// testCancelInFlight: an operation whose context is cancelled while it is
// in flight either completes or fails with an error matching
// locking.ErrAborted, within 500 ms of the cancellation.
func testCancelInFlight(t *testing.T, b locking.Backend) {
	held := MustAcquire(t, b, "inflight-held", time.Minute)
	aborted := 0
	for i := range 40 {
		var call func(ctx context.Context) error
		name := ""
		switch i % 5 {
		case 0:
			name = "Acquire"
			key := fmt.Sprintf("inflight-%d", i)
			call = func(ctx context.Context) error { _, err := b.Acquire(ctx, key, 10*time.Second); return err }
		case 1:
			name = "Extend"
			call = func(ctx context.Context) error { _, err := b.Extend(ctx, held.LockID, time.Minute); return err }
		case 2:
			name = "Release"
			r := MustAcquire(t, b, fmt.Sprintf("inflight-%d", i), 10*time.Second)
			call = func(ctx context.Context) error { _, err := b.Release(ctx, r.LockID); return err }
		case 3:
			name = "IsLocked"
			call = func(ctx context.Context) error { _, err := b.IsLocked(ctx, "inflight-held"); return err }
		case 4:
			name = "LookupLockID"
			call = func(ctx context.Context) error { _, err := b.LookupLockID(ctx, held.LockID); return err }
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancelAt := make(chan time.Time, 1)
		delay := time.Duration(rand.Int64N(int64(4 * time.Millisecond)))
		timer := time.AfterFunc(delay, func() { cancelAt <- time.Now(); cancel() })
		err := call(ctx)
		end := time.Now()
		timer.Stop()
		cancel()
		if err == nil {
			continue
		}
		aborted++
		wantCode(t, err, locking.ErrAborted, fmt.Sprintf("%s cancelled after %s", name, delay))
		select {
		case at := <-cancelAt:
			if d := end.Sub(at); d > cancelBound {
				t.Errorf("%s returned %s after cancellation; want < %s", name, d, cancelBound)
			}
		default:
			t.Errorf("%s failed (%v) before its context was cancelled", name, err)
		}
	}
	t.Logf("%d of 40 operations were cut short by cancellation", aborted)
}
