package locking

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapwriter/snapwriter/retry/policy"
)

// fixedPolicy waits exactly wait between attempts, for timeout in all.
func fixedPolicy(wait, timeout time.Duration) RetryPolicy {
	return RetryPolicy{Initial: wait, Max: wait, Multiplier: 1, MaxRetries: policy.Unlimited, TotalTimeout: timeout}
}

// attempts makes f record when each of its Acquire calls starts, as an
// offset from now, running then (if set) to decide the call.
func attempts(f *fake, then func(ctx context.Context, n int) error) *[]time.Duration {
	start := time.Now()
	var at []time.Duration
	f.set(func(f *fake) {
		f.acquireHook = func(ctx context.Context) error {
			at = append(at, time.Since(start))
			if then != nil {
				return then(ctx, len(at))
			}
			return nil
		}
	})
	return &at
}

// ms is a list of offsets in milliseconds.
func ms(offsets ...int) []time.Duration {
	d := make([]time.Duration, len(offsets))
	for i, o := range offsets {
		d[i] = time.Duration(o) * time.Millisecond
	}
	return d
}

func TestAcquireNormalisesAndFences(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		l := mustAcquire(t, f, "cafe\u0301")
		if l.Key() != "caf\u00e9" || l.Fence() != "000000000000001" || ValidateLockID(l.LockID()) != nil {
			t.Errorf("lease key %q fence %q lockId ok %v", l.Key(), l.Fence(), ValidateLockID(l.LockID()) == nil)
		}
		if time.Until(l.ExpiresAt()) != DefaultTTL || l.Err() != nil || isClosed(l.Done()) {
			t.Errorf("fresh lease: expires in %s, Err %v", time.Until(l.ExpiresAt()), l.Err())
		}
		// The NFC spelling is the same lock.
		_, err := Acquire(context.Background(), f, "caf\u00e9", WithRetry(RetryPolicy{}))
		if !errors.Is(err, ErrAcquisitionTimeout) {
			t.Errorf("second holder: %v", err)
		}
	})
}

// While the lock is held, Acquire tries at exactly the policy's times: the
// backoff's waits, the last cut to end at the Timeout, MaxRetries
// honoured; then it fails with AcquisitionTimeout.
func TestAcquireWhileHeld(t *testing.T) {
	for _, c := range []struct {
		name string
		p    RetryPolicy
		want []time.Duration // when each attempt starts
	}{
		{"fixed waits until the timeout", fixedPolicy(10*time.Millisecond, 95*time.Millisecond),
			ms(0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95)},
		{"the last wait is cut to the time left", fixedPolicy(100*time.Millisecond, 250*time.Millisecond),
			ms(0, 100, 200, 250)},
		{"exponential", RetryPolicy{Initial: 30 * time.Millisecond, Max: time.Second, Multiplier: 2, MaxRetries: 3, TotalTimeout: time.Hour},
			ms(0, 30, 90, 210)},
		{"Max caps the growth", RetryPolicy{Initial: 10 * time.Millisecond, Max: 25 * time.Millisecond, Multiplier: 2, MaxRetries: 4, TotalTimeout: time.Hour},
			ms(0, 10, 30, 55, 80)},
		{"MaxRetries before the timeout", RetryPolicy{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 1, MaxRetries: 2, TotalTimeout: time.Hour},
			ms(0, 10, 20)},
		{"the timeout before MaxRetries", RetryPolicy{Initial: 10 * time.Millisecond, Max: time.Second, Multiplier: 1, MaxRetries: 10, TotalTimeout: 25 * time.Millisecond},
			ms(0, 10, 20, 25)},
		{"the zero policy: one attempt", RetryPolicy{}, ms(0)},
		{"MaxRetries 0: one attempt whatever TotalTimeout says", RetryPolicy{Initial: time.Millisecond, Max: time.Second, Multiplier: 2, TotalTimeout: time.Hour},
			ms(0)},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				mustAcquire(t, f, "k", WithTTL(time.Hour))
				at := attempts(f, nil)
				start := time.Now()
				_, err := Acquire(context.Background(), f, "k", WithRetry(c.p))
				var le *Error
				if !errors.Is(err, ErrAcquisitionTimeout) || !errors.As(err, &le) || le.Op != "acquire" || le.KeyHash != HashKey("k") {
					t.Fatalf("Acquire = %v; want AcquisitionTimeout for the key", err)
				}
				if fmt.Sprint(*at) != fmt.Sprint(c.want) {
					t.Errorf("attempts at %v; want %v", *at, c.want)
				}
				if el := time.Since(start); el != c.want[len(c.want)-1] {
					t.Errorf("gave up after %s; want right after the last attempt, at %s", el, c.want[len(c.want)-1])
				}
				if n := fmt.Sprintf(" %d attempt", len(c.want)); !strings.Contains(err.Error(), n) {
					t.Errorf("error %q does not count the%s(s)", err, n)
				}
			})
		})
	}
}

// The defaults are the lock contract's: before retry n (from 1) a wait
// uniform in [b/2, b] for b = 100 ms·2ⁿ⁻¹, at most 10 retries, and the last
// attempt at exactly 5 s.
func TestDefaultRetryPolicy(t *testing.T) {
	want := RetryPolicy{Initial: 75 * time.Millisecond, Max: time.Minute, Multiplier: 2, Jitter: 1.0 / 3, MaxRetries: 10, TotalTimeout: 5 * time.Second}
	if got := DefaultRetryPolicy(); got != want {
		t.Fatalf("DefaultRetryPolicy() = %+v", got)
	}
	// All ten waits, with the timeout out of the way.
	p := DefaultRetryPolicy()
	p.TotalTimeout = time.Hour
	lo, hi := make([]float64, 10), make([]float64, 10) // the extremes seen, as fractions of b
	for i := range lo {
		lo[i], hi[i] = 1, 0
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		mustAcquire(t, f, "k", WithTTL(24*time.Hour))
		for range 2000 {
			at := attempts(f, nil)
			if _, err := Acquire(context.Background(), f, "k", WithRetry(p)); !errors.Is(err, ErrAcquisitionTimeout) {
				t.Fatal(err)
			}
			for n := 1; n <= 10 && n < len(*at); n++ {
				base := 100 * time.Millisecond << (n - 1)
				w := (*at)[n] - (*at)[n-1]
				if w < base/2 || w > base {
					t.Fatalf("wait before retry %d = %s; want within [%s, %s]", n, w, base/2, base)
				}
				frac := float64(w) / float64(base)
				lo[n-1], hi[n-1] = min(lo[n-1], frac), max(hi[n-1], frac)
			}
			if len(*at) != 11 {
				t.Fatalf("attempts at %v; want 11: ten retries, and not an 11th", *at)
			}
		}
	})
	// The jitter really spreads the waits over the whole interval.
	for n := range lo {
		if lo[n] > 0.52 || hi[n] < 0.98 {
			t.Errorf("waits before retry %d spread over [%.3f, %.3f] of b; want about [0.5, 1]", n+1, lo[n], hi[n])
		}
	}

	// End to end, with the 5 s timeout: the waits as above, the last one
	// cut so that the last attempt is at 5 s.
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		mustAcquire(t, f, "k", WithTTL(time.Hour))
		for range 200 {
			at := attempts(f, nil)
			if _, err := Acquire(context.Background(), f, "k"); !errors.Is(err, ErrAcquisitionTimeout) {
				t.Fatal(err)
			}
			n := len(*at)
			if n < 7 || n > 8 || (*at)[n-1] != 5*time.Second {
				t.Fatalf("attempts at %v; want 7 or 8, the last at 5s", *at)
			}
			for i := 1; i < n; i++ {
				base := 100 * time.Millisecond << (i - 1)
				gap := (*at)[i] - (*at)[i-1]
				if gap > base || gap < base/2 && i < n-1 {
					t.Fatalf("attempts at %v: wait %d is %s, outside [%s, %s]", *at, i, gap, base/2, base)
				}
			}
		}
	})
}

// Transient failures (the storage unavailable, throttled or slow) are
// retried like contention, within the timeout; if they last, the last one
// is returned with its code, not as a timeout.
func TestAcquireRetriesTransientErrors(t *testing.T) {
	for _, code := range []Code{ServiceUnavailable, RateLimited, NetworkTimeout} {
		t.Run(code.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				cause := errors.New("storage said no")
				at := attempts(f, func(context.Context, int) error { return &Error{Code: code, Op: "acquire", Err: cause} })
				_, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, 50*time.Millisecond)))
				if fmt.Sprint(*at) != fmt.Sprint(ms(0, 10, 20, 30, 40, 50)) {
					t.Errorf("attempts at %v; want every 10ms until 50ms", *at)
				}
				var le *Error
				if !errors.Is(err, &Error{Code: code}) || !errors.Is(err, cause) || errors.Is(err, ErrAcquisitionTimeout) ||
					!errors.As(err, &le) || le.Code != code {
					t.Errorf("Acquire = %v; want the backend's %s", err, code)
				}
				if !strings.Contains(err.Error(), "gave up after 6 attempts in 50ms") {
					t.Errorf("error %q does not say it was retried", err)
				}
			})
		})
	}

	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		at := attempts(f, func(_ context.Context, n int) error {
			if n <= 2 {
				return &Error{Code: ServiceUnavailable, Op: "acquire"}
			}
			return nil
		})
		l, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, time.Second)))
		if err != nil || l.Fence() != "000000000000001" {
			t.Fatalf("Acquire after two transient failures = %v", err)
		}
		defer l.Release(context.Background())
		if fmt.Sprint(*at) != fmt.Sprint(ms(0, 10, 20)) {
			t.Errorf("attempts at %v", *at)
		}
	})
}

// The last attempt decides what the caller is told: a lock still held is
// an AcquisitionTimeout even after transient failures, and a transient
// failure is returned as such even after contention.
func TestAcquireLastAttemptDecides(t *testing.T) {
	for _, c := range []struct {
		name string
		fail func(n int) bool // which of the three attempts fail transiently
		want error
	}{
		{"held at the end", func(n int) bool { return n < 3 }, ErrAcquisitionTimeout},
		{"failing at the end", func(n int) bool { return n == 3 }, ErrServiceUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				mustAcquire(t, f, "k", WithTTL(time.Hour))
				attempts(f, func(_ context.Context, n int) error {
					if c.fail(n) {
						return &Error{Code: ServiceUnavailable, Op: "acquire"}
					}
					return nil
				})
				_, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, 20*time.Millisecond)))
				if !errors.Is(err, c.want) {
					t.Errorf("Acquire = %v; want %v", err, c.want)
				}
			})
		})
	}
}

// Every other failure is returned at once, as the backend gave it.
func TestAcquirePermanentErrors(t *testing.T) {
	for _, backendErr := range []error{
		&Error{Code: AuthFailed, Op: "acquire"},
		&Error{Code: InvalidArgument, Op: "acquire"},
		&Error{Code: Internal, Op: "acquire"},
		&Error{Code: Aborted, Op: "acquire"}, // the backend's, not our caller's
		errors.New("a backend that returns plain errors"),
	} {
		t.Run(backendErr.Error(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				at := attempts(f, func(context.Context, int) error { return backendErr })
				start := time.Now()
				_, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, time.Minute)))
				if err != backendErr || len(*at) != 1 || time.Since(start) != 0 {
					t.Errorf("Acquire = %v after %d attempts in %s; want the backend's error at once", err, len(*at), time.Since(start))
				}
			})
		})
	}
}

// The timeout bounds the waits, not an attempt: one still running at the
// timeout completes, and its outcome counts.
func TestAcquireAttemptInFlightNotCutShort(t *testing.T) {
	for _, held := range []bool{false, true} {
		t.Run(fmt.Sprint("held ", held), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				if held {
					mustAcquire(t, f, "k", WithTTL(time.Hour))
				}
				at := attempts(f, func(ctx context.Context, _ int) error {
					time.Sleep(100 * time.Millisecond) // a slow backend
					return ctx.Err()
				})
				start := time.Now()
				l, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, 50*time.Millisecond)))
				if el := time.Since(start); el != 100*time.Millisecond || len(*at) != 1 {
					t.Errorf("returned after %s and %d attempts; want the one attempt's 100ms", el, len(*at))
				}
				switch {
				case held && !errors.Is(err, ErrAcquisitionTimeout):
					t.Errorf("Acquire of a held lock = %v", err)
				case !held && err != nil:
					t.Errorf("Acquire = %v; want the lock the attempt in flight got", err)
				case !held:
					_ = l.Release(context.Background())
				}
			})
		})
	}
}

func TestAcquireSucceedsOnceReleased(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		first, err := Acquire(context.Background(), f, "k")
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.AfterFunc(35*time.Millisecond, func() { _ = first.Release(context.Background()) })
		l, err := Acquire(context.Background(), f, "k", WithRetry(fixedPolicy(10*time.Millisecond, 5*time.Second)))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release(context.Background())
		if el := time.Since(start); l.Fence() != "000000000000002" || el != 40*time.Millisecond {
			t.Errorf("second lease: fence %q after %s; want fence 2 at the first attempt after the release, 40ms", l.Fence(), el)
		}
	})
}

func TestAcquireAborted(t *testing.T) {
	patient := WithRetry(fixedPolicy(10*time.Second, time.Hour))
	t.Run("already cancelled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			cause := errors.New("shutting down")
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(cause)
			_, err := Acquire(ctx, f, "k", patient)
			if !errors.Is(err, ErrAborted) || !errors.Is(err, cause) || f.count("acquire") != 0 {
				t.Errorf("Acquire = %v after %d attempts; want Aborted with the cause, no attempt", err, f.count("acquire"))
			}
		})
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			mustAcquire(t, f, "k", WithTTL(time.Hour))
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(20*time.Millisecond, cancel)
			start := time.Now()
			_, err := Acquire(ctx, f, "k", patient)
			if !errors.Is(err, ErrAborted) || !errors.Is(err, context.Canceled) || time.Since(start) != 20*time.Millisecond {
				t.Errorf("Acquire = %v after %s; want Aborted at the cancellation, 20ms", err, time.Since(start))
			}
		})
	})
	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			mustAcquire(t, f, "k", WithTTL(time.Hour))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			// The caller's deadline is Aborted, not a timeout of ours.
			if _, err := Acquire(ctx, f, "k", patient); !errors.Is(err, ErrAborted) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Acquire = %v", err)
			}
		})
	})
	t.Run("backend error caused by the cancellation", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			ctx, cancel := context.WithCancel(context.Background())
			at := attempts(f, func(context.Context, int) error {
				cancel() // the transport notices first, and says "unavailable"
				return &Error{Code: ServiceUnavailable, Op: "acquire"}
			})
			if _, err := Acquire(ctx, f, "k", patient); !errors.Is(err, ErrAborted) || len(*at) != 1 {
				t.Errorf("Acquire = %v after %d attempts; want Aborted, not retried", err, len(*at))
			}
		})
	})
}

func TestAcquireInvalidInputTouchesNothing(t *testing.T) {
	f := newFake()
	for _, c := range []struct {
		name string
		key  string
		opts []AcquireOption
	}{
		{"empty key", "", nil},
		{"long key", strings.Repeat("x", 513), nil},
		{"slash", "a/b", nil},
		{"dunder", "__k__", nil},
		{"zero ttl", "k", []AcquireOption{WithTTL(0)}},
		{"sub-ms ttl", "k", []AcquireOption{WithTTL(1500 * time.Microsecond)}},
		{"negative retries", "k", []AcquireOption{WithRetry(RetryPolicy{MaxRetries: -2})}},
		{"negative timeout", "k", []AcquireOption{WithRetry(RetryPolicy{TotalTimeout: -1})}},
		{"no initial wait", "k", []AcquireOption{WithRetry(RetryPolicy{Max: time.Second, Multiplier: 2, MaxRetries: policy.Unlimited, TotalTimeout: time.Second})}},
	} {
		_, err := Acquire(context.Background(), f, c.key, c.opts...)
		var le *Error
		if !errors.Is(err, ErrInvalidArgument) || !errors.As(err, &le) || le.Op != "acquire" {
			t.Errorf("%s: %v", c.name, err)
		}
		if err := Do(context.Background(), f, c.key, func(context.Context, *Lease) error { t.Error("fn ran"); return nil }, c.opts...); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("Do %s: %v", c.name, err)
		}
	}
	if n := f.count("acquire"); n != 0 {
		t.Errorf("invalid input reached the backend %d times", n)
	}
}

func TestRetryPolicyValidate(t *testing.T) {
	ok := fixedPolicy(time.Millisecond, time.Second)
	for _, p := range []RetryPolicy{{}, {TotalTimeout: time.Second}, DefaultRetryPolicy(), ok,
		{Initial: time.Millisecond, Max: time.Millisecond, Multiplier: 1, Jitter: 1, MaxRetries: policy.Unlimited, TotalTimeout: time.Second}} {
		if err := validateRetry("acquire", p); err != nil {
			t.Errorf("Validate(%+v) = %v", p, err)
		}
	}
	with := func(f func(p *RetryPolicy)) RetryPolicy { p := ok; f(&p); return p }
	for name, p := range map[string]RetryPolicy{
		"negative initial":     {Initial: -1},
		"negative max":         {Max: -1},
		"negative timeout":     {TotalTimeout: -1},
		"negative retries":     {MaxRetries: -2},
		"zero initial":         with(func(p *RetryPolicy) { p.Initial = 0 }),
		"max below initial":    with(func(p *RetryPolicy) { p.Max = p.Initial / 2 }),
		"shrinking multiplier": with(func(p *RetryPolicy) { p.Multiplier = 0.5 }),
		"NaN multiplier":       with(func(p *RetryPolicy) { p.Multiplier = math.NaN() }),
		"infinite multiplier":  with(func(p *RetryPolicy) { p.Multiplier = math.Inf(1) }),
		"negative jitter":      with(func(p *RetryPolicy) { p.Jitter = -0.1 }),
		"jitter over 1":        with(func(p *RetryPolicy) { p.Jitter = 1.5 }),
		"NaN jitter":           with(func(p *RetryPolicy) { p.Jitter = math.NaN() }),
	} {
		if err := validateRetry("acquire", p); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("%s: Validate(%+v) = %v; want InvalidArgument", name, p, err)
		}
	}
}

// contended is what a backend returns when another transaction holds the
// lock's record.
func contended() error {
	return &Error{Code: ServiceUnavailable, Op: "acquire", Err: fmt.Errorf("%w: ABORTED", ErrContended)}
}

// lockedFor keeps f's lock record locked by another transaction for d
// from start (Firestore keeps a dead transaction's locks for 60 s): every
// attempt until then is contended.
func lockedFor(f *fake, start time.Time, d time.Duration) {
	attempts(f, func(context.Context, int) error {
		if time.Since(start) < d {
			return contended()
		}
		return nil
	})
}

// acquireWaiting acquires "k" on f, retrying every second within 5 s and
// for the contention wait cw, and says how long since start it took.
func acquireWaiting(f *fake, start time.Time, cw time.Duration) (*Lease, time.Duration, error) {
	p := fixedPolicy(time.Second, 5*time.Second)
	p.ContentionWait = cw
	l, err := Acquire(context.Background(), f, "k", WithRetry(p))
	return l, time.Since(start), err
}

// A record locked by a dead transaction is waited out for ContentionWait,
// past Timeout; without ContentionWait the acquire gives up at Timeout
// (how a writer rerun after a kill inside an extension failed before).
func TestAcquireOutlastsContention(t *testing.T) {
	for _, c := range []struct {
		name    string
		wait    time.Duration
		wantErr bool
	}{{"no contention wait: gives up at the timeout", 0, true}, {"contention wait: outlasts the dead transaction", 90 * time.Second, false}} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFake()
				start := time.Now()
				lockedFor(f, start, time.Minute)
				l, el, err := acquireWaiting(f, start, c.wait)
				if c.wantErr {
					if !errors.Is(err, ErrServiceUnavailable) || !errors.Is(err, ErrContended) || el != 5*time.Second {
						t.Fatalf("Acquire = %v after %s; want ServiceUnavailable (contended) at the 5 s timeout", err, el)
					}
					return
				}
				if err != nil || el < time.Minute || el > time.Minute+time.Second {
					t.Fatalf("Acquire = %v after %s; want the lock within a wait of the record's release at 60 s", err, el)
				}
				_ = l.Release(context.Background())
			})
		})
	}
}

// Contention that outlasts ContentionWait, counted from the first
// contended attempt, ends the wait with the backend's error.
func TestAcquireContentionWaitEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		mustAcquire(t, f, "k", WithTTL(time.Hour))
		start := time.Now()
		// Held (live) for 3 s, then contended for ever.
		attempts(f, func(context.Context, int) error {
			if time.Since(start) < 3*time.Second {
				return nil // the fake then finds the live lock
			}
			return contended()
		})
		if _, el, err := acquireWaiting(f, start, 20*time.Second); !errors.Is(err, ErrContended) || el != 23*time.Second {
			t.Fatalf("Acquire = %v after %s; want contended at 3 s + the 20 s contention wait", err, el)
		}
	})
}

// A lock merely held by a live holder still ends at Timeout with
// AcquisitionTimeout, even with a contention wait and after a contended
// attempt: only contention extends the wait.
func TestAcquireHeldIgnoresContentionWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		mustAcquire(t, f, "k", WithTTL(time.Hour))
		start := time.Now()
		attempts(f, func(_ context.Context, n int) error {
			if n == 1 {
				return contended()
			}
			return nil // the fake then finds the live lock
		})
		if _, el, err := acquireWaiting(f, start, 90*time.Second); !errors.Is(err, ErrAcquisitionTimeout) || el != 5*time.Second {
			t.Fatalf("Acquire = %v after %s; want AcquisitionTimeout at the 5 s timeout", err, el)
		}
	})
}

// AttemptTimeout bounds each attempt, so a store that never answers ends
// the wait at Timeout plus at most one attempt, not when ctx ends.
func TestAcquireAttemptTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake()
		start := time.Now()
		at := attempts(f, func(ctx context.Context, _ int) error {
			<-ctx.Done()
			return &Error{Code: NetworkTimeout, Op: "acquire", Err: ctx.Err()}
		})
		p := fixedPolicy(time.Second, 10*time.Second)
		p.AttemptTimeout = 3 * time.Second
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		_, err := Acquire(ctx, f, "k", WithRetry(p))
		if el := time.Since(start); !errors.Is(err, ErrNetworkTimeout) || el != 11*time.Second || len(*at) != 3 {
			t.Fatalf("Acquire = %v after %s and %d attempts; want NetworkTimeout at 11 s after 3 attempts (at 0, 4 and 8 s, 3 s each)", err, el, len(*at))
		}
	})
}

// Every zero field of the policy means "none", never "unbounded" or "one
// attempt": TotalTimeout 0 sets no bound on the retries (MaxRetries and
// ctx still do), AttemptTimeout 0 none on an attempt. (MaxRetries 0 and
// the zero policy: TestAcquireWhileHeld; ContentionWait 0:
// TestAcquireOutlastsContention.)
func TestAcquireZeroValues(t *testing.T) {
	t.Run("TotalTimeout 0: MaxRetries ends the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			mustAcquire(t, f, "k", WithTTL(24*time.Hour))
			at := attempts(f, nil)
			p := RetryPolicy{Initial: time.Hour, Max: time.Hour, Multiplier: 1, MaxRetries: 3}
			_, err := Acquire(context.Background(), f, "k", WithRetry(p))
			if want := []time.Duration{0, time.Hour, 2 * time.Hour, 3 * time.Hour}; !errors.Is(err, ErrAcquisitionTimeout) || fmt.Sprint(*at) != fmt.Sprint(want) {
				t.Errorf("Acquire = %v, attempts at %v; want AcquisitionTimeout after attempts at %v", err, *at, want)
			}
		})
	})
	t.Run("TotalTimeout 0 and Unlimited: ctx ends the wait", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			mustAcquire(t, f, "k", WithTTL(24*time.Hour))
			at := attempts(f, nil)
			p := RetryPolicy{Initial: 10 * time.Minute, Max: 10 * time.Minute, Multiplier: 1, MaxRetries: policy.Unlimited}
			ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
			defer cancel()
			start := time.Now()
			_, err := Acquire(ctx, f, "k", WithRetry(p))
			if !errors.Is(err, ErrAborted) || !errors.Is(err, context.DeadlineExceeded) || len(*at) != 6 || time.Since(start) != 55*time.Minute {
				t.Errorf("Acquire = %v after %d attempts in %s; want Aborted at ctx's deadline, 55m, after 6 attempts",
					err, len(*at), time.Since(start))
			}
		})
	})
	t.Run("TotalTimeout 0 and Unlimited: the lock once freed", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			first := mustAcquire(t, f, "k", WithTTL(24*time.Hour))
			time.AfterFunc(5*time.Hour+time.Second, func() { _ = first.Release(context.Background()) })
			p := RetryPolicy{Initial: time.Minute, Max: time.Minute, Multiplier: 1, MaxRetries: policy.Unlimited}
			start := time.Now()
			l, err := Acquire(context.Background(), f, "k", WithRetry(p))
			if err != nil || time.Since(start) != 5*time.Hour+time.Minute {
				t.Fatalf("Acquire = %v after %s; want the lock at the first attempt after its release, 5h1m", err, time.Since(start))
			}
			_ = l.Release(context.Background())
		})
	})
	t.Run("AttemptTimeout 0: no bound on an attempt", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			attempts(f, func(ctx context.Context, _ int) error {
				if d, ok := ctx.Deadline(); ok {
					t.Errorf("the attempt has a deadline, in %s", time.Until(d))
				}
				time.Sleep(2 * time.Hour) // a slow backend
				return ctx.Err()
			})
			start := time.Now()
			l, err := Acquire(context.Background(), f, "k", WithRetry(DefaultRetryPolicy()))
			if err != nil || time.Since(start) != 2*time.Hour {
				t.Fatalf("Acquire = %v after %s; want the lock the 2h attempt got", err, time.Since(start))
			}
			_ = l.Release(context.Background())
		})
	})
}

// Contention is waited out for ContentionWait even by a policy that makes
// no retries (MaxRetries 0, as Within(0) gives a writer that does not
// wait for a held lock), while a held lock still gets one attempt.
func TestAcquireContentionPastMaxRetries(t *testing.T) {
	p := fixedPolicy(time.Second, 0).Within(0)
	p.ContentionWait = 90 * time.Second
	if p.MaxRetries != 0 || p.TotalTimeout != 0 {
		t.Fatalf("policy %+v; want no retries", p)
	}
	t.Run("contended", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			start := time.Now()
			lockedFor(f, start, time.Minute)
			l, err := Acquire(context.Background(), f, "k", WithRetry(p))
			if el := time.Since(start); err != nil || el != time.Minute {
				t.Fatalf("Acquire = %v after %s; want the lock at the record's release, 60 s", err, el)
			}
			_ = l.Release(context.Background())
		})
	})
	t.Run("held", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newFake()
			mustAcquire(t, f, "k", WithTTL(time.Hour))
			at := attempts(f, nil)
			if _, err := Acquire(context.Background(), f, "k", WithRetry(p)); !errors.Is(err, ErrAcquisitionTimeout) || len(*at) != 1 {
				t.Fatalf("Acquire = %v after %d attempts; want AcquisitionTimeout after one", err, len(*at))
			}
		})
	})
}
