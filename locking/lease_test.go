package locking

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestLeaseHeartbeatExtends(t *testing.T) {
	f := newFake()
	l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
	first := l.ExpiresAt()
	time.Sleep(550 * time.Millisecond)
	if n := f.count("extend"); n < 3 || n > 6 {
		t.Errorf("%d extends in 550ms at a 100ms interval", n)
	}
	if !l.ExpiresAt().After(first) || l.Err() != nil || isClosed(l.Done()) {
		t.Errorf("expiry not advanced (%v → %v) or lease ended: %v", first, l.ExpiresAt(), l.Err())
	}
	// Well past the original TTL, the lock is still held.
	if locked, _ := f.IsLocked(context.Background(), "k"); !locked {
		t.Error("lock expired although the lease heartbeats")
	}
}

func TestReleaseStopsHeartbeat(t *testing.T) {
	f := newFake()
	l := mustAcquire(t, f, "k", WithTTL(60*time.Millisecond))
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	time.Sleep(50 * time.Millisecond)
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := f.count("extend")
	time.Sleep(100 * time.Millisecond)
	if f.count("extend") != n {
		t.Error("heartbeat still running after Release")
	}
	if !isClosed(l.Done()) || l.Err() != nil {
		t.Errorf("after Release: Done closed %v, Err %v", isClosed(l.Done()), l.Err())
	}
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrReleased) {
		t.Errorf("lease context cause %v", context.Cause(ctx))
	}
	if locked, _ := f.IsLocked(context.Background(), "k"); locked {
		t.Error("still locked after Release")
	}
	// Idempotent: no second backend call, same result.
	if l.Release(context.Background()) != nil || f.count("release") != 1 {
		t.Errorf("second Release: %d backend releases", f.count("release"))
	}
	// A context made after the end is born cancelled.
	late, cancelLate := l.Context(context.Background())
	defer cancelLate()
	if !isClosed(late.Done()) || !errors.Is(context.Cause(late), ErrReleased) {
		t.Error("context from a released lease is live")
	}
}

func TestReleaseCancelsExtensionInFlight(t *testing.T) {
	f := newFake()
	started := make(chan struct{}, 1)
	f.set(func(f *fake) {
		f.extendHook = func(ctx context.Context) (ExtendResult, error) {
			select {
			case started <- struct{}{}:
			default:
			}
			<-ctx.Done()
			return ExtendResult{}, &Error{Code: Aborted, Err: ctx.Err()}
		}
	})
	l := mustAcquire(t, f, "k", WithTTL(3*time.Second)) // extension due after 1s, allowed 1s
	<-started
	start := time.Now()
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Errorf("Release waited %s for the extension in flight", el)
	}
	if l.Err() != nil {
		t.Errorf("cancelled extension counted as a loss: %v", l.Err())
	}
}

func TestLeaseLostWhenExtendRefused(t *testing.T) {
	f := newFake()
	l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
	ctx, cancel := l.Context(context.Background())
	defer cancel()
	// Someone deletes the lock: the next extension finds it gone.
	f.set(func(f *fake) { delete(f.locks, "k") })
	start := time.Now()
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not lost")
	}
	if el := time.Since(start); el > 300*time.Millisecond {
		t.Errorf("loss noticed after %s, want at the next 100ms tick", el)
	}
	<-ctx.Done()
	if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(context.Cause(ctx), ErrLeaseLost) {
		t.Errorf("Err %v, cause %v", l.Err(), context.Cause(ctx))
	}
	if ctx.Err() != context.Canceled {
		t.Errorf("ctx.Err() = %v", ctx.Err())
	}
	n := f.count("extend")
	time.Sleep(250 * time.Millisecond)
	if f.count("extend") != n {
		t.Error("heartbeat continued after the loss")
	}
	// Releasing a lost lease is not an error: the loss was already reported.
	if err := l.Release(context.Background()); err != nil {
		t.Errorf("Release of a lost lease: %v", err)
	}
	if !errors.Is(l.Err(), ErrLeaseLost) {
		t.Error("Release cleared the loss")
	}
}

func TestLeaseLostWhenExtendFailsUntilExpiry(t *testing.T) {
	f := newFake()
	l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
	expires := l.ExpiresAt()
	f.set(func(f *fake) {
		f.extendHook = func(context.Context) (ExtendResult, error) {
			return ExtendResult{}, &Error{Code: ServiceUnavailable, Op: "extend"}
		}
	})
	select {
	case <-l.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lease not lost")
	}
	lostAt := time.Now()
	// The lease times the lock from when Acquire was sent, a few µs before
	// the backend stamped the expiry: it may give up that much early,
	// never more.
	if lostAt.Before(expires.Add(-20 * time.Millisecond)) {
		t.Errorf("lost %s before the lock's expiry: errors before expiry must be retried", expires.Sub(lostAt))
	}
	if lostAt.Sub(expires) > 150*time.Millisecond {
		t.Errorf("lost %s after the expiry, want at it", lostAt.Sub(expires))
	}
	if f.count("extend") < 2 {
		t.Errorf("only %d extension attempts before giving up", f.count("extend"))
	}
	if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(l.Err(), ErrServiceUnavailable) {
		t.Errorf("Err = %v, want lease lost wrapping the extension error", l.Err())
	}
}

func TestLeaseSurvivesTransientExtendErrors(t *testing.T) {
	f := newFake()
	// With extensions every ttl/3 and the loss at the expiry, one failure
	// in a row is survivable (the second try is still before the expiry).
	var fails atomic.Int32
	fails.Store(1)
	f.set(func(f *fake) {
		f.extendHook = func(context.Context) (ExtendResult, error) {
			if fails.Add(-1) >= 0 {
				return ExtendResult{}, &Error{Code: NetworkTimeout}
			}
			return ExtendResult{OK: true, ExpiresAt: time.Now().Add(300 * time.Millisecond)}, nil
		}
	})
	l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
	time.Sleep(600 * time.Millisecond)
	if l.Err() != nil || isClosed(l.Done()) {
		t.Errorf("a failed extension within the TTL lost the lease: %v", l.Err())
	}
}

func TestReleaseReportsUnnoticedLoss(t *testing.T) {
	f := newFake()
	l, err := Acquire(context.Background(), f, "k", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	// The lock vanishes between heartbeats (the next is 20s away).
	f.set(func(f *fake) { delete(f.locks, "k") })
	if l.Err() != nil {
		t.Fatal("loss noticed without an extension")
	}
	err = l.Release(context.Background())
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(l.Err(), ErrLeaseLost) || !isClosed(l.Done()) {
		t.Errorf("Release = %v, Err = %v", err, l.Err())
	}
}

func TestReleaseBackendError(t *testing.T) {
	f := newFake()
	l, err := Acquire(context.Background(), f, "k", WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	f.set(func(f *fake) { f.releaseErr = &Error{Code: ServiceUnavailable, Op: "release"} })
	if err := l.Release(context.Background()); !errors.Is(err, ErrServiceUnavailable) {
		t.Errorf("Release = %v", err)
	}
	if !isClosed(l.Done()) || l.Err() != nil {
		t.Errorf("after a failed release: Done %v, Err %v", isClosed(l.Done()), l.Err())
	}
}

func TestDo(t *testing.T) {
	f := newFake()
	boom := errors.New("boom")

	err := Do(context.Background(), f, "k", func(ctx context.Context) error { return boom })
	if !errors.Is(err, boom) || f.count("release") != 1 {
		t.Errorf("Do = %v; %d releases", err, f.count("release"))
	}

	ran := false
	if err := Do(context.Background(), f, "k", func(ctx context.Context) error {
		ran = true
		if locked, _ := f.IsLocked(ctx, "k"); !locked {
			t.Error("fn ran without the lock")
		}
		return nil
	}); err != nil || !ran {
		t.Errorf("Do = %v, ran %v", err, ran)
	}
	if locked, _ := f.IsLocked(context.Background(), "k"); locked {
		t.Error("Do left the lock held")
	}

	// fn's error wins over the release's.
	f.set(func(f *fake) { f.releaseErr = &Error{Code: ServiceUnavailable, Op: "release"} })
	if err := Do(context.Background(), f, "k2", func(context.Context) error { return boom }); !errors.Is(err, boom) || errors.Is(err, ErrServiceUnavailable) {
		t.Errorf("fn error vs release error: %v", err)
	}
	// With fn fine, a release error is not Do's result (the spec: ignored
	// without onReleaseError; DESIGN: never masks the write result).
	if err := Do(context.Background(), f, "k3", func(context.Context) error { return nil }); err != nil {
		t.Errorf("release error became Do's result: %v", err)
	}
	f.set(func(f *fake) { f.releaseErr = nil; f.locks = map[string]fakeLock{} })
}

func TestDoOnReleaseError(t *testing.T) {
	f := newFake()
	boom := errors.New("boom")
	relErr := &Error{Code: ServiceUnavailable, Op: "release"}
	type call struct {
		err     error
		keyHash string
	}
	var calls []call
	onErr := OnReleaseError(func(err error, keyHash string) { calls = append(calls, call{err, keyHash}) })

	// A clean release does not call it.
	if err := Do(context.Background(), f, "k", func(context.Context) error { return nil }, onErr); err != nil || len(calls) != 0 {
		t.Fatalf("clean Do = %v; %d calls", err, len(calls))
	}

	f.set(func(f *fake) { f.releaseErr = relErr })
	// fn fine: the callback gets the error and the key's hash; Do succeeds.
	if err := Do(context.Background(), f, "caf\u00e9", func(context.Context) error { return nil }, onErr); err != nil {
		t.Errorf("Do = %v", err)
	}
	// fn failed: fn's error wins, and the callback still hears of the release.
	if err := Do(context.Background(), f, "k2", func(context.Context) error { return boom }, onErr); !errors.Is(err, boom) || errors.Is(err, ErrServiceUnavailable) {
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
	err := Do(context.Background(), f, "k4", func(context.Context) error {
		f.set(func(f *fake) { delete(f.locks, "k4") })
		return nil
	}, onErr, WithTTL(time.Minute))
	if !errors.Is(err, ErrLeaseLost) || len(calls) != 0 {
		t.Errorf("loss at release: Do = %v; %d callback calls", err, len(calls))
	}
}

func TestDoReleasesWhenCallerCancelsOrPanics(t *testing.T) {
	f := newFake()
	ctx, cancel := context.WithCancel(context.Background())
	err := Do(ctx, f, "k", func(ctx context.Context) error { cancel(); <-ctx.Done(); return ctx.Err() })
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
		_ = Do(context.Background(), f, "k", func(context.Context) error { panic("kaboom") })
	}()
	if locked, _ := f.IsLocked(context.Background(), "k"); locked || f.count("release") != 2 {
		t.Error("a panicking fn's lock was not released")
	}
}

func TestDoReportsLossDuringFn(t *testing.T) {
	f := newFake()
	err := Do(context.Background(), f, "k", func(ctx context.Context) error {
		f.set(func(f *fake) { delete(f.locks, "k") })
		<-ctx.Done() // cancelled by the loss
		if !errors.Is(context.Cause(ctx), ErrLeaseLost) {
			t.Errorf("fn's context cause %v", context.Cause(ctx))
		}
		return nil // even if fn ignores it, Do reports the loss
	}, WithTTL(30*time.Millisecond))
	if !errors.Is(err, ErrLeaseLost) {
		t.Errorf("Do = %v", err)
	}
}

func TestDoWhileHeld(t *testing.T) {
	f := newFake()
	mustAcquire(t, f, "k", WithTTL(time.Minute))
	err := Do(context.Background(), f, "k", func(context.Context) error { t.Error("fn ran"); return nil }, WithRetry(RetryPolicy{}))
	if !errors.Is(err, ErrAcquisitionTimeout) {
		t.Errorf("Do on a held key = %v", err)
	}
}

// Mutual exclusion through Do on a backend that is itself atomic: at most
// one fn runs at a time, and every goroutine eventually gets its turn.
func TestDoMutualExclusion(t *testing.T) {
	f := newFake()
	var inside, maxInside, runs atomic.Int32
	var wg sync.WaitGroup
	p := RetryPolicy{Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: 1, Timeout: 20 * time.Second}
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := Do(context.Background(), f, "shared", func(context.Context) error {
				n := inside.Add(1)
				for m := maxInside.Load(); n > m && !maxInside.CompareAndSwap(m, n); m = maxInside.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				runs.Add(1)
				return nil
			}, WithRetry(p))
			if err != nil {
				t.Errorf("goroutine %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if maxInside.Load() != 1 || runs.Load() != 16 {
		t.Errorf("max %d concurrent holders, %d runs", maxInside.Load(), runs.Load())
	}
	if _, err := Acquire(context.Background(), f, "shared"); err != nil {
		t.Error(err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if got := fmt.Sprintf("%015d", f.fences["shared"]); got != "000000000000017" {
		t.Errorf("fence after 17 acquisitions = %s", got)
	}
}

// On a server-time backend the lease times the lock on the local clock,
// whatever the server's clock says: a server an hour behind does not make a
// fresh lease expire at once, and one an hour ahead does not keep a lease
// "held" past the TTL when extensions fail.
func TestLeaseIgnoresBackendClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			f := newFake()
			f.skew, f.serverTime = skew, true
			const ttl = 300 * time.Millisecond
			l := mustAcquire(t, f, "k", WithTTL(ttl))
			if got := time.Until(l.ExpiresAt()); got < skew || got > skew+ttl {
				t.Errorf("ExpiresAt is %s away; want the backend's clock (%s + TTL)", got, skew)
			}
			time.Sleep(2 * ttl) // two TTLs: only heartbeats keep it
			if isClosed(l.Done()) || l.Err() != nil {
				t.Fatalf("lease ended under a %s skew: %v", skew, l.Err())
			}
			f.set(func(f *fake) {
				f.extendHook = func(context.Context) (ExtendResult, error) {
					return ExtendResult{}, &Error{Code: ServiceUnavailable, Op: "extend"}
				}
			})
			start := time.Now()
			select {
			case <-l.Done():
			case <-time.After(10 * ttl):
				t.Fatalf("lease still held %s after extensions started failing, under a %s skew", 10*ttl, skew)
			}
			if d := time.Since(start); d > 2*ttl {
				t.Errorf("lost %s after extensions started failing; want within the TTL", d)
			}
			_ = l.Release(context.Background())
		})
	}
}
