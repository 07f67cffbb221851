package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/snapwriter/snapwriter/locking"
)

// lock takes the snapshot's lock, whose renewals the job's admission gate
// learns of, and sets the job's lease and work context: ctx ending stops
// new chunks, and wctx, which the work in flight runs under, ends a grace
// period later, or at once if the lease is lost. It then starts the
// gate's watch of the renewals, makes the job subject to the writer's maintenance notices
// (WithMaintenance) and notes the lock wait since start. unlock ends the
// notices' hold on the job, stops the watch, cancels wctx and releases
// the lock.
func (j *job) lock(start time.Time) (unlock func(), err error) {
	w, ctx, log, id := j.w, j.ctx, j.log, j.id
	t0 := time.Now()
	// The lock retry policy ends the wait; this bound is a backstop: the
	// lock wait, or the contention wait if a stalled transaction began
	// just before its end, plus one attempt.
	bound := w.cfg.lockWait + w.cfg.contention + w.cfg.reqTimeout
	actx, acancel := context.WithTimeoutCause(ctx, bound,
		fmt.Errorf("%w within %s: %w", ErrTimeout, bound, context.DeadlineExceeded))
	defer acancel()
	key, err := w.scope.LockKey(w.lockName, id)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	actx, span := w.tel.start(actx, SpanLockAcquire, lockAttrs(w.lockName, key)...)
	lease, err := locking.Acquire(actx, w.locker, key,
		locking.WithTTL(w.cfg.lockTTL), locking.WithRetry(w.lockRetry()), locking.OnRenewal(j.adm.Renewed))
	wait := time.Since(t0)
	w.tel.acquired(actx, span, wait, lease, err)
	if err != nil {
		switch {
		case errors.Is(err, locking.ErrAcquisitionTimeout):
			return nil, newError(id, ErrLockHeld, nil)
		case errors.Is(err, locking.ErrContended):
			return nil, fmt.Errorf("snapshot %s: acquiring the snapshot lock: the lock document stayed locked by another transaction "+
				"(a writer killed mid-transaction? Firestore frees it within 60 s) for the contention wait, %s: %w", id, w.cfg.contention, err)
		case ctx.Err() == nil && actx.Err() != nil:
			return nil, withID(id, fmt.Errorf("acquiring the snapshot lock: %w", context.Cause(actx)))
		}
		return nil, fmt.Errorf("snapshot %s: acquiring the snapshot lock: %w", id, err)
	}
	log.Info("snapshot lock acquired", zap.String("fence", lease.Fence()),
		zap.String("keyHash", locking.HashKey(lease.Key())), zap.Int64("lockWaitMs", wait.Milliseconds()))
	gctx, gcancel := graceful(ctx, w.cfg.grace)
	wctx, cancel := lease.Context(gctx)
	j.lease, j.wctx = lease, wctx
	j.adm.Start(time.Now())
	leave := w.cfg.maintenance.join(id, j)
	j.lockWait = w.cfg.now().Sub(start)
	return func() {
		leave()
		j.adm.Stop()
		cancel()
		gcancel()
		// Detached from ctx: a cancelled write must still hand the lock back.
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer rcancel()
		rctx, span := w.tel.start(rctx, SpanLockRelease)
		err := lease.Release(rctx)
		endSpan(span, err)
		if err != nil && !errors.Is(err, locking.ErrLeaseLost) {
			log.Warn("releasing snapshot lock failed; it expires with its TTL", zap.Error(err))
		}
	}, nil
}

// lockRetry waits up to the lock wait for a held lock (or a lock backend
// failing transiently), with the lock library's default backoff; a lock
// wait of 0 makes a single attempt. A lock document locked by a dead
// transaction (a writer killed inside a lease extension) is waited out for
// the contention wait, as the root's is, and each attempt is bounded by the
// request timeout, so that a store that does not answer ends the wait.
func (w *Writer) lockRetry() locking.RetryPolicy {
	p := locking.DefaultRetryPolicy().Within(w.cfg.lockWait) // bounded by the wait, not a count
	// Waits of at most 4 s, so a lock freed or a dead transaction expired
	// is taken within 4 s, not after a wait grown to a minute.
	p.Max = 4 * time.Second
	p.ContentionWait = w.cfg.contention
	p.AttemptTimeout = w.cfg.reqTimeout
	return p
}

// leaseErr adds the lease's loss to a failure it caused.
func (j *job) leaseErr(err error) error {
	lost := j.lease.Err()
	if lost == nil || errors.Is(err, ErrFencedOut) {
		return err
	}
	also := fmt.Errorf("%w: %w", ErrLockLost, lost)
	if e, ok := err.(*Error); ok && e.Err != nil {
		return &Error{ID: e.ID, Err: fmt.Errorf("%w (%w)", e.Err, also)}
	}
	return fmt.Errorf("%w (%w)", err, also)
}

// graceful returns a context that does not end with ctx but grace after it,
// with a cause naming both, and a function that releases its resources.
func graceful(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	gctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	var mu sync.Mutex
	var timer *time.Timer
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		timer = time.AfterFunc(grace, func() {
			cancel(fmt.Errorf("grace period of %s over after %w", grace, context.Cause(ctx)))
		})
	})
	return gctx, func() {
		stop()
		mu.Lock()
		if timer != nil {
			timer.Stop()
		}
		mu.Unlock()
		cancel(context.Canceled)
	}
}
