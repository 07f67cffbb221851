package locking

import (
	"context"
	"errors"
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
