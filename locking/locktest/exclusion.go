package locktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/locking"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// testMutualExclusionAcquire: of many concurrent Acquire calls on one free
// key, exactly one succeeds (acquire is atomic), round after round, each
// round's fence above the last.
func testMutualExclusionAcquire(t *testing.T, b locking.Backend) {
	const n = 8
	prev := ""
	for round := range 3 {
		winners, errs := AcquireAtOnce(t.Context(), b, "exclusive", 30*time.Second, n)
		for _, err := range errs {
			t.Logf("round %d: Acquire error (contention): %v", round, err)
		}
		if len(winners) != 1 {
			t.Fatalf("round %d: %d of %d concurrent acquires of one key succeeded; want exactly 1", round, len(winners), n)
		}
		if w := winners[0]; w.Fence <= prev {
			t.Errorf("round %d: fence %s, not above %s", round, w.Fence, prev)
		}
		prev = winners[0].Fence
		mustRelease(t, b, winners[0].LockID)
	}
}

// AcquireAtOnce starts n Acquire calls of key on b at the same moment and
// returns the results that got the lock and the errors, for the caller to
// judge (contention may legitimately cause some errors on some backends).
func AcquireAtOnce(ctx context.Context, b locking.Backend, key string, ttl time.Duration, n int) (winners []locking.AcquireResult, errs []error) {
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for range n {
		wg.Go(func() {
			<-start
			r, err := b.Acquire(ctx, key, ttl)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				errs = append(errs, err)
			case r.OK:
				winners = append(winners, r)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners, errs
}

// testMutualExclusionDo: workers × rounds critical sections on one key,
// half through locking.Do and half through locking.Acquire and
// Lease.Release, with an overlap detector: never two holders at once, no
// lease lost, and the fences the critical sections hold strictly increase
// in the order the sections ran.
func testMutualExclusionDo(t *testing.T, b locking.Backend) {
	const (
		workers = 6
		rounds  = 4
		key     = "critical"
	)
	opts := []locking.AcquireOption{
		locking.WithTTL(5 * time.Second),
		// Contention, and the ServiceUnavailable heavy contention on one
		// lock may cause, are retried for up to 40 s.
		locking.WithRetry(locking.RetryPolicy{Initial: 5 * time.Millisecond, Max: 5 * time.Millisecond,
			Multiplier: 1, Jitter: 0.5, MaxRetries: policy.Unlimited, TotalTimeout: 40 * time.Second}),
	}
	var (
		holders, overlaps, sections atomic.Int32
		mu                          sync.Mutex
		fences                      []string
	)
	critical := func(fence string) {
		if holders.Add(1) != 1 {
			overlaps.Add(1)
		}
		mu.Lock()
		fences = append(fences, fence)
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // hold the lock a while, so that an overlap would show
		sections.Add(1)
		holders.Add(-1)
	}
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for round := range rounds {
				var err error
				if w%2 == 0 {
					err = locking.Do(ctx, b, key, func(ctx context.Context, l *locking.Lease) error {
						if ctx.Err() != nil {
							return errors.New("fn ran under Do with a finished context")
						}
						critical(l.Fence())
						return nil
					}, opts...)
				} else {
					var l *locking.Lease
					if l, err = locking.Acquire(ctx, b, key, opts...); err == nil {
						critical(l.Fence())
						if err := l.Release(context.WithoutCancel(ctx)); err != nil {
							t.Errorf("worker %d round %d: Lease.Release: %v", w, round, err)
						}
					}
				}
				if err != nil {
					t.Errorf("worker %d round %d: %v", w, round, err)
				}
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d critical sections overlapped another: mutual exclusion violated", n)
	}
	if n := sections.Load(); n != workers*rounds {
		t.Errorf("%d critical sections ran; want %d", n, workers*rounds)
	}
	for i := 1; i < len(fences); i++ {
		if fences[i] <= fences[i-1] {
			t.Errorf("fence %s entered the critical section after %s", fences[i], fences[i-1])
		}
	}
	wantLocked(t, b, key, false, "after all critical sections")
}
