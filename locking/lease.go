package locking

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// DefaultTTL is a lock's time to live unless WithTTL says otherwise.
const DefaultTTL = 30 * time.Second

// AcquireOption configures Acquire and Do.
type AcquireOption func(*acquireConfig)

type acquireConfig struct {
	ttl   time.Duration
	retry RetryPolicy
	rand  func() float64
}

// WithTTL sets the lock's time to live (default 30 s). The lease extends it
// every TTL/3.
func WithTTL(d time.Duration) AcquireOption { return func(c *acquireConfig) { c.ttl = d } }

// WithRetry sets how long and how often to wait for a held lock (default
// DefaultRetryPolicy). MaxRetries 0 makes a single attempt.
func WithRetry(p RetryPolicy) AcquireOption { return func(c *acquireConfig) { c.retry = p } }

// Acquire takes the lock on key, waiting for a holder per the retry policy,
// and returns a Lease that keeps it alive until Release. It fails with
// ErrAcquisitionTimeout if the lock stayed held, ErrAborted if ctx ended,
// ErrInvalidArgument for a bad key or option, or the backend's error.
func Acquire(ctx context.Context, b Backend, key string, opts ...AcquireOption) (*Lease, error) {
	cfg := acquireConfig{ttl: DefaultTTL, retry: DefaultRetryPolicy(), rand: rand.Float64}
	for _, o := range opts {
		o(&cfg)
	}
	nkey, err := NormalizeAndValidateKey(key)
	if err != nil {
		return nil, err
	}
	if err := ValidateTTL(cfg.ttl); err != nil {
		return nil, err
	}
	if err := cfg.retry.Validate(); err != nil {
		return nil, err
	}
	keyHash := HashKey(nkey)
	start := time.Now()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, &Error{Code: Aborted, Op: "acquire", KeyHash: keyHash, Err: context.Cause(ctx)}
		}
		r, err := b.Acquire(ctx, nkey, cfg.ttl)
		if err != nil {
			if ctx.Err() != nil && !errors.Is(err, ErrAborted) {
				return nil, &Error{Code: Aborted, Op: "acquire", KeyHash: keyHash, Err: err}
			}
			return nil, err
		}
		if r.OK {
			return newLease(b, nkey, r, cfg.ttl), nil
		}
		timeout := &Error{Code: AcquisitionTimeout, Op: "acquire", KeyHash: keyHash,
			Err: fmt.Errorf("lock still held after %d attempts in %s", attempt+1, time.Since(start).Round(time.Millisecond))}
		if attempt >= cfg.retry.MaxRetries {
			return nil, timeout
		}
		wait := min(cfg.retry.Delay(attempt+1, cfg.rand()), cfg.retry.Timeout-time.Since(start))
		if wait <= 0 {
			return nil, timeout
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, &Error{Code: Aborted, Op: "acquire", KeyHash: keyHash, Err: context.Cause(ctx)}
		case <-t.C:
		}
	}
}

// Lease is a held lock kept alive by a heartbeat that extends it every
// TTL/3. When an extension finds the lock gone or expired, or extensions
// keep failing until the lock's expiry passes, the lease is lost: Done is
// closed, Err says why, and contexts from Context are cancelled. Call
// Release when done.
type Lease struct {
	b      Backend
	key    string
	lockID string
	fence  string
	ttl    time.Duration

	mu        sync.Mutex
	expiresAt time.Time
	err       error // set once, when lost

	done     chan struct{} // closed when lost or released
	doneOnce sync.Once
	stop     chan struct{} // closed by Release to end the heartbeat
	stopped  chan struct{} // closed when the heartbeat has ended

	releaseOnce sync.Once
	releaseErr  error
}

func newLease(b Backend, key string, r AcquireResult, ttl time.Duration) *Lease {
	l := &Lease{b: b, key: key, lockID: r.LockID, fence: r.Fence, ttl: ttl, expiresAt: r.ExpiresAt,
		done: make(chan struct{}), stop: make(chan struct{}), stopped: make(chan struct{})}
	go l.heartbeat()
	return l
}

// Fence is the lock's fence token.
func (l *Lease) Fence() string { return l.fence }

// LockID is the lock's id, for Release by an operator. Do not log it.
func (l *Lease) LockID() string { return l.lockID }

// Key is the normalised key the lock holds.
func (l *Lease) Key() string { return l.key }

// ExpiresAt is the lock's expiry as of the last successful extension.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.done }

// Err is nil while the lock is held (and after a clean Release); once the
// lease is lost it is an error wrapping ErrLeaseLost.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// errReleased is the cause of a lease context that ended with Release.
var errReleased = errors.New("locking: lease released")

// Context returns a context derived from parent that is cancelled when the
// lease ends; its cause (context.Cause) wraps ErrLeaseLost if the lock was
// lost.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-l.done:
			if err := l.Err(); err != nil {
				cancel(err)
			} else {
				cancel(errReleased)
			}
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

func (l *Lease) heartbeat() {
	defer close(l.stopped)
	interval := max(l.ttl/3, time.Millisecond)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		r, err := l.b.Extend(ctx, l.lockID, l.ttl)
		cancel()
		switch {
		case err == nil && r.OK:
			l.mu.Lock()
			l.expiresAt = r.ExpiresAt
			l.mu.Unlock()
		case err == nil:
			l.lose(fmt.Errorf("%w: the lock expired or was taken over", ErrLeaseLost))
			return
		case !time.Now().Before(l.ExpiresAt()):
			l.lose(fmt.Errorf("%w: could not extend the lock before it expired: %w", ErrLeaseLost, err))
			return
		}
		// An extension error before expiry: try again at the next tick.
	}
}

func (l *Lease) lose(err error) {
	l.mu.Lock()
	l.err = err
	l.mu.Unlock()
	l.doneOnce.Do(func() { close(l.done) })
}

// Release stops the heartbeat and frees the lock. It is safe to call more
// than once; later calls return the first call's result. Releasing a lease
// that was already lost is not an error; finding the lock gone while the
// lease believed it held returns an error wrapping ErrLeaseLost.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		close(l.stop)
		<-l.stopped
		lost := l.Err() != nil
		ok, err := l.b.Release(ctx, l.lockID)
		switch {
		case err != nil:
			l.releaseErr = err
		case !ok && !lost:
			l.releaseErr = &Error{Code: Internal, Op: "release", KeyHash: HashKey(l.key),
				Err: fmt.Errorf("%w: the lock was gone at release", ErrLeaseLost)}
		}
		l.doneOnce.Do(func() { close(l.done) })
	})
	return l.releaseErr
}

// Do runs fn while holding the lock on key: it acquires (see Acquire),
// runs fn with a context cancelled if the lease is lost, and always
// releases. fn's error wins over a release error; if fn succeeded but the
// lease was lost meanwhile, Do reports the loss, since fn's work may not
// have been exclusive.
func Do(ctx context.Context, b Backend, key string, fn func(ctx context.Context) error, opts ...AcquireOption) error {
	lease, err := Acquire(ctx, b, key, opts...)
	if err != nil {
		return err
	}
	lctx, cancel := lease.Context(ctx)
	fnErr := fn(lctx)
	cancel()
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer rcancel()
	relErr := lease.Release(rctx)
	switch {
	case fnErr != nil:
		return fnErr
	case lease.Err() != nil:
		return lease.Err()
	}
	return relErr
}
