package locking

import (
	"context"
	"errors"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// The lease tests run in synctest bubbles: the clock is fake and moves only
// when every goroutine waits, so heartbeats happen at exact times. After a
// time.Sleep, synctest.Wait lets the heartbeat finish what is due at that
// same instant before the test looks.

// The heartbeat extends the lock to the TTL every TTL/3, for as long as
// the lease is held.
func TestLeaseHeartbeatExtends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		start := time.Now()
		l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
		if !l.ExpiresAt().Equal(start.Add(300 * time.Millisecond)) {
			t.Errorf("expiry %s after acquiring; want the TTL", l.ExpiresAt().Sub(start))
		}
		for _, c := range []struct {
			at      time.Duration
			extends int
		}{{99 * time.Millisecond, 0}, {100 * time.Millisecond, 1}, {300 * time.Millisecond, 3}, {time.Second, 10}} {
			time.Sleep(time.Until(start.Add(c.at)))
			synctest.Wait()
			if n := f.count("extend"); n != c.extends {
				t.Errorf("%d extends after %s; want %d", n, c.at, c.extends)
			}
			last := c.at.Truncate(100 * time.Millisecond)
			if got := l.ExpiresAt().Sub(start); got != last+300*time.Millisecond {
				t.Errorf("after %s: expiry %s after acquiring; want the last extension's %s + TTL", c.at, got, last)
			}
		}
		// Over three TTLs on, the lock is still held.
		if locked, _ := f.IsLocked(context.Background(), "k"); !locked || l.Err() != nil || isClosed(l.Done()) {
			t.Errorf("locked %v, Err %v; want the heartbeat to keep the lock", locked, l.Err())
		}
	})
}

func TestReleaseStopsHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		l := mustAcquire(t, f, "k", WithTTL(60*time.Millisecond))
		ctx, cancel := l.Context(context.Background())
		defer cancel()
		time.Sleep(50 * time.Millisecond)
		if err := l.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if n := f.count("extend"); n != 2 {
			t.Errorf("%d extends in 50ms at a 20ms interval; want 2", n)
		}
		time.Sleep(100 * time.Millisecond)
		if n := f.count("extend"); n != 2 {
			t.Errorf("%d extends after Release; want the 2 before it", n)
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
	})
}

// Release does not wait out an extension in flight: it cancels it.
func TestReleaseCancelsExtensionInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		started := make(chan struct{}, 1)
		f.set(func(f *fake) {
			f.extendHook = func(ctx context.Context) (ExtendResult, error) {
				started <- struct{}{}
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
		if el := time.Since(start); el != 0 {
			t.Errorf("Release waited %s for the extension in flight", el)
		}
		if l.Err() != nil {
			t.Errorf("cancelled extension counted as a loss: %v", l.Err())
		}
	})
}

// An extension that finds the lock gone ends the lease at once.
func TestLeaseLostWhenExtendRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
		ctx, cancel := l.Context(context.Background())
		defer cancel()
		// Someone deletes the lock: the next extension finds it gone.
		f.set(func(f *fake) { delete(f.locks, "k") })
		start := time.Now()
		<-l.Done()
		if el := time.Since(start); el != 100*time.Millisecond {
			t.Errorf("loss noticed after %s; want at the next heartbeat, 100ms", el)
		}
		<-ctx.Done()
		if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(context.Cause(ctx), ErrLeaseLost) {
			t.Errorf("Err %v, cause %v", l.Err(), context.Cause(ctx))
		}
		if ctx.Err() != context.Canceled {
			t.Errorf("ctx.Err() = %v", ctx.Err())
		}
		time.Sleep(time.Second)
		if n := f.count("extend"); n != 1 {
			t.Errorf("%d extends; want the heartbeat to stop after the one that found the loss", n)
		}
		// Releasing a lost lease is not an error: the loss was already reported.
		if err := l.Release(context.Background()); err != nil {
			t.Errorf("Release of a lost lease: %v", err)
		}
		if !errors.Is(l.Err(), ErrLeaseLost) {
			t.Error("Release cleared the loss")
		}
	})
}

// Failing extensions are retried within the renewal, after short waits,
// until the lock's expiry, and not a moment longer: then the lease is
// lost, with the last failure.
func TestLeaseLostWhenExtendFailsUntilExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		start := time.Now()
		var stats []RenewalStat
		l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond), OnRenewal(func(s RenewalStat) { stats = append(stats, s) }))
		f.set(func(f *fake) {
			f.extendHook = func(context.Context) (ExtendResult, error) {
				return ExtendResult{}, &Error{Code: ServiceUnavailable, Op: "extend"}
			}
		})
		time.Sleep(299 * time.Millisecond)
		synctest.Wait()
		// Two heartbeats (at 100 and 200 ms) would make 2 attempts; the
		// renewal due at 100 ms retries every few milliseconds instead.
		if n := f.count("extend"); n < 5 || l.Err() != nil {
			t.Fatalf("just before the expiry: %d extends, Err %v; want the failures retried (5 or more) and the lease held", n, l.Err())
		}
		<-l.Done()
		if el := time.Since(start); el != 300*time.Millisecond {
			t.Errorf("lost after %s; want at the expiry, 300ms", el)
		}
		if !errors.Is(l.Err(), ErrLeaseLost) || !errors.Is(l.Err(), ErrServiceUnavailable) {
			t.Errorf("Err = %v, want lease lost wrapping the extension error", l.Err())
		}
		synctest.Wait()
		if len(stats) != 1 || stats[0].Err == nil || stats[0].Latency != 200*time.Millisecond || stats[0].Attempts != f.count("extend") {
			t.Errorf("renewal stats %+v; want one renewal, lost after 200ms and %d attempts", stats, f.count("extend"))
		}
	})
}

// A renewal slower than the heartbeat interval — here 0.6 TTL, as a store
// loaded by the holder's own writes may answer — still keeps the lock:
// each attempt may run until the lock's expiry, not just TTL/3 (which
// lost this lease at its first expiry). Renewals never overlap: the next
// one starts when this one has ended, at once if it is already due.
func TestLeaseSurvivesRenewalSlowerThanInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		const slow = ttl * 6 / 10
		f := newFake()
		var inFlight, most atomic.Int32
		f.set(func(f *fake) {
			f.extendHook = func(ctx context.Context) (ExtendResult, error) {
				n := inFlight.Add(1)
				defer inFlight.Add(-1)
				if n > most.Load() {
					most.Store(n)
				}
				select {
				case <-time.After(slow):
					return ExtendResult{OK: true, ExpiresAt: time.Now().Add(ttl)}, nil
				case <-ctx.Done():
					return ExtendResult{}, &Error{Code: NetworkTimeout, Op: "extend", Err: ctx.Err()}
				}
			}
		})
		var stats []RenewalStat
		l := mustAcquire(t, f, "k", WithTTL(ttl), OnRenewal(func(s RenewalStat) { stats = append(stats, s) }))
		time.Sleep(10 * ttl)
		synctest.Wait()
		if l.Err() != nil || isClosed(l.Done()) {
			t.Fatalf("lease lost with renewals taking %s of a %s TTL: %v", slow, ttl, l.Err())
		}
		if m := most.Load(); m != 1 {
			t.Errorf("%d extensions in flight at once; want 1", m)
		}
		// Due at 100 ms, then back to back: 100 + 180·n ≤ 3000 ms.
		if len(stats) != 16 {
			t.Errorf("%d renewals in 10 TTLs; want 16, one after the other", len(stats))
		}
		for i, s := range stats {
			if s.Err != nil || s.Latency != slow || s.Attempts != 1 || s.TTL != ttl {
				t.Errorf("renewal %d: %+v; want one attempt of %s", i, s, slow)
			}
			// The first ended 20 ms before the acquisition's expiry; the
			// others TTL - 180 ms before their predecessor's.
			want := ttl - slow
			if i == 0 {
				want = ttl - ttl/3 - slow
			}
			if s.Left != want {
				t.Errorf("renewal %d ended with %s left; want %s", i, s.Left, want)
			}
		}
	})
}

// A renewal whose attempt is never answered — a backend that does not
// even honour its deadline — loses the lease at the expiry by the
// lease's own clock, not when the attempt returns.
func TestLeaseLostAtExpiryWhileRenewalHangs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		unblock := make(chan struct{})
		f.set(func(f *fake) {
			f.extendHook = func(context.Context) (ExtendResult, error) {
				<-unblock // ignores ctx
				return ExtendResult{}, &Error{Code: NetworkTimeout, Op: "extend"}
			}
		})
		start := time.Now()
		l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
		<-l.Done()
		if el := time.Since(start); el != 300*time.Millisecond {
			t.Errorf("lost after %s; want at the expiry, 300ms", el)
		}
		if err := l.Err(); !errors.Is(err, ErrLeaseLost) || !errors.Is(err, ErrNetworkTimeout) ||
			!strings.Contains(err.Error(), "renewal") || !strings.Contains(err.Error(), "unanswered") {
			t.Errorf("Err = %v; want a loss (and a NetworkTimeout) that says the renewal went unanswered", err)
		}
		close(unblock)
		if n := f.count("extend"); n != 1 {
			t.Errorf("%d extensions; want the one that hung", n)
		}
	})
}

// A renewal whose first attempts fail is retried at once (after a short
// jittered wait), not at the next heartbeat, and keeps the lease.
func TestLeaseRetriesFailedRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		f := newFake()
		var fails atomic.Int32
		fails.Store(3)
		f.set(func(f *fake) {
			f.extendHook = func(context.Context) (ExtendResult, error) {
				if fails.Add(-1) >= 0 {
					return ExtendResult{}, &Error{Code: NetworkTimeout, Op: "extend"}
				}
				return ExtendResult{OK: true, ExpiresAt: time.Now().Add(ttl)}, nil
			}
		})
		var stats []RenewalStat
		l := mustAcquire(t, f, "k", WithTTL(ttl), OnRenewal(func(s RenewalStat) { stats = append(stats, s) }))
		time.Sleep(ttl)
		synctest.Wait()
		if l.Err() != nil || len(stats) == 0 {
			t.Fatalf("Err %v after %d renewals", l.Err(), len(stats))
		}
		s := stats[0]
		// Waits of 7.5–15 ms, then 15–30 ms twice (TTL/20, doubling, at
		// most TTL/10): the renewal due at 100 ms succeeds well before the
		// next heartbeat would have tried.
		if s.Err != nil || s.Attempts != 4 || s.Latency < 30*time.Millisecond || s.Latency > 75*time.Millisecond {
			t.Errorf("first renewal %+v; want 4 attempts within 30–75 ms", s)
		}
	})
}

// With renewals due every TTL/3 and retried until the expiry, a failure
// is survivable.
func TestLeaseSurvivesTransientExtendErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
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
		synctest.Wait()
		// The first renewal (at 100 ms) takes two attempts, a few
		// milliseconds apart; the next ones start 100 ms after the
		// successful one: 6 attempts by 600 ms.
		if l.Err() != nil || isClosed(l.Done()) || f.count("extend") != 6 {
			t.Errorf("after 600ms and %d extensions (the first failed): Err %v; want the lease held", f.count("extend"), l.Err())
		}
	})
}

// A loss between heartbeats is found at release, and reported as a loss.
func TestReleaseReportsUnnoticedLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// A release the backend fails ends the lease all the same, but is no loss.
func TestReleaseBackendError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
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
	})
}

// On a server-time backend the lease times the lock on the local clock,
// from when each request was sent, whatever the server's clock says: a
// server an hour behind does not make a fresh lease expire at once, and
// one an hour ahead does not keep a lease "held" past the TTL when
// extensions fail.
func TestLeaseIgnoresBackendClockSkew(t *testing.T) {
	for _, skew := range []time.Duration{-time.Hour, time.Hour} {
		t.Run(skew.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				f.skew, f.serverTime = skew, true
				const ttl = 300 * time.Millisecond
				start := time.Now()
				l := mustAcquire(t, f, "k", WithTTL(ttl))
				if got := l.ExpiresAt().Sub(start); got != skew+ttl {
					t.Errorf("ExpiresAt is %s away; want the backend's clock (%s + TTL)", got, skew)
				}
				time.Sleep(2 * ttl) // two TTLs: only heartbeats keep it
				synctest.Wait()
				if isClosed(l.Done()) || l.Err() != nil {
					t.Fatalf("lease ended under a %s skew: %v", skew, l.Err())
				}
				f.set(func(f *fake) {
					f.extendHook = func(context.Context) (ExtendResult, error) {
						return ExtendResult{}, &Error{Code: ServiceUnavailable, Op: "extend"}
					}
				})
				<-l.Done()
				// The last extension was sent at 2 TTLs: lost one TTL later.
				if el := time.Since(start); el != 3*ttl {
					t.Errorf("lost %s after acquiring; want 3 TTLs, one after the last extension", el)
				}
			})
		})
	}
}

// A renewal's waits are the policy's: before retry n, uniform in [w/2, w]
// for w = min(50 ms, TTL/20)·2ⁿ, at most min(1 s, max(TTL/10, 1 ms)), with
// no cap on the retries (the lock's expiry ends a renewal).
func TestRenewalPolicy(t *testing.T) {
	for _, ttl := range []time.Duration{time.Millisecond, 3 * time.Millisecond, 300 * time.Millisecond, 7 * time.Second, DefaultTTL, time.Hour} {
		p := renewalPolicy(ttl)
		if err := p.Validate(); err != nil || p.MaxRetries != policy.Unlimited || p.TotalTimeout != 0 || p.AttemptTimeout != 0 {
			t.Errorf("TTL %s: renewal policy %+v (%v); want a valid one with unlimited retries and no timeouts", ttl, p, err)
		}
		w, most := min(50*time.Millisecond, ttl/20), min(time.Second, max(ttl/10, time.Millisecond))
		for n := range 12 {
			if lo, hi := p.Delay(n, 0), p.Delay(n, math.Nextafter(1, 0)); lo != w/2 || hi < w-1 || hi > w {
				t.Errorf("TTL %s: waits before retry %d in [%s, %s]; want [%s, %s]", ttl, n, lo, hi, w/2, w)
			}
			w = min(2*w, most)
		}
	}
}

// A panic on the heartbeat goroutine (here an OnRenewal func's) does not
// end the process: it ends the lease, lost, its cause the panic with its
// stack, so the holder stops and cleans up as on any loss.
func TestLeaseLostOnHeartbeatPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		f := newFake()
		l := mustAcquire(t, f, "k", WithTTL(ttl), OnRenewal(func(RenewalStat) { panic("injected") }))
		select {
		case <-l.Done():
		case <-time.After(ttl):
			t.Fatal("the lease outlived its heartbeat's panic")
		}
		err := l.Err()
		var pe *safego.PanicError
		if !errors.Is(err, ErrLeaseLost) || !errors.As(err, &pe) || pe.Value != "injected" || !strings.Contains(string(pe.Stack), "lease_test.go") {
			t.Errorf("Err = %v; want the lease lost, its cause the panic with its stack", err)
		}
	})
}
