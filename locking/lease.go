package locking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// DefaultTTL is a lock's time to live unless WithTTL says otherwise: long
// enough to ride out a slow extension, short enough that a crashed
// holder's lock frees itself soon.
const DefaultTTL = 30 * time.Second

// releaseTimeout bounds Do's release, which runs detached from the caller's
// context so that a cancelled caller still hands the lock back.
const releaseTimeout = 10 * time.Second

// Lease is a held lock kept alive by a heartbeat goroutine that extends it
// to ttl every ttl/3.
//
// The lease is lost when an extension finds the lock gone or expired, or
// when extensions keep failing (errors) until the lock's last known expiry
// passes. Then Done is closed, Err returns an error wrapping ErrLeaseLost
// (and the last extension error, if any), and every context from Context is
// cancelled with that error as its cause. Because the lease gives up at the
// expiry by its own clock, and other clients take the lock only
// TimeTolerance after it, the holder learns of the loss before anyone else
// can acquire, as long as clocks agree within that tolerance.
//
// Call Release when done; until then the heartbeat runs. A Lease is safe for
// concurrent use.
type Lease struct {
	b      Backend
	key    string
	lockID string
	fence  string
	ttl    time.Duration

	// life ends when the lease is lost or released; its cause says which.
	life    context.Context
	endLife context.CancelCauseFunc

	serverTime bool // the backend's clock, not ours, decides expiry

	mu        sync.Mutex
	expiresAt time.Time // as the backend reports it, on its time authority's clock
	lost      error     // set once, on loss

	stopHeartbeat context.CancelFunc // also cancels an extension in flight
	heartbeatDone chan struct{}

	releaseOnce sync.Once
	releaseErr  error
}

// newLease starts the lease of a lock acquired by a request sent at sent.
func newLease(b Backend, key string, r AcquireResult, ttl time.Duration, sent time.Time) *Lease {
	l := &Lease{b: b, key: key, lockID: r.LockID, fence: r.Fence, ttl: ttl,
		serverTime: b.Capabilities().TimeAuthority != "client", heartbeatDone: make(chan struct{})}
	var deadline time.Time
	l.expiresAt, deadline = l.deadlines(r.ExpiresAt, sent)
	// Detached from Acquire's context: the lease lives until Release or loss.
	l.life, l.endLife = context.WithCancelCause(context.Background())
	hb, stop := context.WithCancel(context.Background())
	l.stopHeartbeat = stop
	go l.heartbeat(hb, deadline)
	return l
}

// Key is the NFC-normalised key the lock holds.
func (l *Lease) Key() string { return l.key }

// Fence is the lock's fence token (empty on a backend without fencing).
// Stamp it on what you write so storage can refuse a writer whose lock has
// passed to someone else.
func (l *Lease) Fence() string { return l.fence }

// LockID is the lock's id, the capability to release it. Do not log it; log
// HashKey(LockID()) instead.
func (l *Lease) LockID() string { return l.lockID }

// ExpiresAt is the lock's expiry as of the last successful extension, as
// the backend reported it: on the clock of its time authority (the
// PostgreSQL server's, for pglock), which may differ from this machine's.
// The lease itself times the lock on the local monotonic clock.
func (l *Lease) ExpiresAt() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expiresAt
}

// deadlines turns the expiry a backend reported for a request sent at sent
// into what ExpiresAt reports and the local deadline the lease times the
// lock by, on the monotonic clock.
//
// A client-time backend (Firestore) stamped the expiry on our own clock:
// it is exact. A server-time backend (PostgreSQL) stamped it on the
// server's, which may be off ours by any amount; taking it for ours would
// make a lease on a server an hour behind "expired" at once, and keep one
// on a server an hour ahead "held" long after it was lost. Its now was no
// earlier than sent, so sent + ttl is never later than the real expiry.
func (l *Lease) deadlines(reported, sent time.Time) (expiresAt, deadline time.Time) {
	switch {
	case reported.IsZero():
		// A backend that does not report its expiry: assume the soonest.
		return sent.Add(l.ttl), sent.Add(l.ttl)
	case l.serverTime:
		return reported, sent.Add(l.ttl)
	}
	now := time.Now()
	return reported, now.Add(reported.Sub(now)) // re-anchored on the monotonic clock
}

// Done is closed when the lease is lost or released.
func (l *Lease) Done() <-chan struct{} { return l.life.Done() }

// Err is nil while the lock is held and after a clean Release; once the
// lease is lost it is an error wrapping ErrLeaseLost. It reports only
// losses, so "Err() != nil" means the work done under the lease may not
// have been exclusive.
func (l *Lease) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Context returns a context derived from parent that is also cancelled
// when the lease ends: with a cause (context.Cause) wrapping ErrLeaseLost
// if the lock was lost, or ErrReleased after Release. Call the CancelFunc
// when done with the context.
func (l *Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(l.life, func() { cancel(context.Cause(l.life)) })
	if l.life.Err() != nil {
		// Already over: cancel now rather than when AfterFunc's goroutine runs.
		cancel(context.Cause(l.life))
	}
	return ctx, func() { stop(); cancel(context.Canceled) }
}

// heartbeat extends the lock every TTL/3 and ends the lease when it is
// lost. It times the lock by expiresAt, on the monotonic clock (see
// deadlines), which only it reads and moves.
func (l *Lease) heartbeat(ctx context.Context, expiresAt time.Time) {
	defer close(l.heartbeatDone)
	interval := max(l.ttl/3, time.Millisecond)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// Armed at the current expiry and pushed back by every successful
	// extension: when it fires the lock has expired under us, whether or
	// not the next tick has come.
	expiry := time.NewTimer(time.Until(expiresAt))
	defer expiry.Stop()
	var lastErr error
	for {
		select {
		case <-ctx.Done():
			return
		case <-expiry.C:
			l.lose(expiredErr(lastErr))
			return
		case <-tick.C:
		}
		// No attempt may outlast the interval (the next one is due) nor the
		// expiry (after which it is too late to matter).
		deadline := time.Now().Add(interval)
		if expiresAt.Before(deadline) {
			deadline = expiresAt
		}
		actx, cancel := context.WithDeadline(ctx, deadline)
		sent := time.Now()
		r, err := l.extend(actx)
		cancel()
		if ctx.Err() != nil {
			return // released meanwhile; the outcome no longer matters
		}
		switch {
		case err == nil && r.OK:
			var reported time.Time
			reported, expiresAt = l.deadlines(r.ExpiresAt, sent)
			l.mu.Lock()
			l.expiresAt = reported
			l.mu.Unlock()
			expiry.Reset(time.Until(expiresAt))
			lastErr = nil
		case err == nil:
			l.lose(fmt.Errorf("%w: the lock expired or passed to another holder", ErrLeaseLost))
			return
		case !time.Now().Before(expiresAt):
			l.lose(expiredErr(err))
			return
		default:
			// Before the expiry an error is worth another try at the next
			// tick: the lock is still ours until then.
			lastErr = err
		}
	}
}

func expiredErr(cause error) error {
	if cause == nil {
		return fmt.Errorf("%w: the lock expired before it could be extended", ErrLeaseLost)
	}
	return fmt.Errorf("%w: the lock expired before it could be extended: %w", ErrLeaseLost, cause)
}

// lose records the first loss and ends the lease with it as the cause.
func (l *Lease) lose(err error) {
	l.mu.Lock()
	if l.lost == nil {
		l.lost = err
	}
	err = l.lost
	l.mu.Unlock()
	l.endLife(err)
}

// extend and release take the backend's keyed shortcut when it has one:
// the lease knows its key.
func (l *Lease) extend(ctx context.Context) (ExtendResult, error) {
	if k, ok := l.b.(KeyedBackend); ok {
		return k.ExtendKey(ctx, l.key, l.lockID, l.ttl)
	}
	return l.b.Extend(ctx, l.lockID, l.ttl)
}

func (l *Lease) release(ctx context.Context) (bool, error) {
	if k, ok := l.b.(KeyedBackend); ok {
		return k.ReleaseKey(ctx, l.key, l.lockID)
	}
	return l.b.Release(ctx, l.lockID)
}

// Release stops the heartbeat (waiting for it to exit, cancelling an
// extension in flight), then frees the lock on the backend and ends the
// lease. It is idempotent: later calls return the first call's result.
//
// It returns the backend's error, if any (the lock then expires with its
// TTL). If the backend reports the lock was no longer held, the lease was
// lost without having noticed; Release then marks it lost (Err) and
// returns that error, wrapping ErrLeaseLost. Releasing a lease already
// reported lost returns nil: the loss was reported by Err and Done.
func (l *Lease) Release(ctx context.Context) error {
	l.releaseOnce.Do(func() {
		l.stopHeartbeat()
		<-l.heartbeatDone
		wasLost := l.Err() != nil
		// Even a lost lease releases: if it was declared lost because
		// extensions failed, its document may still be there.
		ok, err := l.release(ctx)
		switch {
		case err != nil:
			l.releaseErr = err
		case !ok && !wasLost:
			l.lose(fmt.Errorf("%w: the lock was no longer held at release (it expired or passed to another holder)", ErrLeaseLost))
			l.releaseErr = l.Err()
		}
		l.endLife(ErrReleased) // no effect if already lost
	})
	return l.releaseErr
}

// Do runs fn while holding the lock on key: it acquires (see Acquire, with
// its retry policy), runs fn with the lease and a context that is cancelled
// if the lease is lost, and always releases, even if fn panics, with a
// context detached from ctx so that a cancelled caller still frees the
// lock. fn gets the lease so that it can stamp l.Fence() on every write the
// lock guards: the storage can then refuse a writer whose lock has since
// passed to someone else. fn must not call l.Release; Do does.
//
// Do returns fn's error if fn failed. Otherwise, if the lease was lost
// while fn ran or turned out lost at release, it returns that loss
// (wrapping ErrLeaseLost), since fn's work may not have been exclusive.
// A failure of the release itself (a backend error) never becomes Do's
// result: it goes to the OnReleaseError function if one was given, and is
// otherwise ignored, as the lock expires with its TTL anyway.
func Do(ctx context.Context, b Backend, key string, fn func(ctx context.Context, l *Lease) error, opts ...AcquireOption) (err error) {
	cfg := acquireConfig{}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	lease, err := Acquire(ctx, b, key, opts...)
	if err != nil {
		return err
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		relErr := lease.Release(rctx)
		switch {
		case relErr == nil:
		case errors.Is(relErr, ErrLeaseLost):
			// Not a failed release but a loss it revealed.
			if err == nil {
				err = relErr
			}
		case cfg.onReleaseError != nil:
			cfg.onReleaseError(relErr, HashKey(lease.Key()))
		}
	}()
	lctx, cancel := lease.Context(ctx)
	defer cancel()
	if err := fn(lctx, lease); err != nil {
		return err
	}
	return lease.Err()
}
