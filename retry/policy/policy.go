// Package policy holds Policy, snapwriter's one retry policy: how often,
// and how patiently, to try an operation again; and Retry, the one loop
// that tries again under it. retry.Do runs Firestore operations on it (as
// retry.Policy), locking.Acquire waits for a lock on it (as
// locking.RetryPolicy), and a lock's lease retries a renewal on it. It
// builds on cenkalti/backoff and imports no gRPC, so the lock library
// shares it without taking on gRPC.
package policy

import (
	"fmt"
	"math"
	"time"
)

// Unlimited, as MaxRetries, lifts the cap on retries: only TotalTimeout,
// the caller's context, or a failure not worth retrying ends them.
const Unlimited = -1

// Policy says how often and how patiently to retry.
//
// A zero field never means "unbounded": MaxRetries 0 makes no retries
// (Unlimited lifts the cap), TotalTimeout 0 and AttemptTimeout 0 set no
// time bound, and ContentionWait 0 gives contention no extra retries. So
// the zero Policy makes one attempt and never waits.
//
// Retry n (from 0) waits min(Max, Initial·Multiplierⁿ), spread uniformly
// over ±Jitter of itself (see Delay). A policy that cannot retry (MaxRetries
// 0 and ContentionWait 0) never waits, so its Initial, Max, Multiplier and
// Jitter are not used and may be left zero.
type Policy struct {
	// Initial and Max bound the wait before jitter: Initial before the
	// first retry, growing by Multiplier each retry up to Max.
	Initial, Max time.Duration
	// Multiplier is the wait's growth per retry, a finite number ≥ 1.
	Multiplier float64
	// Jitter, in [0, 1], spreads each wait uniformly over ±Jitter of
	// itself, so that callers who failed together do not retry together.
	Jitter float64
	// MaxRetries is the number of retries after the first attempt: 0 for
	// none, Unlimited for no cap. No other negative number is valid.
	MaxRetries int
	// AttemptTimeout bounds each attempt; 0 sets no bound (the caller's
	// context still does).
	AttemptTimeout time.Duration
	// TotalTimeout bounds all attempts and waits together, from the
	// first attempt; 0 sets no bound. No wait goes past it. retry.Do ends
	// there, cancelling an attempt still running; locking.Acquire, as the
	// lock contract says, cuts its last wait to end there, makes one last
	// attempt then, and lets it finish. In retry.Do it is also how long
	// RESOURCE_EXHAUSTED (the store asking for less traffic) is retried
	// past MaxRetries: a push-back that ends within it costs time, not
	// the operation.
	TotalTimeout time.Duration
	// ContentionWait keeps retrying failures caused by contention (another
	// transaction holding, or having died holding, a document the attempt
	// needs: Firestore answers ABORTED) after MaxRetries — and, in
	// locking.Acquire, TotalTimeout — would have ended the retries, until
	// this much time has passed: a transaction whose client died keeps its
	// documents until the store expires it, 60 s on Firestore. 0 gives
	// contention no extra retries: it counts like any other failure.
	//
	// retry.Do counts it from the first attempt, within TotalTimeout, with
	// the extra waits kept short (at most 4·Initial before jitter), since
	// each attempt itself waits on the lock. locking.Acquire counts it from
	// the first of the contended attempts in a row (ErrContended); an
	// attempt that finds the lock merely held ends the extension.
	ContentionWait time.Duration
}

// canRetry reports whether p may make more than one attempt: it allows
// retries (MaxRetries ≠ 0), or retries for contention (ContentionWait > 0).
func (p Policy) canRetry() bool { return p.MaxRetries != 0 || p.ContentionWait > 0 }

// Within returns p with its retries bounded by time instead of a count:
// no cap on retries (Unlimited) until d has passed (TotalTimeout d), or,
// for d = 0, no retries. It turns a "how long to wait" setting, where 0
// means "do not wait", into a policy, where TotalTimeout 0 would mean
// "wait for ever". Contention keeps its ContentionWait either way.
func (p Policy) Within(d time.Duration) Policy {
	p.MaxRetries, p.TotalTimeout = Unlimited, d
	if d == 0 {
		p.MaxRetries = 0
	}
	return p
}

// Validate reports a policy that cannot work, naming the first bad field.
// A policy that cannot retry (MaxRetries 0 and ContentionWait 0) is
// refused only for negative values: its waits are never used. retry.Do and locking.Acquire validate
// their policy before the first attempt.
func (p Policy) Validate() error {
	switch {
	case p.Initial < 0, p.Max < 0, p.AttemptTimeout < 0, p.TotalTimeout < 0, p.ContentionWait < 0:
		return fmt.Errorf("retry policy: durations must not be negative (initial %s, max %s, attempt timeout %s, total timeout %s, contention wait %s)",
			p.Initial, p.Max, p.AttemptTimeout, p.TotalTimeout, p.ContentionWait)
	case p.MaxRetries < Unlimited:
		return fmt.Errorf("retry policy: max retries %d is negative (Unlimited, %d, lifts the cap; 0 makes no retries)", p.MaxRetries, Unlimited)
	case !p.canRetry():
		return nil
	case p.Initial == 0:
		// A zero first wait turns the retries into a hot loop against a
		// server that is already failing or contended.
		return fmt.Errorf("retry policy: initial wait must be positive when the policy retries (max retries %d, contention wait %s)",
			p.MaxRetries, p.ContentionWait)
	case p.Max < p.Initial:
		return fmt.Errorf("retry policy: max wait %s is below the initial %s", p.Max, p.Initial)
	case !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 0):
		return fmt.Errorf("retry policy: multiplier %v must be a finite number ≥ 1", p.Multiplier)
	case !(p.Jitter >= 0 && p.Jitter <= 1):
		return fmt.Errorf("retry policy: jitter %v must be in [0, 1]", p.Jitter)
	}
	return nil
}

// Delay is the wait before retry n (0 is the wait after the first failed
// attempt), for a uniform u in [0, 1): min(Max, Initial·Multiplierⁿ)
// scaled by 1 + Jitter·(2u−1). Delay is pure; a negative n counts as 0 and
// u is clamped to [0, 1].
func (p Policy) Delay(n int, u float64) time.Duration {
	// Computed in float64 so a large n or Max saturates instead of
	// overflowing: Initial·M^n becomes +Inf and the cap takes over.
	base := math.Min(float64(p.Initial)*math.Pow(p.Multiplier, float64(max(n, 0))), float64(p.Max))
	if math.IsNaN(u) || u < 0 {
		u = 0
	}
	return toDuration(base * (1 + p.Jitter*(2*math.Min(u, 1)-1)))
}

// toDuration converts f nanoseconds to the nearest Duration, saturating
// instead of overflowing (converting an out-of-range float to an integer is
// implementation-defined in Go). Rounding, not truncating, keeps a delay
// within a nanosecond of the exact value.
func toDuration(f float64) time.Duration {
	switch {
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= 0 || math.IsNaN(f):
		return 0
	}
	return time.Duration(math.Round(f))
}
