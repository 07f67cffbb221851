package locking

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/internal/safego"
	"github.com/snapwriter/snapwriter/retry/policy"
)

// DefaultTTL is a lock's time to live unless WithTTL says otherwise: long
// enough to ride out a slow extension, short enough that a crashed
// holder's lock frees itself soon.
const DefaultTTL = 30 * time.Second

// releaseTimeout bounds Do's release, which runs detached from the caller's
// context so that a cancelled caller still hands the lock back.
const releaseTimeout = 10 * time.Second

// Lease is a held lock kept alive by a heartbeat goroutine that renews
// it: TTL/3 after each successful extension was sent, it extends the lock
// to the TTL again.
//
// A renewal may take as long as the lock has left: each attempt runs until
// it is answered or the lock's expiry passes, and an attempt that fails
// before the expiry is retried after a short jittered wait (a RetryPolicy
// with Unlimited retries, bounded by the expiry). So a renewal
// slowed down by a loaded store (one answering in more than TTL/3) still
// keeps the lock, and only one extension is ever in flight: the next
// renewal is due only after this one ended.
//
// The lease is lost when an extension finds the lock gone or expired, or
// when no renewal succeeds before the lock's last known expiry passes.
// Then Done is closed, Err returns an error wrapping ErrLeaseLost (and the
// last extension error, if any), and every context from Context is
// cancelled with that error as its cause. Because the lease gives up at the
// expiry by its own clock, whatever the extension in flight is doing, and
// other clients take the lock only TimeTolerance after it, the holder
// learns of the loss before anyone else can acquire, as long as clocks
// agree within that tolerance.
//
// OnRenewal reports each renewal's latency as it ends. Renew asks for a
// renewal now, out of turn (a holder warned that it is about to be
// paused), and waits for it.
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

	onRenewal func(RenewalStat) // nil: nobody listens

	// renewNow (buffered: one request stands for all) asks the heartbeat
	// for a renewal at once (Renew). Sent and drained under mu.
	renewNow chan struct{}

	mu        sync.Mutex
	expiresAt time.Time // as the backend reports it, on its time authority's clock
	lost      error     // set once, on loss
	// started counts the renewals the heartbeat has begun; extended is
	// the number of the last that extended the lock; ended is closed, and
	// replaced, as each succeeds (Renew waits on it).
	started, extended uint64
	ended             chan struct{}

	stopHeartbeat context.CancelFunc // also cancels an extension in flight
	heartbeatDone chan struct{}

	releaseOnce sync.Once
	releaseErr  error
}

// RenewalStat describes one renewal of a lease, from its first extension
// attempt to its end: the extension that succeeded, or the loss of the
// lease. A renewal cut short by Release is not reported.
type RenewalStat struct {
	// Latency is how long the renewal took, retries included.
	Latency time.Duration
	// Attempts is how many extensions it sent (more than one when some
	// failed and were retried).
	Attempts int
	// Left is how long the lock still had to live, by the lease's clock,
	// when the renewal ended (before its extension took effect): TTL·2/3
	// minus Latency, at most, for a renewal sent on time.
	Left time.Duration
	// TTL is the lease's time to live, for comparison.
	TTL time.Duration
	// Err is nil when the renewal extended the lock, and otherwise the
	// loss that ended the lease (wrapping ErrLeaseLost).
	Err error
}

// OnRenewal sets a function the lease calls as each renewal ends, with
// its latency: a holder whose own traffic slows its renewals down can
// shed load before the lease is at risk. fn runs on the heartbeat
// goroutine, after the renewal took effect and before the next is
// scheduled: it must return quickly, and must not call Release.
func OnRenewal(fn func(RenewalStat)) AcquireOption {
	return func(c *acquireConfig) { c.onRenewal = fn }
}

// newLease starts the lease of a lock acquired by a request sent at sent.
func newLease(b Backend, key string, r AcquireResult, ttl time.Duration, sent time.Time, onRenewal func(RenewalStat)) *Lease {
	l := &Lease{b: b, key: key, lockID: r.LockID, fence: r.Fence, ttl: ttl, onRenewal: onRenewal,
		serverTime: b.Capabilities().TimeAuthority != "client", heartbeatDone: make(chan struct{}),
		renewNow: make(chan struct{}, 1), ended: make(chan struct{})}
	var deadline time.Time
	l.expiresAt, deadline = l.deadlines(r.ExpiresAt, sent)
	// Detached from Acquire's context: the lease lives until Release or loss.
	l.life, l.endLife = context.WithCancelCause(context.Background())
	hb, stop := context.WithCancel(context.Background())
	l.stopHeartbeat = stop
	go l.heartbeat(hb, deadline, sent)
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

// Renew has the lock renewed now rather than at its due time, and waits
// for that renewal: one the heartbeat begins after the call (a renewal
// already in flight is let end first: only one extension is ever in
// flight, and its answer may predate the call). So a nil return means the
// store extended the lock after Renew was called, with the TTL from then.
// A holder about to be paused (a process warned of a freeze) renews so
// that a pause shorter than the TTL costs it nothing, and renews again
// after the pause to learn whether it still holds the lock.
//
// It returns the loss (wrapping ErrLeaseLost) if the lease is lost first,
// ErrReleased after Release, and ctx's cause if ctx ends first: the
// renewal itself goes on, bounded by the lock's expiry as every renewal
// is. The heartbeat's next renewal is then due TTL/3 after this one.
func (l *Lease) Renew(ctx context.Context) error {
	l.mu.Lock()
	want := l.started + 1
	select {
	case l.renewNow <- struct{}{}:
	default: // asked already, and not yet begun: that renewal is ours too
	}
	l.mu.Unlock()
	for {
		l.mu.Lock()
		ok, lost, ended := l.extended >= want, l.lost, l.ended
		l.mu.Unlock()
		switch {
		case ok:
			return nil
		case lost != nil:
			return lost
		}
		select {
		case <-ended:
		case <-l.life.Done():
			l.mu.Lock()
			ok := l.extended >= want
			l.mu.Unlock()
			if ok {
				return nil
			}
			return context.Cause(l.life)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// heartbeat renews the lock TTL/3 after each successful extension (the
// acquisition first) was sent, or at once when Renew asks, and ends the
// lease when it is lost. It
// times the lock by expiresAt, on the monotonic clock (see deadlines),
// which only it reads and moves.
func (l *Lease) heartbeat(ctx context.Context, expiresAt, sent time.Time) {
	defer close(l.heartbeatDone)
	// A panic here (an OnRenewal func's, a backend's) would end the
	// process from this goroutine, with the runtime's exit code and no
	// cleanup: it ends the lease instead, its cause carrying the panic
	// (safego.ErrPanic, with the stack), so the holder stops and cleans up
	// as on any loss and the CLI reports the panic.
	var panicked error
	defer func() {
		if panicked != nil {
			l.lose(fmt.Errorf("%w: the lease's heartbeat panicked: %w", ErrLeaseLost, panicked))
		}
	}()
	defer safego.Recover(&panicked) // recover must be the deferred call itself
	interval := max(l.ttl/3, time.Millisecond)
	due := time.NewTimer(time.Until(sent.Add(interval)))
	defer due.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-due.C:
		case <-l.renewNow:
		}
		l.mu.Lock()
		l.started++
		n := l.started
		// This renewal answers every Renew made so far, asked or not.
		select {
		case <-l.renewNow:
		default:
		}
		l.mu.Unlock()
		start := time.Now()
		r, sent, attempts, err := l.renew(ctx, expiresAt)
		if ctx.Err() != nil {
			return // released meanwhile; the outcome no longer matters
		}
		stat := RenewalStat{Latency: time.Since(start), Attempts: attempts, Left: time.Until(expiresAt), TTL: l.ttl}
		if err != nil {
			l.lose(err)
			stat.Err, stat.Left = l.Err(), max(stat.Left, 0)
			l.report(stat)
			return
		}
		var reported time.Time
		reported, expiresAt = l.deadlines(r.ExpiresAt, sent)
		l.mu.Lock()
		l.expiresAt = reported
		l.extended = n
		close(l.ended)
		l.ended = make(chan struct{})
		l.mu.Unlock()
		l.report(stat)
		// From the extension's send, not from now: a slow renewal is
		// followed at once by the next, which then finds the store as
		// it is now.
		due.Reset(time.Until(sent.Add(interval)))
	}
}

// report hands stat to the OnRenewal function, if any.
func (l *Lease) report(stat RenewalStat) {
	if l.onRenewal != nil {
		l.onRenewal(stat)
	}
}

// renewalPolicy spaces the attempts of one renewal of a lock with the
// given TTL: short waits, since the lock's remaining time is all a renewal
// has, and jittered, so that holders whose renewals failed together do
// not retry together. Before retry n (from 0) it waits uniformly in
// [w/2, w] for w = min(50 ms, TTL/20)·2ⁿ, at most min(1 s, max(TTL/10,
// 1 ms)); in policy terms, as DefaultRetryPolicy's, 3/4 of that with
// Jitter 1/3. The retries have no cap and no timeout of the policy's own:
// the lock's expiry ends a renewal, and each attempt may run until it.
func renewalPolicy(ttl time.Duration) RetryPolicy {
	initial := min(50*time.Millisecond, ttl/20)
	most := min(time.Second, max(ttl/10, time.Millisecond))
	return RetryPolicy{Initial: initial * 3 / 4, Max: most * 3 / 4, Multiplier: 2, Jitter: 1.0 / 3,
		MaxRetries: policy.Unlimited}
}

// renew extends the lock until an extension succeeds, finds the lock gone,
// or expiresAt passes, trying again after a failure. Each attempt may run
// until expiresAt. It returns the successful extension, when it was sent
// and how many attempts were made, or the loss (wrapping ErrLeaseLost);
// when ctx ends (Release) its result does not matter.
func (l *Lease) renew(ctx context.Context, expiresAt time.Time) (r ExtendResult, sent time.Time, attempts int, err error) {
	start := time.Now()
	// The loss is declared when the expiry passes by our clock, whatever
	// an attempt in flight is doing: a backend slow to honour its
	// deadline must not delay it.
	expiry := time.NewTimer(time.Until(expiresAt))
	defer expiry.Stop()
	// Neither an attempt nor a wait goes past the expiry.
	rctx, cancel := context.WithDeadline(ctx, expiresAt)
	defer cancel()
	var (
		sending int   // the attempt in flight, from 1
		lastErr error // the last attempt's failure
		lost    error // a loss an attempt found
	)
	attempts, err = policy.Retry(rctx, renewalPolicy(l.ttl), func(actx context.Context) error {
		sending++
		sent = time.Now()
		type outcome struct {
			r   ExtendResult
			err error
		}
		done := make(chan outcome, 1)
		actx, cancel := context.WithCancel(actx)
		defer cancel()
		go func() {
			r, err := l.extend(actx)
			done <- outcome{r, err}
		}()
		var o outcome
		select {
		case o = <-done:
		case <-expiry.C:
			// Lost now; then wait for the cancelled attempt, since Release
			// waits for the heartbeat to have nothing in flight.
			lost = expiredErr(sending, time.Since(start), true, lastErr)
			l.lose(lost)
			cancel()
			<-done
			return backoff.Permanent(lost)
		}
		switch {
		case o.err == nil && o.r.OK:
			r = o.r
			return nil
		case o.err == nil:
			lost = fmt.Errorf("%w: the lock expired or passed to another holder", ErrLeaseLost)
			return backoff.Permanent(lost)
		}
		// Before the expiry the lock is still ours: try again soon.
		lastErr = o.err
		return o.err
	})
	switch {
	case ctx.Err() != nil:
		return r, sent, attempts, ctx.Err()
	case err == nil:
		return r, sent, attempts, nil
	case lost != nil:
		return r, sent, attempts, lost
	}
	// The retries have no budget of their own: only the expiry ends them.
	return r, sent, attempts, expiredErr(attempts, time.Since(start), false, lastErr)
}

// expiredErr is the loss of a lease whose renewal, of attempts
// extensions over took, did not succeed before the lock expired: the last
// attempt was still unanswered (inFlight) — a NetworkTimeout — or failed
// with lastErr. When it was unanswered, lastErr is an earlier attempt's
// failure, if any.
func expiredErr(attempts int, took time.Duration, inFlight bool, lastErr error) error {
	what := fmt.Sprintf("the lock expired before its renewal succeeded (%s in %s)", plural.N(attempts, "attempt"), took.Round(time.Millisecond))
	if !inFlight {
		return fmt.Errorf("%w: %s; the last failed: %w", ErrLeaseLost, what, lastErr)
	}
	unanswered := &Error{Code: NetworkTimeout, Op: "extend", Err: errors.New("the last attempt was unanswered at the lock's expiry")}
	if lastErr == nil {
		return fmt.Errorf("%w: %s: %w", ErrLeaseLost, what, unanswered)
	}
	return fmt.Errorf("%w: %s: %w (an earlier one failed: %w)", ErrLeaseLost, what, unanswered, lastErr)
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
