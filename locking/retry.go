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

// JitterKind is how a wait is randomised.
type JitterKind int

// Jitter kinds.
const (
	EqualJitter JitterKind = iota // half fixed, half random
	FullJitter                    // uniformly random up to the wait
	NoJitter                      // exactly the wait
)

// RetryPolicy says how Acquire waits for a held lock, with the lock
// interface spec's formulas.
type RetryPolicy struct {
	MaxRetries int           // retries after the first attempt; 0 tries once
	RetryDelay time.Duration // base delay
	Backoff    BackoffKind
	Jitter     JitterKind
	Timeout    time.Duration // hard wall for the whole acquisition
}

// DefaultRetryPolicy is the spec's: 10 retries from 100 ms, exponential,
// equal jitter, 5 s in all.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{MaxRetries: 10, RetryDelay: 100 * time.Millisecond, Backoff: Exponential, Jitter: EqualJitter, Timeout: 5 * time.Second}
}

// Validate reports a policy that cannot work.
func (p RetryPolicy) Validate() error {
	if p.MaxRetries < 0 || p.RetryDelay < 0 || p.Timeout < 0 {
		return &Error{Code: InvalidArgument, Op: "acquire", Err: fmt.Errorf("retry policy %+v has a negative field", p)}
	}
	if p.Backoff != Exponential && p.Backoff != Fixed || p.Jitter < EqualJitter || p.Jitter > NoJitter {
		return &Error{Code: InvalidArgument, Op: "acquire", Err: fmt.Errorf("retry policy %+v has an unknown backoff or jitter", p)}
	}
	return nil
}

// Delay is the wait after failed attempt number attempt (1-based) for a
// uniform u in [0, 1), before clamping to the remaining timeout.
func (p RetryPolicy) Delay(attempt int, u float64) time.Duration {
	base := float64(p.RetryDelay)
	if p.Backoff == Exponential {
		base *= math.Pow(2, float64(max(attempt, 1)-1))
	}
	// No wait is ever longer than the timeout wall (nor than a Duration).
	base = math.Min(base, float64(math.MaxInt64/2))
	switch p.Jitter {
	case EqualJitter:
		base = base/2 + u*(base/2)
	case FullJitter:
		base = u * base
	}
	return time.Duration(base)
}
