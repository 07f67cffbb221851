// Package retry runs an operation again after transient failures, with
// jittered exponential backoff, a timeout per attempt and one for all
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
	"github.com/snapwriter/snapwriter/retry/policy"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Policy is the retry policy (see package policy for its fields): the one
// locking.Acquire uses too, with the same meaning for every zero value.
// MaxRetries 0 makes no retries and Unlimited lifts the cap; TotalTimeout
// 0 and AttemptTimeout 0 set no bound; ContentionWait 0 gives ABORTED no
// extra retries.
type Policy = policy.Policy

// Unlimited, as Policy.MaxRetries, lifts the cap on retries: Do then
// retries until TotalTimeout passes, ctx ends, or a failure is permanent.
const Unlimited = policy.Unlimited

// DefaultPolicy is the policy for Firestore commits: waits from 1 s up to
// 30 s, doubling, ±20% jitter, 3 retries, 30 s per attempt, 300 s in all.
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

// Delay is the wait Do makes before retry number n (0 is the wait after
// the first failed attempt) after a failure with code, for a uniform u in
// [0, 1): p.Delay(n, u), that is min(Max, Initial·Multiplier^n) scaled by
// 1 + Jitter·(2u−1). RESOURCE_EXHAUSTED means the server is shedding load,
// so its wait is exactly twice the other codes' at the same n and u (its
// cap is 2·Max). Delay is pure; a negative n counts as 0 and u is clamped
// to [0, 1].
func Delay(p Policy, n int, code codes.Code, u float64) time.Duration {
	d := p.Delay(n, u)
	if code == codes.ResourceExhausted {
		// Doubled as a Duration, not as a float, so "at least twice the
		// other delay" holds to the nanosecond.
		if d > math.MaxInt64/2 {
			return math.MaxInt64
		}
		d *= 2
	}
	return d
}

// Classify reports whether err is worth retrying, and its gRPC code.
// An error marked Transient is retryable whatever its code.
//
// The code is that of a gRPC status anywhere in err's chain, else
// DeadlineExceeded or Canceled for a context error in the chain, else
// Unknown; nil is (false, OK). DEADLINE_EXCEEDED, UNAVAILABLE, INTERNAL,
// ABORTED and RESOURCE_EXHAUSTED are retryable, and so is a bare
// context.DeadlineExceeded, since that is what an attempt that hit its own
// AttemptTimeout returns (Do tells it apart from the caller's deadline by
// checking its own context). Everything else is permanent, context.Canceled
// included, as is any error marked Permanent, whatever its code.
func Classify(err error) (retryable bool, code codes.Code) {
	if err == nil {
		return false, codes.OK
	}
	code = codeOf(err)
	var p *backoff.PermanentError
	if errors.As(err, &p) {
		return false, code
	}
	var t *transientError
	if errors.As(err, &t) {
		return true, code
	}
	switch code {
	case codes.DeadlineExceeded, codes.Unavailable, codes.Internal, codes.Aborted, codes.ResourceExhausted:
		return true, code
	}
	return false, code
}

func codeOf(err error) codes.Code {
	// status.FromError looks through wrapping (errors.As on GRPCStatus).
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return status.FromContextError(err).Code()
}

// Permanent marks err as not worth retrying, whatever its code; errors.Is
// and errors.As (and so status.Code) still see err. Do returns err itself,
// without the marker. Permanent(nil) is nil.
//
// The marker is cenkalti/backoff's, so an op that returns backoff.Permanent
// is treated the same way.
func Permanent(err error) error { return backoff.Permanent(err) }

// Transient marks err as worth retrying, whatever its code: for example a
// commit whose outcome is unknown (the connection broke, or the client's
// own retry found the transaction closed) and that is safe to repeat.
// errors.Is and errors.As (and so status.Code) still see err; Permanent
// wins over Transient. Transient(nil) is nil.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err}
}

type transientError struct{ err error }

func (t *transientError) Error() string { return t.err.Error() }
func (t *transientError) Unwrap() error { return t.err }

// unmark drops Permanent markers from the top of err, so callers get back
// the error their op returned.
func unmark(err error) error {
	for {
		p, ok := err.(*backoff.PermanentError)
		if !ok {
			return err
		}
		err = p.Err
	}
}

// Stats describes a Do call.
type Stats struct {
	Attempts int           // calls of op
	Retries  int           // calls of op after the first
	LastCode codes.Code    // code of the last attempt's error, OK on success
	Elapsed  time.Duration // wall time of the whole call, waits included
}

// Option configures Do.
type Option func(*doConfig)

type doConfig struct {
	notify func(err error, wait time.Duration)
	gate   func(ctx context.Context) error
	rand   func() float64
}

// WithNotify calls fn before each wait with the error that caused it and
// the wait; it runs on Do's goroutine.
func WithNotify(fn func(err error, wait time.Duration)) Option {
	return func(c *doConfig) { c.notify = fn }
}

// WithGate makes every attempt wait for gate first: gate runs before each
// call of op, under Do's context and TotalTimeout but outside the
// attempt's AttemptTimeout, so that a wait for a rate limiter's budget
// (pacing.Budget.Wait) is not taken for a slow answer. An error from gate
// ends Do: the attempt is not made, and Do returns the error.
func WithGate(gate func(ctx context.Context) error) Option {
	return func(c *doConfig) { c.gate = gate }
}

// withRand sets the source of jitter, uniform in [0, 1) (default
// math/rand/v2's Float64), so tests can pin the waits.
func withRand(fn func() float64) Option { return func(c *doConfig) { c.rand = fn } }

// Do runs op until it succeeds, fails permanently (see Classify), uses up
// p.MaxRetries (none for 0, no cap for Unlimited), runs out of
// p.TotalTimeout (if not 0), or ctx ends. Each attempt gets a ctx bounded
// by p.AttemptTimeout (if not 0); between attempts Do waits
// Delay(p, retry, code of the failure, jitter), and stops waiting as soon
// as ctx ends. op is not called once ctx has ended. ABORTED failures are
// retried past MaxRetries for p.ContentionWait (see Policy), and
// RESOURCE_EXHAUSTED ones until p.TotalTimeout, when it is set, each wait
// as long as the last counted retry's: a store that asks for less traffic
// is not failing, and a push-back that ends within the total timeout costs
// time, not the operation.
//
// On failure the error says how many attempts were made and wraps op's last
// error, without the Permanent marker: errors.Is, errors.As and status.Code
// see through it. When ctx or the total timeout ended the run, the error
// also wraps context.Cause of that context. An invalid policy is returned
// as an error without calling op.
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
	attemptCause := fmt.Errorf("retry: attempt timeout %s passed: %w", p.AttemptTimeout, context.DeadlineExceeded)

	var last, gateErr error
	succeeded := false
	attempt := func() error {
		if runCtx.Err() != nil {
			// The timer and ctx can fire together; never start an
			// attempt on a context that has already ended.
			return backoff.Permanent(context.Cause(runCtx))
		}
		if cfg.gate != nil {
			if err := cfg.gate(runCtx); err != nil {
				if runCtx.Err() != nil {
					err = context.Cause(runCtx)
				}
				gateErr = err
				return backoff.Permanent(err)
			}
		}
		st.Attempts++
		actx, acancel := runCtx, context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, acancel = context.WithTimeoutCause(runCtx, p.AttemptTimeout, attemptCause)
		}
		err := op(actx)
		acancel()
		last = err
		retryable, code := Classify(err)
		st.LastCode = code
		switch {
		case err == nil:
			succeeded = true
			return nil
		case !retryable || runCtx.Err() != nil:
			// A deadline the attempt shares with runCtx is not the
			// attempt's own timeout: the run is over, not retryable.
			return backoff.Permanent(err)
		}
		return err
	}
	b := backoff.WithContext(&policyBackOff{p: p, rand: cfg.rand, start: start,
		code: func() codes.Code { return st.LastCode }}, runCtx)
	err := backoff.RetryNotify(attempt, b, cfg.notify)
	st.Retries = max(st.Attempts-1, 0)
	st.Elapsed = time.Since(start)
	if err == nil && succeeded {
		return st, nil
	}
	switch {
	case gateErr != nil && last == nil:
		return st, fmt.Errorf("not attempted: %w", gateErr)
	case gateErr != nil && runCtx.Err() == nil:
		return st, fmt.Errorf("after %s: %w; then: %w", attempts(st.Attempts), unmark(last), gateErr)
	}
	if runCtx.Err() != nil {
		cause := context.Cause(runCtx)
		switch {
		case last == nil:
			return st, fmt.Errorf("not attempted: %w", cause)
		case errors.Is(last, cause):
			return st, fmt.Errorf("after %s: %w", attempts(st.Attempts), unmark(last))
		}
		return st, fmt.Errorf("after %s: %w (stopped: %w)", attempts(st.Attempts), unmark(last), cause)
	}
	return st, fmt.Errorf("after %s: %w", attempts(st.Attempts), unmark(last))
}

func attempts(n int) string {
	if n == 1 {
		return "1 attempt"
	}
	return fmt.Sprintf("%d attempts", n)
}

// policyBackOff adapts a Policy to backoff.BackOff. The library has no
// notion of a per-error wait or budget, so the code of the failure being
// retried is read through code (Do's loop is single-goroutine, so no
// locking), and MaxRetries, ContentionWait and the push-back's retries are
// counted here.
type policyBackOff struct {
	p       Policy
	rand    func() float64
	code    func() codes.Code
	start   time.Time
	retries int
}

func (b *policyBackOff) Reset() { b.retries = 0 }

func (b *policyBackOff) NextBackOff() time.Duration {
	code := b.code()
	n := b.retries
	if b.p.MaxRetries != Unlimited && n >= b.p.MaxRetries {
		if code == codes.ResourceExhausted && b.p.TotalTimeout > 0 {
			// Push-back: retried until the total timeout (the
			// context's) ends it, no wait longer than the last.
			b.retries++
			return Delay(b.p, max(b.p.MaxRetries-1, 0), code, b.rand())
		}
		left := b.p.ContentionWait - time.Since(b.start)
		if code != codes.Aborted || left <= 0 {
			return backoff.Stop
		}
		// Past MaxRetries only contention is retried, with short waits:
		// the lock may be freed any moment, and the budget is time.
		n = min(n, 2)
		b.retries++
		return min(Delay(b.p, n, code, b.rand()), left)
	}
	b.retries++
	return Delay(b.p, n, code, b.rand())
}
