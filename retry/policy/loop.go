package policy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// Failure says how a failed attempt counts against a Policy's budget. An
// attempt that must not be retried at all returns backoff.Permanent
// instead.
type Failure int

const (
	// Retryable counts against MaxRetries and TotalTimeout, and waits
	// Policy.Delay.
	Retryable Failure = iota
	// Contended is a failure caused by contention (another transaction
	// holds, or died holding, what the attempt needs): it is retried past
	// MaxRetries, and past a TotalTimeout that does not cancel, for
	// ContentionWait (see ContentionInAttempts for from when).
	Contended
	// PushBack is the store asking for less traffic: it is not failing,
	// so with a TotalTimeout it is retried past MaxRetries until that
	// timeout, each wait as long as the last counted retry's; and every
	// wait after it is twice Policy.Delay.
	PushBack
)

// DelayAfter is the wait before retry n (from 0) after a failure f, for a
// uniform u in [0, 1): p.Delay(n, u), doubled for PushBack (saturating,
// never overflowing). It is pure.
func (p Policy) DelayAfter(f Failure, n int, u float64) time.Duration {
	d := p.Delay(n, u)
	if f == PushBack {
		// Doubled as a Duration, not as a float, so "at least twice the
		// other delay" holds to the nanosecond.
		if d > math.MaxInt64/2 {
			return math.MaxInt64
		}
		d *= 2
	}
	return d
}

// Option configures Retry.
type Option func(*config)

type config struct {
	classify           func(error) Failure
	notify             func(err error, wait time.Duration)
	gate               func(ctx context.Context) error
	rand               func() float64
	cancelAtTimeout    bool
	contentionAttempts bool
}

// WithClassify sets how a retryable failure counts (default: every one is
// Retryable). fn sees the error op returned; it is not called for a
// Permanent one.
func WithClassify(fn func(err error) Failure) Option {
	return func(c *config) { c.classify = fn }
}

// WithNotify calls fn before each wait with the error that caused it and
// the wait; it runs on Retry's goroutine.
func WithNotify(fn func(err error, wait time.Duration)) Option {
	return func(c *config) { c.notify = fn }
}

// WithGate makes every attempt wait for gate first: gate runs before each
// call of op, under Retry's context but outside the attempt's
// AttemptTimeout, so that a wait for a rate limiter's budget is not taken
// for a slow answer. An error from gate ends Retry: the attempt is not
// made.
func WithGate(gate func(ctx context.Context) error) Option {
	return func(c *config) { c.gate = gate }
}

// WithRand sets the source of jitter, uniform in [0, 1) (default
// math/rand/v2's Float64), so tests can pin the waits.
func WithRand(fn func() float64) Option {
	return func(c *config) { c.rand = fn }
}

// CancelAtTotalTimeout makes TotalTimeout end the run outright, as it
// does for operations whose result nobody waits for past it: an attempt
// still running then is cancelled and no attempt starts at it, and the
// waits are not cut short to end there (the context ends them). Both of
// Retry's timeouts then name themselves as their context's cause
// (context.Cause), since either may end an attempt and the caller's error
// should say which.
//
// Without it, TotalTimeout bounds the waits only, as the lock contract
// says: the last wait is cut to end at TotalTimeout, one last attempt
// starts there and is let finish, and contention may extend the waits
// past it.
func CancelAtTotalTimeout() Option {
	return func(c *config) { c.cancelAtTimeout = true }
}

// ContentionInAttempts says each attempt itself waits on a contended
// lock before failing as Contended (a Firestore transaction waits for the
// documents it reads): ContentionWait then counts from the first attempt,
// and the waits past MaxRetries stay short, at most Delay(2), since the
// attempts do the waiting.
//
// Without it, ContentionWait counts from the first of the Contended
// failures in a row, and any other outcome ends the extension: the store
// reports contention at once, and only contention that lasts is waited
// out.
func ContentionInAttempts() Option {
	return func(c *config) { c.contentionAttempts = true }
}

// Retry runs op until it succeeds, returns an error marked
// backoff.Permanent, uses up p's budget, or ctx ends, and returns how many
// times op was called.
//
// The budget is p's: MaxRetries retries (none for 0, no cap for
// Unlimited), within TotalTimeout (if not 0; see CancelAtTotalTimeout for
// how), extended for Contended and PushBack failures as Failure says. Each
// attempt gets a ctx bounded by p.AttemptTimeout (if not 0); between
// attempts Retry waits p.DelayAfter(the failure, retry number, jitter)
// and stops waiting as soon as ctx ends. The first attempt is made at
// once, as the caller decided (check ctx first not to make it on an ended
// one); no retry is made once ctx has ended, and a failure of an attempt
// during which ctx ended is not retried. The waits and stop rules are a
// backoff.BackOff; the loop is backoff.RetryNotify.
//
// On failure the error is op's last, without a Permanent marker on top,
// or the gate's when it refused before any attempt. When the gate refused
// after a failed attempt, it is "LAST; then: GATE". When ctx (or a
// TotalTimeout that cancels) ended the run, the error also wraps its cause
// (context.Cause): "LAST (stopped: CAUSE)", just the cause if no attempt
// failed, just op's error if that already wraps the cause. An invalid
// policy is returned as an error without calling op.
func Retry(ctx context.Context, p Policy, op func(ctx context.Context) error, opts ...Option) (attempts int, err error) {
	cfg := config{classify: func(error) Failure { return Retryable }, rand: rand.Float64}
	for _, o := range opts {
		o(&cfg)
	}
	if err := p.Validate(); err != nil {
		return 0, err
	}
	attemptCause := error(nil) // nil: the plain context.DeadlineExceeded
	if cfg.cancelAtTimeout {
		attemptCause = fmt.Errorf("retry: attempt timeout %s passed: %w", p.AttemptTimeout, context.DeadlineExceeded)
		if p.TotalTimeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, p.TotalTimeout,
				fmt.Errorf("retry: total timeout %s passed: %w", p.TotalTimeout, context.DeadlineExceeded))
			defer cancel()
		}
	}
	b := &budget{p: p, rand: cfg.rand, cancelAtTimeout: cfg.cancelAtTimeout, contentionAttempts: cfg.contentionAttempts}
	var last, gateErr error
	attempt := func() error {
		if attempts > 0 && ctx.Err() != nil {
			// The wait's timer and ctx can fire together; never retry on
			// a context that has already ended.
			return backoff.Permanent(context.Cause(ctx))
		}
		if cfg.gate != nil {
			if err := cfg.gate(ctx); err != nil {
				if ctx.Err() != nil {
					err = context.Cause(ctx)
				}
				gateErr = err
				return backoff.Permanent(err)
			}
		}
		attempts++
		actx, cancel := ctx, context.CancelFunc(func() {})
		if p.AttemptTimeout > 0 {
			actx, cancel = context.WithTimeoutCause(ctx, p.AttemptTimeout, attemptCause)
		}
		err := op(actx)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		var perm *backoff.PermanentError
		switch {
		case errors.As(err, &perm):
			return err
		case ctx.Err() != nil:
			// A deadline the attempt shares with ctx is not the attempt's
			// own timeout: the run is over.
			return backoff.Permanent(err)
		}
		b.failed(cfg.classify(err))
		return err
	}
	if err := backoff.RetryNotify(attempt, backoff.WithContext(b, ctx), cfg.notify); err == nil {
		return attempts, nil
	}
	last = unmark(last)
	switch {
	case gateErr != nil && last == nil:
		return attempts, gateErr
	case gateErr != nil && ctx.Err() == nil:
		return attempts, fmt.Errorf("%w; then: %w", last, gateErr)
	case ctx.Err() != nil:
		cause := context.Cause(ctx)
		switch {
		case last == nil:
			return attempts, cause
		case errors.Is(last, cause):
			return attempts, last
		}
		return attempts, fmt.Errorf("%w (stopped: %w)", last, cause)
	}
	return attempts, last
}

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

// budget is a Policy's waits and stop rules as a backoff.BackOff:
// NextBackOff returns the wait before the next retry, after the failure
// last recorded by failed, or backoff.Stop once the budget for that
// failure is spent. backoff.BackOff has no notion of the error being
// retried, so Retry's attempt records it (the loop runs on one goroutine,
// so no locking).
type budget struct {
	p                  Policy
	rand               func() float64
	cancelAtTimeout    bool // the context, not the waits, ends at TotalTimeout
	contentionAttempts bool // see ContentionInAttempts

	start          time.Time
	retries        int
	failure        Failure
	contendedSince time.Time // when the first of the Contended failures in a row was recorded
}

func (b *budget) Reset() {
	b.start, b.retries, b.failure, b.contendedSince = time.Now(), 0, Retryable, time.Time{}
}

// failed records the failure the next NextBackOff follows.
func (b *budget) failed(f Failure) {
	b.failure = f
	switch {
	case f != Contended:
		b.contendedSince = time.Time{}
	case b.contendedSince.IsZero():
		b.contendedSince = time.Now()
	}
}

func (b *budget) NextBackOff() time.Duration {
	p, n := b.p, b.retries
	// total is the time TotalTimeout leaves for waiting; unbounded when
	// it is 0, or when the context enforces it.
	total := time.Duration(math.MaxInt64)
	if p.TotalTimeout > 0 && !b.cancelAtTimeout {
		total = p.TotalTimeout - time.Since(b.start)
	}
	counted := p.MaxRetries == Unlimited || n < p.MaxRetries
	left := total
	if !counted {
		left = min(left, 0)
	}
	switch b.failure {
	case PushBack:
		if !counted && p.TotalTimeout > 0 {
			left, n = total, max(p.MaxRetries-1, 0)
		}
	case Contended:
		since := b.contendedSince
		if b.contentionAttempts {
			since = b.start
			if !counted {
				n = min(n, 2)
			}
		}
		left = max(left, p.ContentionWait-time.Since(since))
	}
	if left <= 0 {
		return backoff.Stop
	}
	b.retries++
	return min(p.DelayAfter(b.failure, n, b.rand()), left)
}
