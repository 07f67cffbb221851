package locking

import (
	"errors"
	"math"
	"math/rand/v2"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// RetryPolicy says how Acquire waits for a lock that is held, or whose
// backend fails transiently. It is the one retry policy of package policy
// (retry.Policy is the same type), with the same meaning for every zero
// value: MaxRetries 0 makes no retries and policy.Unlimited lifts the cap;
// TotalTimeout 0 and AttemptTimeout 0 set no bound; ContentionWait 0 gives
// contention no extra retries. So RetryPolicy{} makes a single attempt.
//
// Retry n (from 0) waits, before jitter, min(Max, Initial·Multiplierⁿ),
// spread uniformly over ±Jitter of itself. No wait extends past
// TotalTimeout: the last one is cut to the time left, so the last attempt
// starts at the TotalTimeout; an attempt in flight then is not cut short.
//
// While the backend reports contention (ErrContended) the wait goes on
// past MaxRetries and TotalTimeout, for up to ContentionWait after the
// first such report: a transaction that died holding the lock's record (a
// holder killed inside an extension) blocks every acquire until the store
// expires it, 60 s on Firestore, which is no sign of the lock being held.
// An attempt that finds the lock held ends the extension.
//
// Without an AttemptTimeout a store that does not answer holds the first
// attempt until ctx ends, and the policy never gets to decide.
type RetryPolicy = policy.Policy

// DefaultRetryPolicy is the default of SyncGuard's lock() helper, so Go
// and TypeScript waiters behave alike: waits uniform in [b/2, b] for
// b = 100 ms·2ⁿ⁻¹ before retry n (from 1), at most 10 retries, 5 s in all.
// In policy terms that is Initial 75 ms with Jitter 1/3 (75 ± 25 ms) and
// Multiplier 2; Max is cenkalti/backoff's default, 1 min, which the 5 s
// never reach.
func DefaultRetryPolicy() RetryPolicy {
	return RetryPolicy{Initial: 75 * time.Millisecond, Max: time.Minute, Multiplier: 2, Jitter: 1.0 / 3,
		MaxRetries: 10, TotalTimeout: 5 * time.Second}
}

// validateRetry fails with InvalidArgument for a policy that cannot work
// (see RetryPolicy's Validate), as validateTTL does for a bad TTL.
func validateRetry(op string, p RetryPolicy) error {
	if err := p.Validate(); err != nil {
		return &Error{Code: InvalidArgument, Op: op, Err: err}
	}
	return nil
}

// backOff is p as a backoff.BackOff for Acquire's loop (see acquireBackOff);
// extra, if set, is how much longer contention may extend the wait.
func backOff(p RetryPolicy, extra func() time.Duration) backoff.BackOff {
	b := &acquireBackOff{p: p, extra: extra}
	b.Reset()
	return b
}

// acquireBackOff ends the waits the lock contract's way. cenkalti's
// ExponentialBackOff stops as soon as its next wait would pass
// MaxElapsedTime, giving up as much as a whole wait early; the contract
// instead waits out the time left and makes one last attempt at the
// timeout. So no wait passes the time left, and only a timeout already
// reached, or MaxRetries used up, stops. extra, if set, returns how much
// longer than that the wait may go on (ContentionWait's time left, 0 or
// less when the last attempt was not contended).
type acquireBackOff struct {
	p       RetryPolicy
	extra   func() time.Duration
	start   time.Time
	retries int
}

func (b *acquireBackOff) Reset() { b.start, b.retries = time.Now(), 0 }

func (b *acquireBackOff) NextBackOff() time.Duration {
	left := time.Duration(math.MaxInt64) // TotalTimeout 0: no bound
	if b.p.TotalTimeout > 0 {
		left = b.p.TotalTimeout - time.Since(b.start)
	}
	if b.p.MaxRetries != policy.Unlimited && b.retries >= b.p.MaxRetries {
		left = min(left, 0)
	}
	if b.extra != nil {
		left = max(left, b.extra())
	}
	if left <= 0 {
		return backoff.Stop
	}
	d := b.p.Delay(b.retries, rand.Float64())
	b.retries++
	return min(d, left)
}

// retryable reports whether an Acquire that failed with err may succeed if
// tried again: the storage was unavailable, throttled or slow. Every other
// failure is the caller's or the configuration's, and retrying cannot help.
func retryable(err error) bool {
	return errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrNetworkTimeout)
}
