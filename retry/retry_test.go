package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/snapwriter/snapwriter/retry/policy"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"
)

// middle makes every jitter draw 0.5, which scales a wait by exactly 1:
// with it, Do's waits are the policy's base delays to the nanosecond.
var middle = policy.WithRand(func() float64 { return 0.5 })

// The Do tests run in a synctest bubble: the backoff's real timers run on
// the bubble's fake clock, so every wait is exact and takes no real time.

func TestDefaultPolicy(t *testing.T) {
	p := DefaultPolicy()
	want := Policy{Initial: time.Second, Max: 30 * time.Second, Multiplier: 2, Jitter: 0.2, MaxRetries: 3,
		AttemptTimeout: 30 * time.Second, TotalTimeout: 300 * time.Second}
	if p != want {
		t.Errorf("DefaultPolicy = %+v, want %+v", p, want)
	}
	if err := p.Validate(); err != nil {
		t.Error(err)
	}
}

func TestDelayTable(t *testing.T) {
	p := DefaultPolicy()
	for n, base := range []time.Duration{1, 2, 4, 8, 16, 30, 30, 30} {
		base *= time.Second
		for _, c := range []struct {
			u    float64
			want time.Duration
		}{{0, base * 8 / 10}, {0.5, base}, {0.75, base * 11 / 10}} {
			if got := Delay(p, n, codes.Unavailable, c.u); got != c.want {
				t.Errorf("Delay(%d, u=%v) = %s, want %s", n, c.u, got, c.want)
			}
		}
	}
	if got := Delay(p, 0, codes.ResourceExhausted, 0.5); got != 2*time.Second {
		t.Errorf("RESOURCE_EXHAUSTED Delay(0) = %s, want 2s", got)
	}
	if got := Delay(p, 10, codes.ResourceExhausted, 0.5); got != 60*time.Second {
		t.Errorf("RESOURCE_EXHAUSTED Delay(10) = %s, want 60s (twice the cap)", got)
	}
}

// The delay is min(initial·2^n, max)·(1 ± jitter), and
// RESOURCE_EXHAUSTED waits at least twice as long.
func TestPropertyDelayWithinJitterBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := DefaultPolicy()
		p.Initial = time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(10*time.Second)).Draw(rt, "initial"))
		p.Max = p.Initial * time.Duration(rapid.Int64Range(1, 100).Draw(rt, "max/initial"))
		p.Jitter = rapid.Float64Range(0, 0.99).Draw(rt, "jitter")
		n := rapid.IntRange(0, 20).Draw(rt, "retry")
		u := rapid.Float64Range(0, 1).Filter(func(f float64) bool { return f < 1 }).Draw(rt, "u")
		code := codes.Code(rapid.Uint32Range(0, 16).Draw(rt, "code"))
		base := float64(min(p.Initial<<n, p.Max))
		if code == codes.ResourceExhausted {
			base *= 2
		}
		d := float64(Delay(p, n, code, u))
		if lo, hi := base*(1-p.Jitter)-1, base*(1+p.Jitter)+1; d < lo || d > hi {
			rt.Fatalf("Delay(%d, %v, %v) = %v, want within [%v, %v]", n, code, u, time.Duration(d), time.Duration(lo), time.Duration(hi))
		}
		if code != codes.ResourceExhausted && Delay(p, n, codes.ResourceExhausted, u) < 2*Delay(p, n, code, u) {
			rt.Fatalf("RESOURCE_EXHAUSTED waits less than twice %v", code)
		}
	})
}

func TestClassify(t *testing.T) {
	retryable := map[codes.Code]bool{codes.DeadlineExceeded: true, codes.Unavailable: true,
		codes.Internal: true, codes.Aborted: true, codes.ResourceExhausted: true}
	for c := codes.OK + 1; c <= codes.Unauthenticated; c++ {
		for _, err := range []error{status.Error(c, "x"), fmt.Errorf("wrapped: %w", status.Error(c, "x"))} {
			r, code := Classify(err)
			if r != retryable[c] || code != c {
				t.Errorf("Classify(%v) = %v, %v", err, r, code)
			}
		}
		if r, code := Classify(Permanent(status.Error(c, "x"))); r || code != c {
			t.Errorf("Classify(Permanent(%v)) = %v, %v", c, r, code)
		}
	}
	for _, c := range []struct {
		err  error
		r    bool
		code codes.Code
	}{
		{nil, false, codes.OK},
		{context.DeadlineExceeded, true, codes.DeadlineExceeded},
		{fmt.Errorf("attempt: %w", context.DeadlineExceeded), true, codes.DeadlineExceeded},
		{context.Canceled, false, codes.Canceled},
		{errors.New("plain"), false, codes.Unknown},
	} {
		if r, code := Classify(c.err); r != c.r || code != c.code {
			t.Errorf("Classify(%v) = %v, %v; want %v, %v", c.err, r, code, c.r, c.code)
		}
	}
	base := errors.New("base")
	if !errors.Is(Permanent(base), base) || Permanent(nil) != nil {
		t.Error("Permanent hides its error")
	}
}

func TestDoRetriesTransientThenSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		var waits []time.Duration
		st, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error {
			calls++
			if calls < 3 {
				return status.Error(codes.Unavailable, "try again")
			}
			return nil
		}, WithNotify(func(_ error, d time.Duration) { waits = append(waits, d) }), middle)
		if err != nil || st.Attempts != 3 || st.Retries != 2 || st.LastCode != codes.OK {
			t.Fatalf("Do = %+v, %v", st, err)
		}
		if want := []time.Duration{time.Second, 2 * time.Second}; !slices.Equal(waits, want) {
			t.Errorf("waits = %v, want %v", waits, want)
		}
		if st.Elapsed != 3*time.Second {
			t.Errorf("Elapsed = %s, want the 3 s of waits", st.Elapsed)
		}
	})
}

// A retryable failure is retried exactly maxRetries times, each
// wait the policy's.
func TestDoStopsAfterMaxRetries(t *testing.T) {
	for _, c := range []struct {
		maxRetries int
		elapsed    time.Duration
	}{{0, 0}, {1, time.Second}, {3, 7 * time.Second}, {5, 31 * time.Second}} {
		t.Run(fmt.Sprint(c.maxRetries), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := DefaultPolicy()
				p.MaxRetries = c.maxRetries
				calls := 0
				st, err := Do(context.Background(), p, func(context.Context) error {
					calls++
					return status.Error(codes.DeadlineExceeded, "slow")
				}, middle)
				if calls != c.maxRetries+1 || st.Attempts != c.maxRetries+1 || st.Retries != c.maxRetries {
					t.Errorf("%d calls, %+v", calls, st)
				}
				if st.Elapsed != c.elapsed {
					t.Errorf("Elapsed = %s, want %s", st.Elapsed, c.elapsed)
				}
				if status.Code(err) != codes.DeadlineExceeded {
					t.Errorf("err %v lost its code", err)
				}
			})
		})
	}
}

func TestDoPermanentIsNotRetried(t *testing.T) {
	sentinel := errors.New("fenced")
	for _, c := range []struct {
		name string
		err  error
	}{
		{"permanent code", status.Error(codes.PermissionDenied, "no")},
		{"marked", Permanent(fmt.Errorf("x: %w", sentinel))},
		{"marked retryable code", Permanent(status.Error(codes.Unavailable, "marked"))},
	} {
		t.Run(c.name, func(t *testing.T) {
			calls := 0
			st, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error { calls++; return c.err })
			if calls != 1 || st.Retries != 0 {
				t.Errorf("%d calls", calls)
			}
			var pe *backoff.PermanentError
			if errors.As(err, &pe) {
				t.Errorf("%v: the Permanent marker leaked", err)
			}
		})
	}
	_, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error { return Permanent(fmt.Errorf("x: %w", sentinel)) })
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is lost through Do: %v", err)
	}
}

func TestDoAttemptTimeoutIsRetryable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.AttemptTimeout, p.MaxRetries = 20*time.Second, 2
		calls := 0
		st, err := Do(context.Background(), p, func(ctx context.Context) error {
			calls++
			if _, ok := ctx.Deadline(); !ok {
				t.Error("attempt has no deadline")
			}
			if calls == 3 {
				return nil
			}
			<-ctx.Done()
			return ctx.Err()
		}, middle)
		if err != nil || st.Attempts != 3 {
			t.Errorf("Do = %+v, %v; want success on the third attempt", st, err)
		}
		// Two attempts that time out, each followed by its wait.
		if want := 20*time.Second + time.Second + 20*time.Second + 2*time.Second; st.Elapsed != want {
			t.Errorf("Elapsed = %s, want %s", st.Elapsed, want)
		}
	})
}

func TestDoTotalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.Initial, p.Max = 50*time.Second, 50*time.Second
		p.MaxRetries = 100
		p.TotalTimeout = 120 * time.Second
		st, err := Do(context.Background(), p, func(context.Context) error { return status.Error(codes.Unavailable, "down") }, middle)
		// Attempts at 0, 50 s and 100 s; the wait for the fourth is cut at 120 s.
		if st.Attempts != 3 || st.Elapsed != 120*time.Second {
			t.Errorf("total timeout not applied: %+v", st)
		}
		if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.Unavailable {
			t.Errorf("err = %v; want the timeout and the last error", err)
		}
	})
}

func TestDoCancelStopsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.Initial, p.Max = time.Hour, time.Hour
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Second, cancel)
		st, err := Do(ctx, p, func(context.Context) error { return status.Error(codes.Aborted, "contention") })
		if st.Elapsed != 20*time.Second || !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v after %s; want canceled after 20 s", err, st.Elapsed)
		}
	})
}

func TestValidate(t *testing.T) {
	for name, edit := range map[string]func(*Policy){
		"zero initial":    func(p *Policy) { p.Initial = 0 },
		"max < initial":   func(p *Policy) { p.Max = p.Initial / 2 },
		"multiplier":      func(p *Policy) { p.Multiplier = 0.5 },
		"jitter":          func(p *Policy) { p.Jitter = 1.5 },
		"retries":         func(p *Policy) { p.MaxRetries = -2 },
		"attempt":         func(p *Policy) { p.AttemptTimeout = -1 },
		"total":           func(p *Policy) { p.TotalTimeout = -1 },
		"negative jitter": func(p *Policy) { p.Jitter = -0.1 },
		"NaN jitter":      func(p *Policy) { p.Jitter = math.NaN() },
		"NaN multiplier":  func(p *Policy) { p.Multiplier = math.NaN() },
		"inf multiplier":  func(p *Policy) { p.Multiplier = math.Inf(1) },
		"negative max":    func(p *Policy) { p.Max = -time.Second },
		"negative init":   func(p *Policy) { p.Initial = -time.Second },
		"no waits":        func(p *Policy) { *p = Policy{MaxRetries: 1} },
	} {
		p := DefaultPolicy()
		edit(&p)
		if p.Validate() == nil {
			t.Errorf("%s: accepted %+v", name, p)
		}
		if _, err := Do(context.Background(), p, func(context.Context) error { return nil }); err == nil {
			t.Errorf("%s: Do ran with an invalid policy", name)
		}
	}
}

// Every zero field means "none": the zero Policy is one attempt, with no
// time bound of Do's own; MaxRetries 0 no retries, Unlimited no cap;
// TotalTimeout 0 and AttemptTimeout 0 no bound; ContentionWait 0 no extra
// retries for ABORTED.
func TestDoZeroValues(t *testing.T) {
	fixed := func(wait time.Duration) Policy {
		return Policy{Initial: wait, Max: wait, Multiplier: 1}
	}
	for _, c := range []struct {
		name     string
		p        Policy
		fail     int           // attempts that fail before one succeeds (-1: all)
		code     codes.Code    // of the failures
		sleep    time.Duration // each attempt's duration
		attempts int
		elapsed  time.Duration
		wantErr  bool
	}{
		{"zero policy: one attempt", Policy{}, -1, codes.Unavailable, 0, 1, 0, true},
		{"zero policy: no time bound", Policy{}, 0, codes.Unavailable, 100 * time.Hour, 1, 100 * time.Hour, false},
		{"MaxRetries 0: no retries", func() Policy { p := fixed(time.Second); p.TotalTimeout = time.Hour; return p }(),
			-1, codes.Unavailable, 0, 1, 0, true},
		{"Unlimited: retries until the total timeout", func() Policy {
			p := fixed(10 * time.Second)
			p.MaxRetries, p.TotalTimeout = Unlimited, 95*time.Second
			return p
		}(), -1, codes.Unavailable, 0, 10, 95 * time.Second, true},
		{"Unlimited: retries until success", func() Policy { p := fixed(time.Minute); p.MaxRetries = Unlimited; return p }(),
			500, codes.Unavailable, 0, 501, 500 * time.Minute, false},
		{"TotalTimeout 0: no bound", func() Policy { p := fixed(time.Hour); p.MaxRetries = 3; return p }(),
			-1, codes.Unavailable, 0, 4, 3 * time.Hour, true},
		{"AttemptTimeout 0: no bound", func() Policy {
			p := fixed(time.Second)
			p.MaxRetries, p.TotalTimeout = 3, 10*time.Hour
			return p
		}(), 0, codes.Unavailable, 2 * time.Hour, 1, 2 * time.Hour, false},
		{"ContentionWait 0: ABORTED stops at MaxRetries", func() Policy { p := fixed(time.Second); p.MaxRetries = 2; return p }(),
			-1, codes.Aborted, 0, 3, 2 * time.Second, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls := 0
				st, err := Do(context.Background(), c.p, func(ctx context.Context) error {
					calls++
					if d, ok := ctx.Deadline(); ok && c.p.TotalTimeout == 0 {
						t.Errorf("attempt %d has a deadline, %s: neither timeout is set", calls, time.Until(d))
					}
					time.Sleep(c.sleep)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					if c.fail < 0 || calls <= c.fail {
						return status.Error(c.code, "no")
					}
					return nil
				}, middle)
				if (err != nil) != c.wantErr || st.Attempts != c.attempts || calls != c.attempts || st.Elapsed != c.elapsed {
					t.Errorf("Do = %v after %d attempts (%d calls) in %s; want error %v after %d in %s",
						err, st.Attempts, calls, st.Elapsed, c.wantErr, c.attempts, c.elapsed)
				}
				if err != nil && status.Code(err) != c.code {
					t.Errorf("err %v lost its code", err)
				}
			})
		})
	}
}

// At u = 0, 0.5 and 0.999 every wait is within ±20% of
// min(30s, 1s·2^n).
func TestDelayWithinJitterOfBase(t *testing.T) {
	p := DefaultPolicy()
	for n := 0; n <= 6; n++ {
		base := min(time.Second<<n, 30*time.Second)
		lo, hi := base*8/10, base*12/10
		for _, u := range []float64{0, 0.5, 0.999} {
			if d := Delay(p, n, codes.Unavailable, u); d < lo || d > hi {
				t.Errorf("Delay(%d, u=%v) = %s, want within [%s, %s]", n, u, d, lo, hi)
			}
			if d, re := Delay(p, n, codes.Unavailable, u), Delay(p, n, codes.ResourceExhausted, u); re != 2*d {
				t.Errorf("Delay(%d, RESOURCE_EXHAUSTED, u=%v) = %s, want twice %s", n, u, re, d)
			}
		}
	}
}

func TestDelaySaturates(t *testing.T) {
	p := DefaultPolicy()
	p.Max = math.MaxInt64
	for _, n := range []int{-1, 0, 62, 1000, math.MaxInt} {
		for _, code := range []codes.Code{codes.Unavailable, codes.ResourceExhausted} {
			if d := Delay(p, n, code, 0.999); d < p.Initial*8/10 {
				t.Errorf("Delay(%d, %v) = %s: overflowed", n, code, d)
			}
		}
	}
	q := DefaultPolicy()
	if lo, hi := Delay(q, 0, codes.Aborted, -3), Delay(q, 0, codes.Aborted, math.NaN()); lo != 800*time.Millisecond || hi != lo {
		t.Errorf("u below 0 or NaN: %s, %s; want 800ms", lo, hi)
	}
	if d := Delay(q, 0, codes.Aborted, 7); d != 1200*time.Millisecond {
		t.Errorf("u above 1: %s; want 1.2s", d)
	}
}

func TestClassifyBackoffPermanent(t *testing.T) {
	if r, code := Classify(fmt.Errorf("tx: %w", backoff.Permanent(status.Error(codes.Unavailable, "x")))); r || code != codes.Unavailable {
		t.Errorf("Classify(backoff.Permanent(UNAVAILABLE)) = %v, %v", r, code)
	}
}

// The waits follow the code of the failure they follow: RESOURCE_EXHAUSTED
// doubles, the others do not.
func TestDoWaitsPerCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fails := []codes.Code{codes.Unavailable, codes.ResourceExhausted, codes.Internal}
		calls := 0
		var notified, measured []time.Duration
		last := time.Now()
		st, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error {
			if calls > 0 {
				measured = append(measured, time.Since(last))
			}
			last = time.Now()
			calls++
			if calls <= len(fails) {
				return status.Error(fails[calls-1], "busy")
			}
			return nil
		}, middle, WithNotify(func(err error, d time.Duration) { notified = append(notified, d) }))
		if err != nil || st.Attempts != 4 || st.Retries != 3 || st.LastCode != codes.OK {
			t.Fatalf("Do = %+v, %v", st, err)
		}
		want := []time.Duration{time.Second, 4 * time.Second, 4 * time.Second}
		if !slices.Equal(measured, want) || !slices.Equal(notified, want) {
			t.Errorf("waited %v, notified %v; want %v", measured, notified, want)
		}
	})
}

// The returned error names the attempts and keeps the last error's status.
func TestDoErrorKeepsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error {
			return fmt.Errorf("commit: %w", status.Error(codes.Aborted, "contention"))
		})
		if st.Attempts != 4 || st.LastCode != codes.Aborted {
			t.Errorf("Stats %+v", st)
		}
		if !strings.HasPrefix(err.Error(), "after 4 attempts: commit: rpc error: code = Aborted") {
			t.Errorf("message %q", err)
		}
		var gs interface{ GRPCStatus() *status.Status }
		if status.Code(err) != codes.Aborted || !errors.As(err, &gs) || gs.GRPCStatus().Message() != "contention" {
			t.Errorf("status lost: %v", err)
		}
	})
	_, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error { return status.Error(codes.NotFound, "gone") })
	if err.Error() != "after 1 attempt: rpc error: code = NotFound desc = gone" {
		t.Errorf("message %q", err)
	}
}

// A cancel during a wait ends the wait at once; the error wraps the cause
// and the last op error, and the wait that never ended is not a retry.
func TestDoCancelWrapsCauseAndLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.Initial, p.Max = time.Hour, time.Hour
		lost := errors.New("lease lost")
		ctx, cancel := context.WithCancelCause(context.Background())
		st, err := Do(ctx, p, func(context.Context) error {
			return status.Error(codes.Unavailable, "down")
		}, WithNotify(func(error, time.Duration) { go cancel(lost) }))
		if !errors.Is(err, lost) || status.Code(err) != codes.Unavailable {
			t.Errorf("err = %v; want the cause and the last error", err)
		}
		if st.Attempts != 1 || st.Retries != 0 || st.Elapsed != 0 {
			t.Errorf("Stats %+v; want one attempt and no time waited", st)
		}
	})
}

func TestDoCancelDuringAttempt(t *testing.T) {
	lost := errors.New("lease lost")
	ctx, cancel := context.WithCancelCause(context.Background())
	st, err := Do(ctx, DefaultPolicy(), func(ctx context.Context) error {
		cancel(lost)
		<-ctx.Done()
		return ctx.Err()
	})
	if !errors.Is(err, lost) || !errors.Is(err, context.Canceled) || st.Attempts != 1 || st.LastCode != codes.Canceled {
		t.Errorf("Do = %+v, %v", st, err)
	}
}

func TestDoNotAttemptedOnEndedContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st, err := Do(ctx, DefaultPolicy(), func(context.Context) error {
		t.Error("op ran on an ended context")
		return nil
	})
	if !errors.Is(err, context.Canceled) || st.Attempts != 0 || st.Retries != 0 {
		t.Errorf("Do = %+v, %v", st, err)
	}
}

// An attempt cut off by the total timeout is not retried, and the error
// says which timeout it was.
func TestDoTotalTimeoutDuringAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.AttemptTimeout, p.TotalTimeout = time.Hour, 30*time.Second
		st, err := Do(context.Background(), p, func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		})
		if st.Attempts != 1 || st.Elapsed != 30*time.Second || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "total timeout 30s") {
			t.Errorf("Do = %+v, %v", st, err)
		}
	})
}

// The attempt's own timeout is retryable, with code DEADLINE_EXCEEDED.
func TestDoAttemptTimeoutCode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.AttemptTimeout, p.MaxRetries = 5*time.Second, 1
		var notified []error
		st, err := Do(context.Background(), p, func(ctx context.Context) error {
			<-ctx.Done()
			return context.Cause(ctx)
		}, middle, WithNotify(func(err error, _ time.Duration) { notified = append(notified, err) }))
		if st.Attempts != 2 || st.LastCode != codes.DeadlineExceeded || len(notified) != 1 || st.Elapsed != 11*time.Second {
			t.Errorf("Do = %+v, %v, notified %v; want two 5 s attempts 1 s apart", st, err, notified)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "attempt timeout 5s") {
			t.Errorf("err = %v", err)
		}
	})
}

// ABORTED (lock contention) is retried past MaxRetries until ContentionWait
// has passed, with waits of at most 4·Initial; other codes still stop at
// MaxRetries.
func TestDoContentionWait(t *testing.T) {
	aborted := status.Error(codes.Aborted, "Transaction lock timeout")
	unavailable := status.Error(codes.Unavailable, "down")
	// The highest jitter draw, so the waits are the longest the policy allows.
	top := policy.WithRand(func() float64 { return 1 })
	for _, c := range []struct {
		name           string
		err            error
		contentionWait time.Duration
		waits          []time.Duration
	}{
		// 1.2 s, then from the second retry on waits of 2.4 s and 4.8 s
		// (4 s and at most Initial·2² before jitter) up to exactly 90 s.
		{"aborted", aborted, 90 * time.Second,
			append([]time.Duration{1200 * time.Millisecond, 2400 * time.Millisecond}, slices.Repeat([]time.Duration{4800 * time.Millisecond}, 18)...)},
		{"unavailable", unavailable, 90 * time.Second, []time.Duration{1200 * time.Millisecond}},
		{"no contention wait", aborted, 0, []time.Duration{1200 * time.Millisecond}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := DefaultPolicy()
				p.MaxRetries, p.ContentionWait = 1, c.contentionWait
				var waits []time.Duration
				st, err := Do(context.Background(), p, func(context.Context) error { return c.err },
					WithNotify(func(_ error, d time.Duration) { waits = append(waits, d) }), top)
				if status.Code(err) != status.Code(c.err) {
					t.Fatalf("err = %v", err)
				}
				var total time.Duration
				for _, d := range c.waits {
					total += d
				}
				if !slices.Equal(waits, c.waits) || st.Attempts != len(c.waits)+1 || st.Elapsed != total {
					t.Errorf("%d attempts in %s, waits %v; want %d in %s, waits %v", st.Attempts, st.Elapsed, waits, len(c.waits)+1, total, c.waits)
				}
			})
		})
	}
}

func TestTransientIsRetried(t *testing.T) {
	inner := status.Error(codes.InvalidArgument, "Transaction is invalid or closed")
	if r, code := Classify(Transient(inner)); !r || code != codes.InvalidArgument {
		t.Errorf("Classify(Transient) = %v, %v", r, code)
	}
	if r, _ := Classify(Permanent(Transient(inner))); r {
		t.Error("Permanent(Transient(err)) is retryable")
	}
	if Transient(nil) != nil {
		t.Error("Transient(nil) != nil")
	}
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		st, err := Do(context.Background(), DefaultPolicy(), func(context.Context) error {
			calls++
			if calls < 3 {
				return Transient(inner)
			}
			return nil
		})
		if err != nil || st.Attempts != 3 {
			t.Errorf("Do = %+v, %v", st, err)
		}
		_, err = Do(context.Background(), DefaultPolicy(), func(context.Context) error { return Transient(inner) })
		if status.Code(err) != codes.InvalidArgument || !errors.Is(err, inner) {
			t.Errorf("the code or error is lost through Transient: %v", err)
		}
	})
}

// A store that refuses with RESOURCE_EXHAUSTED for a minute, then
// accepts: the push-back is retried past MaxRetries, within TotalTimeout,
// and costs time, not the operation.
func TestDoRetriesPushBackUntilTotalTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy() // 3 retries, 300 s in all
		start := time.Now()
		var longest time.Duration
		last := start
		st, err := Do(context.Background(), p, func(context.Context) error {
			longest = max(longest, time.Since(last))
			last = time.Now()
			if time.Since(start) < time.Minute {
				return status.Error(codes.ResourceExhausted, "Quota exceeded.")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Do = %v, want success once the push-back ended", err)
		}
		if st.Attempts <= p.MaxRetries+1 {
			t.Errorf("%d attempts: want more than MaxRetries+1 = %d", st.Attempts, p.MaxRetries+1)
		}
		// No wait past the last counted retry's: 2·4 s ±20 %.
		if longest > 9600*time.Millisecond {
			t.Errorf("longest wait %s: want ≤ 9.6 s", longest)
		}
		if st.Elapsed > time.Minute+10*time.Second {
			t.Errorf("succeeded %s after the start: want within 10 s of the push-back's end", st.Elapsed)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		// A push-back that outlasts TotalTimeout fails there.
		p := DefaultPolicy()
		st, err := Do(context.Background(), p, func(context.Context) error {
			return status.Error(codes.ResourceExhausted, "Quota exceeded.")
		})
		if status.Code(err) != codes.ResourceExhausted || st.Elapsed > p.TotalTimeout {
			t.Errorf("Do = %v after %s: want RESOURCE_EXHAUSTED within %s", err, st.Elapsed, p.TotalTimeout)
		}
		// Without a TotalTimeout it counts like any other failure.
		p.TotalTimeout = 0
		st, _ = Do(context.Background(), p, func(context.Context) error {
			return status.Error(codes.ResourceExhausted, "Quota exceeded.")
		})
		if st.Attempts != p.MaxRetries+1 {
			t.Errorf("no total timeout: %d attempts, want %d", st.Attempts, p.MaxRetries+1)
		}
	})
}

// A gate's wait comes before each attempt and outside its AttemptTimeout;
// its error ends Do without an attempt.
func TestDoWithGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := DefaultPolicy()
		p.AttemptTimeout = time.Second
		gates := 0
		st, err := Do(context.Background(), p, func(ctx context.Context) error {
			if d, _ := ctx.Deadline(); time.Until(d) != time.Second {
				t.Errorf("the attempt has %s left: its timeout started before the gate opened", time.Until(d))
			}
			if gates < 2 {
				return status.Error(codes.Unavailable, "try again")
			}
			return nil
		}, WithGate(func(ctx context.Context) error {
			gates++
			time.Sleep(5 * time.Second) // longer than the attempt timeout
			return nil
		}))
		if err != nil || st.Attempts != 2 || gates != 2 {
			t.Errorf("Do = %v, %d attempts, %d gates: want success, 2 and 2", err, st.Attempts, gates)
		}
		closed := errors.New("budget closed")
		calls := 0
		st, err = Do(context.Background(), p, func(context.Context) error { calls++; return nil },
			WithGate(func(context.Context) error { return closed }))
		if !errors.Is(err, closed) || calls != 0 || st.Attempts != 0 {
			t.Errorf("Do = %v, %d calls, %d attempts: want the gate's error and no attempt", err, calls, st.Attempts)
		}
	})
}
