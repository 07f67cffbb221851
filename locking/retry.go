package locking

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cenkalti/backoff/v4"
)

// RetryPolicy says how Acquire waits for a lock that is held, or whose
// backend fails transiently: jittered exponential backoff, in
// cenkalti/backoff's terms, bounded by a total Timeout and optionally by a
// number of retries.
//
// Retry n (from 0) waits, before jitter, min(Max, Initial·Multiplierⁿ),
// spread uniformly over ±Jitter of itself. No wait extends past Timeout:
// the last one is cut to the time left, so the last attempt starts at the
// Timeout; an attempt in flight then is not cut short.
//
// Timeout 0 makes a single attempt, whatever the other fields say, so the
// zero RetryPolicy means "try once, do not wait".
type RetryPolicy struct {
	// Initial and Max bound the wait before jitter: Initial for the first
	// retry, growing by Multiplier each retry up to Max.
	Initial, Max time.Duration
	// Multiplier is the growth per retry (at least 1).
	Multiplier float64
	// Jitter spreads each wait over ±Jitter of itself (in [0, 1]), so
	// that waiters who collided do not collide again.
	Jitter float64
	// MaxRetries caps the attempts after the first; 0 means no cap: only
	// Timeout ends the wait.
	MaxRetries int
	// Timeout bounds the whole wait, from the first attempt.
	Timeout time.Duration
}

// DefaultRetryPolicy is the default of SyncGuard's lock() helper, so Go
// and TypeScript waiters behave alike: waits uniform in [b/2, b] for
// b = 100 ms·2ⁿ⁻¹ before retry n (from 1), at most 10 retries, 5 s in all. In backoff terms that is Initial 75 ms with
// Jitter 1/3 (75 ± 25 ms) and Multiplier 2; Max is backoff's own default,
// 1 min, which the 5 s never reach.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Initial: 75 * time.Millisecond, Max: time.Minute, Multiplier: 2, Jitter: 1.0 / 3,
		MaxRetries: 10, Timeout: 5 * time.Second}
}

// Validate fails with InvalidArgument, naming the field, for a policy that
// cannot work. With Timeout 0 only negative values are refused: the other
// fields are never used.
func (p RetryPolicy) Validate() error {
	bad := func(format string, args ...any) error {
		return &Error{Code: InvalidArgument, Op: "acquire", Err: fmt.Errorf("retry policy: "+format, args...)}
	}
	switch {
	case p.Initial < 0, p.Max < 0, p.Timeout < 0:
		return bad("durations must not be negative (initial %s, max %s, timeout %s)", p.Initial, p.Max, p.Timeout)
	case p.MaxRetries < 0:
		return bad("max retries %d is negative", p.MaxRetries)
	case p.Timeout == 0:
		return nil
	case p.Initial == 0:
		// A zero wait would hammer a backend that is already failing or
		// contended.
		return bad("initial wait must be positive")
	case p.Max < p.Initial:
		return bad("max wait %s is below the initial %s", p.Max, p.Initial)
	case !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0):
		return bad("multiplier %v must be a finite number ≥ 1", p.Multiplier)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return bad("jitter %v must be in [0, 1]", p.Jitter)
	}
	return nil
}

// backOff is p as a backoff.BackOff, ready for backoff.RetryNotify: an
// ExponentialBackOff with MaxElapsedTime Timeout, capped by WithMaxRetries
// and bounded by the timeout clamp (timeoutBackOff).
func (p RetryPolicy) backOff() backoff.BackOff {
	exp := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: p.Jitter,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.Max,
		MaxElapsedTime:      p.Timeout,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	var b backoff.BackOff = &timeoutBackOff{exp: exp, timeout: p.Timeout}
	if p.MaxRetries > 0 {
		b = backoff.WithMaxRetries(b, uint64(p.MaxRetries))
	}
	return b
}

// timeoutBackOff ends the waits at the timeout the lock contract's way.
// ExponentialBackOff stops as soon as its next wait would pass
// MaxElapsedTime, giving up as much as a whole wait early; the contract
// instead waits out the time left and makes one last attempt at the
// timeout. So a Stop with time left becomes a wait of that time, and only
// a timeout already reached stops.
type timeoutBackOff struct {
	exp     *backoff.ExponentialBackOff
	timeout time.Duration
}

func (t *timeoutBackOff) Reset() { t.exp.Reset() }

func (t *timeoutBackOff) NextBackOff() time.Duration {
	left := t.timeout - t.exp.GetElapsedTime()
	if left <= 0 {
		return backoff.Stop
	}
	if next := t.exp.NextBackOff(); next != backoff.Stop {
		return min(next, left)
	}
	return left
}

// retryable reports whether an Acquire that failed with err may succeed if
// tried again: the storage was unavailable, throttled or slow. Every other
// failure is the caller's or the configuration's, and retrying cannot help.
func retryable(err error) bool {
	return errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrNetworkTimeout)
}
