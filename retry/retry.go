// Package retry runs an operation again after transient failures, with the
// spec's jittered exponential backoff, a timeout per attempt and one for all
// attempts. Policies are plain values; the loop is cenkalti/backoff's.
package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy says how often and how patiently to retry.
type Policy struct {
	// Initial and Max bound the backoff before jitter: retry n waits
	// min(Max, Initial·Multiplier^n).
	Initial, Max time.Duration
	// Multiplier is the backoff's growth per retry.
	Multiplier float64
	// Jitter spreads each wait uniformly over ±Jitter of itself, so writers
	// that failed together do not retry together.
	Jitter float64
	// MaxRetries is the number of retries after the first attempt.
	MaxRetries int
	// AttemptTimeout bounds each attempt; 0 means no bound.
	AttemptTimeout time.Duration
	// TotalTimeout bounds all attempts and waits together; 0 means no bound.
	TotalTimeout time.Duration
}

// DefaultPolicy is the spec's: 1 s → 30 s, ×2, ±20%, 3 retries, 30 s per
// attempt, 300 s in all.
func DefaultPolicy() Policy {
	return Policy{
		Initial:        time.Second,
		Max:            30 * time.Second,
		Multiplier:     2,
		Jitter:         0.2,
		MaxRetries:     3,
		AttemptTimeout: 30 * time.Second,
		TotalTimeout:   300 * time.Second,
	}
}

// Validate reports a policy that cannot work.
func (p Policy) Validate() error {
	switch {
	case p.Initial <= 0:
		return fmt.Errorf("retry: initial backoff %s must be positive", p.Initial)
	case p.Max < p.Initial:
		return fmt.Errorf("retry: max backoff %s is below the initial %s", p.Max, p.Initial)
	case p.Multiplier < 1 || math.IsNaN(p.Multiplier) || math.IsInf(p.Multiplier, 0):
		return fmt.Errorf("retry: multiplier %v must be a finite number ≥ 1", p.Multiplier)
	case p.Jitter < 0 || p.Jitter >= 1 || math.IsNaN(p.Jitter):
		return fmt.Errorf("retry: jitter %v must be in [0, 1)", p.Jitter)
	case p.MaxRetries < 0:
		return fmt.Errorf("retry: max retries %d is negative", p.MaxRetries)
	case p.AttemptTimeout < 0:
		return fmt.Errorf("retry: attempt timeout %s is negative", p.AttemptTimeout)
	case p.TotalTimeout < 0:
		return fmt.Errorf("retry: total timeout %s is negative", p.TotalTimeout)
	}
	return nil
}

// Delay is the wait before retry number n (0 is the first retry) after a
// failure with code, for a uniform u in [0, 1): min(Max, Initial·M^n) scaled
// by 1 + Jitter·(2u−1). RESOURCE_EXHAUSTED means the server is shedding
// load, so its base (and cap) is doubled.
func (p Policy) Delay(n int, code codes.Code, u float64) time.Duration {
	base := float64(p.Initial) * math.Pow(p.Multiplier, float64(max(n, 0)))
	limit := float64(p.Max)
	if code == codes.ResourceExhausted {
		base, limit = 2*base, 2*limit
	}
	base = math.Min(base, limit)
	return time.Duration(base * (1 + p.Jitter*(2*u-1)))
}

// Classify reports whether err is worth retrying, and its gRPC code.
// DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL, ABORTED and RESOURCE_EXHAUSTED
// are, as is context.DeadlineExceeded (an attempt that hit its own
// timeout); everything else is permanent, as is any error marked Permanent.
func Classify(err error) (retryable bool, code codes.Code) {
	if err == nil {
		return false, codes.OK
	}
	code = codeOf(err)
	var p *permanentError
	if errors.As(err, &p) {
		return false, code
	}
	switch code {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Internal, codes.Aborted, codes.ResourceExhausted:
		return true, code
	}
	return false, code
}

func codeOf(err error) codes.Code {
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return codes.DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return codes.Canceled
	}
	return codes.Unknown
}

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent marks err as not worth retrying, whatever its code; errors.Is
// and errors.As still see err. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// Stats describes a Do call.
type Stats struct {
	Attempts int           // attempts made
	Retries  int           // attempts after the first
	LastCode codes.Code    // code of the last attempt's error, OK on success
	Elapsed  time.Duration // from the first attempt to the end
}

// Option configures Do.
type Option func(*doConfig)

type doConfig struct {
	notify func(err error, wait time.Duration)
	rand   func() float64
	timer  backoff.Timer
}

// WithNotify calls fn before each wait with the error that caused it.
func WithNotify(fn func(err error, wait time.Duration)) Option {
	return func(c *doConfig) { c.notify = fn }
}

// WithRand sets the source of jitter (uniform in [0, 1)); for tests.
func WithRand(fn func() float64) Option { return func(c *doConfig) { c.rand = fn } }

// WithTimer sets the timer that waits between attempts; for tests.
func WithTimer(t backoff.Timer) Option { return func(c *doConfig) { c.timer = t } }

// Do runs op until it succeeds, fails permanently, uses up the retries or
// the total timeout, or ctx ends. Each attempt gets its own AttemptTimeout.
// The error returned wraps the last attempt's error (errors.Is, errors.As
// and status.Code see through it) and, when ctx or the total timeout ended
// the run, the context's error too.
func Do(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) (Stats, error) {
	cfg := doConfig{rand: rand.Float64}
	for _, o := range opts {
		o(&cfg)
	}
	start := time.Now()
	var st Stats
	if err := p.Validate(); err != nil {
		return st, err
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if p.TotalTimeout > 0 {
		runCtx, cancel = context.WithTimeoutCause(ctx, p.TotalTimeout,
			fmt.Errorf("retry: total timeout %s passed: %w", p.TotalTimeout, context.DeadlineExceeded))
	}
	defer cancel()

	var last error
	b := &policyBackOff{p: p, rand: cfg.rand, code: func() codes.Code { return st.LastCode }}
	attempt := func() error {
		st.Attempts++
		actx, acancel := runCtx, context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, acancel = context.WithTimeout(runCtx, p.AttemptTimeout)
		}
		err := op(actx)
		acancel()
		last = err
		retryable, code := Classify(err)
		st.LastCode = code
		if err == nil || retryable {
			return err
		}
		return backoff.Permanent(err)
	}
	notify := func(err error, wait time.Duration) {
		st.Retries++
		if cfg.notify != nil {
			cfg.notify(err, wait)
		}
	}
	err := backoff.RetryNotifyWithTimer(attempt, backoff.WithContext(b, runCtx), notify, cfg.timer)
	st.Elapsed = time.Since(start)
	if err == nil {
		return st, nil
	}
	last = unmark(last)
	if runCtx.Err() != nil && (last == nil || !errors.Is(last, runCtx.Err())) {
		cause := context.Cause(runCtx)
		if last == nil {
			return st, cause
		}
		return st, fmt.Errorf("after %d attempts: %w (last error: %w)", st.Attempts, cause, last)
	}
	return st, fmt.Errorf("after %d attempts: %w", st.Attempts, last)
}

// unmark drops the Permanent marker so callers get the error they returned.
func unmark(err error) error {
	var p *permanentError
	if errors.As(err, &p) && err == error(p) {
		return p.err
	}
	return err
}

// policyBackOff adapts a Policy to backoff.BackOff: the wait depends on the
// retry count and on the code of the failure being retried.
type policyBackOff struct {
	p       Policy
	rand    func() float64
	code    func() codes.Code
	retries int
}

func (b *policyBackOff) Reset() { b.retries = 0 }

func (b *policyBackOff) NextBackOff() time.Duration {
	if b.retries >= b.p.MaxRetries {
		return backoff.Stop
	}
	d := b.p.Delay(b.retries, b.code(), b.rand())
	b.retries++
	return d
}
