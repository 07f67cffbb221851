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
// Timeout 0 makes a single attempt, whatever the other fields say (but
// ContentionWait), so the zero RetryPolicy means "try once, do not wait".
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
	// ContentionWait keeps retrying past Timeout while the backend reports
	// contention (ErrContended), for up to this long after the first
	// such report: a transaction that died holding the lock's record (a
	// holder killed inside an extension) blocks every acquire until the
	// store expires it, 60 s on Firestore, which is no sign of the lock
	// being held. An attempt that finds the lock held ends the extension.
	// MaxRetries still caps the attempts. 0: contention is a failure like
	// any other.
	ContentionWait time.Duration
	// AttemptTimeout bounds each attempt; 0 leaves it to ctx. Without it
	// a store that does not answer holds the first attempt until ctx ends,
	// and the policy never gets to decide.
	AttemptTimeout time.Duration
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
	case p.Initial < 0, p.Max < 0, p.Timeout < 0, p.ContentionWait < 0, p.AttemptTimeout < 0:
		return bad("durations must not be negative (initial %s, max %s, timeout %s, contention wait %s, attempt timeout %s)",
			p.Initial, p.Max, p.Timeout, p.ContentionWait, p.AttemptTimeout)
	case p.MaxRetries < 0:
		return bad("max retries %d is negative", p.MaxRetries)
	case p.Timeout == 0 && p.ContentionWait == 0:
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
// ExponentialBackOff that never stops by itself, bounded by the timeout
// clamp (timeoutBackOff, which extra may extend: see ContentionWait) and
// capped by WithMaxRetries.
func (p RetryPolicy) backOff(extra func() time.Duration) backoff.BackOff {
	exp := &backoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: p.Jitter,
		Multiplier:          p.Multiplier,
		MaxInterval:         p.Max,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	exp.Reset()
	var b backoff.BackOff = &timeoutBackOff{exp: exp, timeout: p.Timeout, extra: extra}
	if p.MaxRetries > 0 {
		b = backoff.WithMaxRetries(b, uint64(p.MaxRetries))
	}
	return b
}

// timeoutBackOff ends the waits at the timeout the lock contract's way.
// ExponentialBackOff stops as soon as its next wait would pass
// MaxElapsedTime, giving up as much as a whole wait early; the contract
// instead waits out the time left and makes one last attempt at the
// timeout. So no wait passes the time left, and only a timeout already
// reached stops. extra, if set, is how much longer than that the wait may
// go on (ContentionWait's time left, 0 when the last attempt was not
// contended).
type timeoutBackOff struct {
	exp     *backoff.ExponentialBackOff // MaxElapsedTime 0: never stops
	timeout time.Duration
	extra   func() time.Duration
}

func (t *timeoutBackOff) Reset() { t.exp.Reset() }

func (t *timeoutBackOff) NextBackOff() time.Duration {
	left := t.timeout - t.exp.GetElapsedTime()
	if t.extra != nil {
		left = max(left, t.extra())
	}
	if left <= 0 {
		return backoff.Stop
	}
	return min(t.exp.NextBackOff(), left)
}

// retryable reports whether an Acquire that failed with err may succeed if
// tried again: the storage was unavailable, throttled or slow. Every other
// failure is the caller's or the configuration's, and retrying cannot help.
func retryable(err error) bool {
	return errors.Is(err, ErrServiceUnavailable) || errors.Is(err, ErrRateLimited) || errors.Is(err, ErrNetworkTimeout)
}
