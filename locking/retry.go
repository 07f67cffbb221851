package locking

import (
	"fmt"
	"math"
	"time"
)

// BackoffKind is how the wait between acquire attempts grows.
type BackoffKind int

// Backoff kinds.
const (
	Exponential BackoffKind = iota // RetryDelay·2^(attempt−1)
	Fixed                          // RetryDelay
)

// JitterKind is how a wait is randomised, so that waiters spread out.
type JitterKind int

// Jitter kinds.
const (
	EqualJitter JitterKind = iota // half the wait fixed, half uniformly random
	FullJitter                    // uniformly random in [0, wait)
	NoJitter                      // exactly the wait
)

// RetryPolicy says how Acquire waits for a held lock, with the lock
// interface spec's lock() formulas.
type RetryPolicy struct {
	MaxRetries int           // attempts after the first; 0 makes a single attempt
	RetryDelay time.Duration // base delay
	Backoff    BackoffKind
	Jitter     JitterKind
	// Timeout is the hard wall for the whole wait: no sleep extends past
	// it. An attempt already in flight is not cut short.
	Timeout time.Duration
}

// DefaultRetryPolicy is the spec's LOCK_DEFAULTS: 10 retries from 100 ms,
// exponential with equal jitter, 5 s in all.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 10, RetryDelay: 100 * time.Millisecond, Backoff: Exponential, Jitter: EqualJitter, Timeout: 5 * time.Second}
}

// Validate fails with InvalidArgument for a policy that cannot work.
func (p RetryPolicy) Validate() error {
	if p.MaxRetries < 0 || p.RetryDelay < 0 || p.Timeout < 0 {
		return &Error{Code: InvalidArgument, Op: "acquire", Err: fmt.Errorf("retry policy %+v has a negative field", p)}
	}
	if p.Backoff != Exponential && p.Backoff != Fixed || p.Jitter < EqualJitter || p.Jitter > NoJitter {
		return &Error{Code: InvalidArgument, Op: "acquire", Err: fmt.Errorf("retry policy %+v has an unknown backoff or jitter", p)}
	}
	return nil
}

// Delay is the spec's wait after failed attempt number attempt (1-based;
// smaller counts as 1) for a uniform random u in [0, 1), before Acquire
// clamps it to the time left:
//
//	base = RetryDelay·2^(attempt−1)  (Exponential)  or  RetryDelay  (Fixed)
//	EqualJitter: base/2 + u·base/2   FullJitter: u·base   NoJitter: base
//
// It is pure, so tests can check the formulas exactly.
func (p RetryPolicy) Delay(attempt int, u float64) time.Duration {
	base := float64(p.RetryDelay)
	if p.Backoff == Exponential {
		base *= math.Pow(2, float64(max(attempt, 1)-1))
	}
	// A huge attempt number must saturate, not overflow a Duration; the
	// timeout clamps the wait long before this matters.
	base = math.Min(base, float64(math.MaxInt64/2))
	switch p.Jitter {
	case EqualJitter:
		base = base/2 + u*(base/2)
	case FullJitter:
		base = u * base
	}
	return time.Duration(base)
}
