package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"
)

// fast is the default policy scaled to milliseconds.
func fast() Policy {
	p := DefaultPolicy()
	p.Initial, p.Max = time.Millisecond, 8*time.Millisecond
	p.AttemptTimeout, p.TotalTimeout = time.Second, 10*time.Second
	return p
}

func TestDefaultPolicyIsTheSpecs(t *testing.T) {
	p := DefaultPolicy()
	want := Policy{time.Second, 30 * time.Second, 2, 0.2, 3, 30 * time.Second, 300 * time.Second}
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
			if got := p.Delay(n, codes.Unavailable, c.u); got != c.want {
				t.Errorf("Delay(%d, u=%v) = %s, want %s", n, c.u, got, c.want)
			}
		}
	}
	if got := p.Delay(0, codes.ResourceExhausted, 0.5); got != 2*time.Second {
		t.Errorf("RESOURCE_EXHAUSTED Delay(0) = %s, want 2s", got)
	}
	if got := p.Delay(10, codes.ResourceExhausted, 0.5); got != 60*time.Second {
		t.Errorf("RESOURCE_EXHAUSTED Delay(10) = %s, want 60s (twice the cap)", got)
	}
}

// Property 4: the delay is min(initial·2^n, max)·(1 ± jitter), and
// RESOURCE_EXHAUSTED waits at least twice as long.
func TestPropertyDelayWithinJitterBounds(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := DefaultPolicy()
		p.Jitter = rapid.Float64Range(0, 0.99).Draw(rt, "jitter")
		n := rapid.IntRange(0, 20).Draw(rt, "retry")
		u := rapid.Float64Range(0, 1).Filter(func(f float64) bool { return f < 1 }).Draw(rt, "u")
		code := codes.Code(rapid.Uint32Range(0, 16).Draw(rt, "code"))
		base := float64(min(p.Initial<<min(n, 30), p.Max))
		if code == codes.ResourceExhausted {
			base *= 2
		}
		d := float64(p.Delay(n, code, u))
		if lo, hi := base*(1-p.Jitter)-1, base*(1+p.Jitter)+1; d < lo || d > hi {
			rt.Fatalf("Delay(%d, %v, %v) = %v, want within [%v, %v]", n, code, u, time.Duration(d), time.Duration(lo), time.Duration(hi))
		}
		if code != codes.ResourceExhausted && p.Delay(n, codes.ResourceExhausted, u) < 2*p.Delay(n, code, u) {
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
	calls := 0
	var waits []time.Duration
	st, err := Do(context.Background(), fast(), func(context.Context) error {
		calls++
		if calls < 3 {
			return status.Error(codes.Unavailable, "try again")
		}
		return nil
	}, WithNotify(func(_ error, d time.Duration) { waits = append(waits, d) }), WithRand(func() float64 { return 0.5 }))
	if err != nil || st.Attempts != 3 || st.Retries != 2 || st.LastCode != codes.OK {
		t.Fatalf("Do = %+v, %v", st, err)
	}
	if len(waits) != 2 || waits[0] != time.Millisecond || waits[1] != 2*time.Millisecond {
		t.Errorf("waits = %v, want [1ms 2ms]", waits)
	}
}

// Property 5: a retryable failure is retried exactly maxRetries times.
func TestDoStopsAfterMaxRetries(t *testing.T) {
	for _, max := range []int{0, 1, 3, 5} {
		p := fast()
		p.MaxRetries = max
		calls := 0
		st, err := Do(context.Background(), p, func(context.Context) error {
			calls++
			return status.Error(codes.DeadlineExceeded, "slow")
		})
		if calls != max+1 || st.Attempts != max+1 || st.Retries != max {
			t.Errorf("maxRetries %d: %d calls, %+v", max, calls, st)
		}
		if status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("err %v lost its code", err)
		}
	}
}

func TestDoPermanentIsNotRetried(t *testing.T) {
	sentinel := errors.New("fenced")
	for _, e := range []error{status.Error(codes.PermissionDenied, "no"), Permanent(fmt.Errorf("x: %w", sentinel)),
		Permanent(status.Error(codes.Unavailable, "marked"))} {
		calls := 0
		st, err := Do(context.Background(), fast(), func(context.Context) error { calls++; return e })
		if calls != 1 || st.Retries != 0 {
			t.Errorf("%v: %d calls", e, calls)
		}
		var pe *permanentError
		if errors.As(err, &pe) {
			t.Errorf("%v: the Permanent marker leaked", err)
		}
	}
	_, err := Do(context.Background(), fast(), func(context.Context) error { return Permanent(fmt.Errorf("x: %w", sentinel)) })
	if !errors.Is(err, sentinel) {
		t.Errorf("errors.Is lost through Do: %v", err)
	}
}

func TestDoAttemptTimeoutIsRetryable(t *testing.T) {
	p := fast()
	p.AttemptTimeout = 20 * time.Millisecond
	p.MaxRetries = 2
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
	})
	if err != nil || st.Attempts != 3 {
		t.Errorf("Do = %+v, %v; want success on the third attempt", st, err)
	}
}

func TestDoTotalTimeout(t *testing.T) {
	p := fast()
	p.Initial, p.Max = 50*time.Millisecond, 50*time.Millisecond
	p.MaxRetries = 100
	p.TotalTimeout = 120 * time.Millisecond
	start := time.Now()
	st, err := Do(context.Background(), p, func(context.Context) error { return status.Error(codes.Unavailable, "down") })
	if time.Since(start) > time.Second || st.Attempts > 4 {
		t.Errorf("total timeout not applied: %+v after %s", st, time.Since(start))
	}
	if !errors.Is(err, context.DeadlineExceeded) || status.Code(err) != codes.Unavailable {
		t.Errorf("err = %v; want the timeout and the last error", err)
	}
}

func TestDoCancelStopsWaiting(t *testing.T) {
	p := fast()
	p.Initial, p.Max = time.Hour, time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	_, err := Do(ctx, p, func(context.Context) error { return status.Error(codes.Aborted, "contention") })
	if time.Since(start) > time.Second || !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v after %s", err, time.Since(start))
	}
}

func TestValidate(t *testing.T) {
	for name, edit := range map[string]func(*Policy){
		"zero initial":    func(p *Policy) { p.Initial = 0 },
		"max < initial":   func(p *Policy) { p.Max = p.Initial / 2 },
		"multiplier":      func(p *Policy) { p.Multiplier = 0.5 },
		"jitter":          func(p *Policy) { p.Jitter = 1 },
		"retries":         func(p *Policy) { p.MaxRetries = -1 },
		"attempt":         func(p *Policy) { p.AttemptTimeout = -1 },
		"total":           func(p *Policy) { p.TotalTimeout = -1 },
		"negative jitter": func(p *Policy) { p.Jitter = -0.1 },
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
