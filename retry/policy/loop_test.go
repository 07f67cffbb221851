package policy

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Retry's uses are tested where their contracts are: retry.Do (Firestore
// operations), locking.Acquire (the lock contract) and the lease's
// renewals. These tests pin the loop's own rules.

// fixed waits exactly wait before every retry.
func fixed(wait time.Duration) Policy { return Policy{Initial: wait, Max: wait, Multiplier: 1} }

// failing returns an op that fails with err and records when each call
// started, from now.
func failing(err error) (func(context.Context) error, *[]time.Duration) {
	start := time.Now()
	var at []time.Duration
	return func(context.Context) error {
		at = append(at, time.Since(start))
		return err
	}, &at
}

// By default TotalTimeout bounds the waits: the last is cut to end there,
// one last attempt is made then, and the error is the last attempt's.
func TestRetryTotalTimeoutBoundsWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("down")
		p := fixed(100 * time.Millisecond)
		p.MaxRetries, p.TotalTimeout = Unlimited, 250*time.Millisecond
		op, at := failing(down)
		n, err := Retry(context.Background(), p, op)
		if want := []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}; !slices.Equal(*at, want) || n != 4 {
			t.Errorf("%d attempts at %v; want them at %v", n, *at, want)
		}
		if err != down {
			t.Errorf("Retry = %v; want the last attempt's error", err)
		}
	})
}

// With CancelAtTotalTimeout, TotalTimeout ends the run: no attempt at it,
// the waits not cut (the notified wait is the policy's), and the error
// wraps the timeout.
func TestRetryCancelAtTotalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		down := errors.New("down")
		p := fixed(100 * time.Millisecond)
		p.MaxRetries, p.TotalTimeout = Unlimited, 250*time.Millisecond
		op, at := failing(down)
		var waits []time.Duration
		n, err := Retry(context.Background(), p, op, CancelAtTotalTimeout(),
			WithNotify(func(_ error, d time.Duration) { waits = append(waits, d) }))
		if n != 3 || len(*at) != 3 || !slices.Equal(waits, []time.Duration{100 * time.Millisecond, 100 * time.Millisecond, 100 * time.Millisecond}) {
			t.Errorf("%d attempts at %v, waits %v; want 3, each wait 100ms", n, *at, waits)
		}
		if !errors.Is(err, down) || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Retry = %v; want the last error and the timeout", err)
		}
	})
}

// A Permanent failure ends the loop at once, and comes back unmarked.
func TestRetryPermanent(t *testing.T) {
	no := errors.New("no")
	op, at := failing(backoff.Permanent(no))
	n, err := Retry(context.Background(), fixed(time.Hour).Within(time.Hour), op)
	var pe *backoff.PermanentError
	if n != 1 || len(*at) != 1 || err != no || errors.As(err, &pe) {
		t.Errorf("Retry = %d, %v; want one attempt and the unmarked error", n, err)
	}
}

// The first attempt is the caller's to make, whatever ctx says; no retry
// is made on an ended ctx.
func TestRetryEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("shutting down")
	calls := 0
	n, err := Retry(ctx, fixed(time.Millisecond).Within(time.Hour), func(context.Context) error {
		calls++
		cancel(why)
		return errors.New("down")
	})
	if n != 1 || calls != 1 || !errors.Is(err, why) {
		t.Errorf("Retry = %d attempts (%d calls), %v; want one, and the cause", n, calls, err)
	}
	// Already ended: the first attempt is still made, and not retried.
	calls = 0
	if n, _ := Retry(ctx, fixed(time.Millisecond).Within(time.Hour), func(ctx context.Context) error {
		calls++
		return ctx.Err()
	}); n != 1 || calls != 1 {
		t.Errorf("on an ended ctx: %d attempts (%d calls); want the first only", n, calls)
	}
}

// Contended failures are retried past MaxRetries for ContentionWait:
// from the first contended failure in a row by default, from the start
// with ContentionInAttempts.
func TestRetryContention(t *testing.T) {
	contended, other := errors.New("contended"), errors.New("other")
	classify := WithClassify(func(err error) Failure {
		if err == contended {
			return Contended
		}
		return Retryable
	})
	for _, c := range []struct {
		name string
		opts []Option
		want time.Duration // when the last attempt starts
	}{
		{"from the first in a row", []Option{classify}, 5*time.Second + 10*time.Second},
		{"from the start", []Option{classify, ContentionInAttempts()}, 10 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := fixed(time.Second)
				p.MaxRetries, p.ContentionWait = 5, 10*time.Second
				start := time.Now()
				var last time.Duration
				_, err := Retry(context.Background(), p, func(context.Context) error {
					last = time.Since(start)
					if last < 5*time.Second {
						return other // five failures that are not contention, within MaxRetries
					}
					return contended
				}, c.opts...)
				if err != contended || last != c.want {
					t.Errorf("Retry = %v, last attempt at %s; want contended at %s", err, last, c.want)
				}
			})
		})
	}
}

func TestDelayAfter(t *testing.T) {
	p := Policy{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2, Jitter: 0.2}
	for _, f := range []Failure{Retryable, Contended, PushBack} {
		want := p.Delay(3, 0.3)
		if f == PushBack {
			want *= 2
		}
		if got := p.DelayAfter(f, 3, 0.3); got != want {
			t.Errorf("DelayAfter(%v) = %s; want %s", f, got, want)
		}
	}
	p.Max = 1 << 62
	if d := p.DelayAfter(PushBack, 100, 0.999); d <= 0 {
		t.Errorf("DelayAfter(PushBack) overflowed: %s", d)
	}
}
