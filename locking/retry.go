package locking

import (
	"errors"
	"time"

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

// retryable reports whether an Acquire that failed with err may succeed if
// tried again: the storage was unavailable, throttled or slow. Every other
// failure is the caller's or the configuration's, and retrying cannot help.
func retryable(err error) bool {
	return errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrNetworkTimeout)
}
