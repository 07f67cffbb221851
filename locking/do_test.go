package locking

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapwriter/snapwriter/retry/policy"
)

// Do hands fn the lease it holds: its fence is the lock's, and the lock is
// held (and extended) for as long as fn runs.
func TestDoHandsFnTheLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		for _, want := range []string{"000000000000001", "000000000000002"} {
			err := Do(context.Background(), f, "k", func(ctx context.Context, l *Lease) error {
				if l.Key() != "k" || l.Fence() != want || l.Err() != nil {
					t.Errorf("fn's lease: key %q, fence %q, Err %v", l.Key(), l.Fence(), l.Err())
				}
				info, _ := f.LookupKey(ctx, "k")
				if info == nil || info.LockIDHash != HashKey(l.LockID()) {
					t.Errorf("the lock on k is %+v; want fn's lease's", info)
				}
				time.Sleep(DefaultTTL) // three heartbeats; the lock is still fn's
				if locked, _ := f.IsLocked(ctx, "k"); !locked || l.Err() != nil {
					t.Errorf("after a TTL of work: locked %v, Err %v", locked, l.Err())
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Do = %v", err)
			}
		}
		if f.count("extend") != 6 || f.count("release") != 2 {
			t.Errorf("%d extends, %d releases; want 3 a run, and each run released", f.count("extend"), f.count("release"))
		}
		if locked, _ := f.IsLocked(context.Background(), "k"); locked {
			t.Error("Do left the lock held")
		}
	})
}

// Do's result: fn's error, which a release error never replaces; a
// release error alone is not Do's result.
func TestDoResult(t *testing.T) {
	boom := errors.New("boom")
	relErr := &Error{Code: ServiceUnavailable, Op: "release"}
	for _, c := range []struct {
		name       string
		fnErr      error
		releaseErr error
		want       error
	}{
		{"fn fails", boom, nil, boom},
		{"fn succeeds", nil, nil, nil},
		{"fn's error wins over the release's", boom, relErr, boom},
		{"a release error alone is not Do's", nil, relErr, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				f.releaseErr = c.releaseErr
				err := Do(context.Background(), f, "k", func(context.Context, *Lease) error { return c.fnErr })
				if err != c.want || f.count("release") != 1 {
					t.Errorf("Do = %v after %d releases; want %v after 1", err, f.count("release"), c.want)
				}
			})
		})
	}
}

func TestDoOnReleaseError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		boom := errors.New("boom")
		relErr := &Error{Code: ServiceUnavailable, Op: "release"}
		type call struct {
			err     error
			keyHash string
		}
		var calls []call
		onErr := OnReleaseError(func(err error, keyHash string) { calls = append(calls, call{err, keyHash}) })
		ok := func(context.Context, *Lease) error { return nil }

		// A clean release does not call it.
		if err := Do(context.Background(), f, "k", ok, onErr); err != nil || len(calls) != 0 {
			t.Fatalf("clean Do = %v; %d calls", err, len(calls))
		}

		f.set(func(f *fake) { f.releaseErr = relErr })
		// fn fine: the callback gets the error and the key's hash; Do succeeds.
		if err := Do(context.Background(), f, "caf\u00e9", ok, onErr); err != nil {
			t.Errorf("Do = %v", err)
		}
		// fn failed: fn's error wins, and the callback still hears of the release.
		if err := Do(context.Background(), f, "k2", func(context.Context, *Lease) error { return boom }, onErr); !errors.Is(err, boom) || errors.Is(err, ErrServiceUnavailable) {
			t.Errorf("Do = %v", err)
		}
		if len(calls) != 2 || !errors.Is(calls[0].err, ErrServiceUnavailable) || calls[0].keyHash != HashKey("caf\u00e9") ||
			!errors.Is(calls[1].err, ErrServiceUnavailable) || calls[1].keyHash != HashKey("k2") {
			t.Errorf("calls %+v", calls)
		}
		// The raw key never reaches the callback.
		for _, c := range calls {
			if strings.Contains(c.keyHash, "k2") || strings.Contains(c.err.Error(), "k2") {
				t.Errorf("raw key in %+v", c)
			}
		}
		f.set(func(f *fake) { f.releaseErr = nil })

		// A lock found gone at release is a loss, returned, not a release error.
		calls = nil
		err := Do(context.Background(), f, "k4", func(context.Context, *Lease) error {
			f.set(func(f *fake) { delete(f.locks, "k4") })
			return nil
		}, onErr, WithTTL(time.Minute))
		if !errors.Is(err, ErrLeaseLost) || len(calls) != 0 {
			t.Errorf("loss at release: Do = %v; %d callback calls", err, len(calls))
		}
	})
}

func TestDoReleasesWhenCallerCancelsOrPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		ctx, cancel := context.WithCancel(context.Background())
		err := Do(ctx, f, "k", func(ctx context.Context, _ *Lease) error { cancel(); <-ctx.Done(); return ctx.Err() })
		if !errors.Is(err, context.Canceled) || f.count("release") != 1 {
			t.Errorf("cancelled caller: %v; %d releases", err, f.count("release"))
		}
		if locked, _ := f.IsLocked(context.Background(), "k"); locked {
			t.Error("a cancelled caller's lock was not released")
		}

		func() {
			defer func() {
				if r := recover(); r != "kaboom" {
					t.Errorf("recovered %v", r)
				}
			}()
			_ = Do(context.Background(), f, "k", func(context.Context, *Lease) error { panic("kaboom") })
		}()
		if locked, _ := f.IsLocked(context.Background(), "k"); locked || f.count("release") != 2 {
			t.Error("a panicking fn's lock was not released")
		}
	})
}

// A loss while fn runs cancels fn's context at the next heartbeat, and Do
// reports it even if fn does not.
func TestDoReportsLossDuringFn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		start := time.Now()
		err := Do(context.Background(), f, "k", func(ctx context.Context, l *Lease) error {
			f.set(func(f *fake) { delete(f.locks, "k") })
			<-ctx.Done()
			if el := time.Since(start); el != 10*time.Millisecond {
				t.Errorf("fn's context ended after %s; want at the next heartbeat, 10ms", el)
			}
			if !errors.Is(context.Cause(ctx), ErrLeaseLost) || !errors.Is(l.Err(), ErrLeaseLost) {
				t.Errorf("fn's context cause %v, lease Err %v", context.Cause(ctx), l.Err())
			}
			return nil // even if fn ignores it, Do reports the loss
		}, WithTTL(30*time.Millisecond))
		if !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Do = %v", err)
		}
	})
}

func TestDoWhileHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		mustAcquire(t, f, "k", WithTTL(time.Minute))
		err := Do(context.Background(), f, "k", func(context.Context, *Lease) error { t.Error("fn ran"); return nil }, WithRetry(RetryPolicy{}))
		if !errors.Is(err, ErrAcquisitionTimeout) {
			t.Errorf("Do on a held key = %v", err)
		}
	})
}

// Mutual exclusion through Do on a backend that is itself atomic: at most
// one fn runs at a time, every goroutine gets its turn, and each runs
// under the next fence.
func TestDoMutualExclusion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		var inside, maxInside atomic.Int32
		fences := make(chan string, 16)
		p := RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: 1, MaxRetries: policy.Unlimited, TotalTimeout: 20 * time.Second}
		done := make(chan struct{})
		for i := range 16 {
			go func() {
				defer func() { done <- struct{}{} }()
				err := Do(context.Background(), f, "shared", func(_ context.Context, l *Lease) error {
					n := inside.Add(1)
					for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
					}
					fences <- l.Fence()
					time.Sleep(2 * time.Millisecond)
					inside.Add(-1)
					return nil
				}, WithRetry(p))
				if err != nil {
					t.Errorf("goroutine %d: %v", i, err)
				}
			}()
		}
		for range 16 {
			<-done
		}
		close(fences)
		if maxInside.Load() != 1 {
			t.Errorf("%d holders at once", maxInside.Load())
		}
		prev := ""
		for fence := range fences {
			if fence <= prev {
				t.Errorf("fence %s ran after %s", fence, prev)
			}
			prev = fence
		}
		if prev != "000000000000016" {
			t.Errorf("last fence %s; want 16 runs, each with the next fence", prev)
		}
	})
}
