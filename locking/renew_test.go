package locking

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// Renew extends the lock at once, not at the next due time, and the
// heartbeat's next renewal is then due TTL/3 after it.
func TestRenewExtendsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		f := newFake()
		start := time.Now()
		l := mustAcquire(t, f, "k", WithTTL(ttl))
		time.Sleep(50 * time.Millisecond)
		if err := l.Renew(context.Background()); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if el := time.Since(start); el != 50*time.Millisecond {
			t.Errorf("Renew returned %s after acquiring; want at once, 50ms", el)
		}
		if n := f.count("extend"); n != 1 {
			t.Errorf("%d extends; want 1", n)
		}
		if got := l.ExpiresAt().Sub(start); got != 50*time.Millisecond+ttl {
			t.Errorf("expiry %s after acquiring; want 50ms + TTL", got)
		}
		// The next is due TTL/3 after the one Renew asked for: at 150 ms.
		time.Sleep(time.Until(start.Add(149 * time.Millisecond)))
		synctest.Wait()
		if n := f.count("extend"); n != 1 {
			t.Errorf("%d extends at 149ms; want 1", n)
		}
		time.Sleep(time.Millisecond)
		synctest.Wait()
		if n := f.count("extend"); n != 2 {
			t.Errorf("%d extends at 150ms; want 2", n)
		}
	})
}

// A Renew made while a renewal is in flight is answered by the next one,
// begun after that ends: the answer in flight may predate the call.
// Renews made together share one renewal.
func TestRenewWaitsForARenewalBegunAfterIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 300 * time.Millisecond
		const slow = 60 * time.Millisecond
		f := newFake()
		f.set(func(f *fake) {
			f.extendHook = func(ctx context.Context) (ExtendResult, error) {
				select {
				case <-time.After(slow):
					return ExtendResult{OK: true, ExpiresAt: time.Now().Add(ttl)}, nil
				case <-ctx.Done():
					return ExtendResult{}, ctx.Err()
				}
			}
		})
		start := time.Now()
		l := mustAcquire(t, f, "k", WithTTL(ttl))
		time.Sleep(120 * time.Millisecond) // the first renewal, due at 100 ms, is in flight
		errs := make(chan error, 2)
		for range 2 {
			go func() { errs <- l.Renew(context.Background()) }()
		}
		for range 2 {
			if err := <-errs; err != nil {
				t.Fatalf("Renew: %v", err)
			}
		}
		// The one in flight ends at 160 ms, the one asked for at 220 ms.
		if el := time.Since(start); el != 220*time.Millisecond {
			t.Errorf("Renew returned %s after acquiring; want 220ms", el)
		}
		if n := f.count("extend"); n != 2 {
			t.Errorf("%d extends; want 2 (the one in flight, then one for both Renews)", n)
		}
	})
}

// Renew reports the loss of the lease, Release, and its own context's end.
func TestRenewEndings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		l := mustAcquire(t, f, "k", WithTTL(300*time.Millisecond))
		f.set(func(f *fake) { delete(f.locks, "k") })
		if err := l.Renew(context.Background()); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Renew of a lock gone: %v; want ErrLeaseLost", err)
		}
		if err := l.Renew(context.Background()); !errors.Is(err, ErrLeaseLost) {
			t.Errorf("Renew of a lost lease: %v; want ErrLeaseLost", err)
		}

		l2 := mustAcquire(t, f, "k2", WithTTL(300*time.Millisecond))
		if err := l2.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := l2.Renew(context.Background()); !errors.Is(err, ErrReleased) {
			t.Errorf("Renew after Release: %v; want ErrReleased", err)
		}

		hung := make(chan struct{})
		f.set(func(f *fake) {
			f.extendHook = func(ctx context.Context) (ExtendResult, error) {
				<-hung
				return ExtendResult{}, ctx.Err()
			}
		})
		l3 := mustAcquire(t, f, "k3", WithTTL(300*time.Millisecond))
		why := errors.New("gave up")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(10*time.Millisecond, func() { cancel(why) })
		if err := l3.Renew(ctx); !errors.Is(err, why) {
			t.Errorf("Renew whose context ended: %v; want its cause", err)
		}
		if l3.Err() != nil {
			t.Errorf("the lease ended with Renew's context: %v", l3.Err())
		}
		close(hung)
	})
}
