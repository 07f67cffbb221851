package locking

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// AcquireOption configures Acquire and Do.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	ttl            time.Duration
	retry          RetryPolicy
	onReleaseError func(err error, keyHash string)
	onRenewal      func(RenewalStat)
}

// WithTTL sets the lock's time to live (default DefaultTTL). The lease
// extends it every ttl/3, so a holder that dies frees the lock within ttl.
func WithTTL(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.ttl = d } }

// WithRetry sets how Acquire waits for a held lock, or a backend failing
// transiently (default DefaultRetryPolicy). RetryPolicy{} makes a single
// attempt; policy.Unlimited as MaxRetries waits until TotalTimeout, or,
// with TotalTimeout 0, until ctx ends.
func WithRetry(p RetryPolicy) AcquireOption { return func(c *acquireConfig) { c.retry = p } }

// OnReleaseError sets the function Do calls when releasing the lock fails,
// with the backend's error and the HashKey of the key, never the raw key
// or lockId. Without it such errors are
// ignored: the lock then expires with its TTL. Either way they never
// replace Do's result. fn runs synchronously before Do returns. Acquire
// ignores this option.
func OnReleaseError(fn func(err error, keyHash string)) AcquireOption {
	return func(c *acquireConfig) { c.onReleaseError = fn }
}

// Acquire takes the lock on key and returns a Lease that keeps it alive
// until Release. While someone else holds the lock, or the backend fails
// transiently (ServiceUnavailable, RateLimited, NetworkTimeout), it tries
// again as the retry policy says.
//
// The key, TTL and policy are validated before any I/O (ErrInvalidArgument).
// Any other backend error is returned at once. When the policy ends (its
// TotalTimeout, or MaxRetries), the last attempt decides the error: if the
// lock was held, one matching ErrAcquisitionTimeout; if the backend failed,
// that failure, its code kept (errors.Is(err, ErrServiceUnavailable), …),
// with the attempts made noted. A failure matching ErrContended keeps the
// wait going past TotalTimeout and MaxRetries for the policy's
// ContentionWait (see RetryPolicy). If ctx ends first, the error matches
// ErrAborted and wraps context.Cause(ctx).
//
// The lease outlives ctx: ctx bounds only the acquisition.
func Acquire(ctx context.Context, b Backend, key string, opts ...AcquireOption) (*Lease, error) {
	const op = "acquire"
	cfg := acquireConfig{ttl: DefaultTTL, retry: DefaultRetryPolicy()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	nkey, err := normalizeKey(op, key)
	if err != nil {
		return nil, err
	}
	if err := validateTTL(op, cfg.ttl); err != nil {
		return nil, err
	}
	if err := validateRetry(op, cfg.retry); err != nil {
		return nil, err
	}
	keyHash := HashKey(nkey)
	aborted := func() error { return &Error{Code: Aborted, Op: op, KeyHash: keyHash, Err: context.Cause(ctx)} }
	if ctx.Err() != nil {
		return nil, aborted()
	}
	var lease *Lease
	start := time.Now()
	attempts, err := policy.Retry(ctx, cfg.retry, func(ctx context.Context) error {
		sent := time.Now()
		r, err := b.Acquire(ctx, nkey, cfg.ttl)
		switch {
		case err != nil && !retryable(err):
			return backoff.Permanent(err)
		case err != nil:
			return err
		case !r.OK:
			return errHeld
		}
		lease = newLease(b, nkey, r, cfg.ttl, sent, cfg.onRenewal)
		return nil
	}, policy.WithClassify(func(err error) policy.Failure {
		if errors.Is(err, ErrContended) {
			return policy.Contended
		}
		return policy.Retryable
	}))
	switch {
	case lease != nil:
		return lease, nil
	case ctx.Err() != nil:
		// However the backend saw the cancellation (a transport error, a
		// timeout), or however the wait was cut short, it is the
		// caller's doing.
		return nil, aborted()
	case errors.Is(err, errHeld):
		return nil, &Error{Code: AcquisitionTimeout, Op: op, KeyHash: keyHash,
			Err: fmt.Errorf("lock still held after %s in %s", plural.N(attempts, "attempt"), time.Since(start).Round(time.Millisecond))}
	case retryable(err):
		return nil, fmt.Errorf("%w (gave up after %s in %s)", err, plural.N(attempts, "attempt"), time.Since(start).Round(time.Millisecond))
	}
	return nil, err
}

// errHeld is an attempt's outcome when another holder has the lock.
var errHeld = errors.New("lock held")
