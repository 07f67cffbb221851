package backendkit

import (
	"context"
	"errors"

	"github.com/snapwriter/snapwriter/locking"
)

// OpErrors builds the errors of one backend operation, so every backend
// reports them alike: with the operation, the lock's key and lockId hashes,
// the backend's own classification, and the raw key, lockId and storage ids
// scrubbed from the message (Scrub).
type OpErrors struct {
	// Op names the operation ("acquire", …); KeyHash and LockIDHash name
	// the lock, by locking.HashKey, when known.
	Op, KeyHash, LockIDHash string
	// Secrets are the raw strings no message may carry.
	Secrets []string
	// Classify maps a storage error to a Code; nil maps everything to
	// Internal.
	Classify func(ctx context.Context, err error) locking.Code
}

// Ended reports a context that ended before any I/O: Aborted, or
// NetworkTimeout for a deadline.
func (e *OpErrors) Ended(ctx context.Context) error {
	code := locking.Aborted
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = locking.NetworkTimeout
	}
	return &locking.Error{Code: code, Op: e.Op, KeyHash: e.KeyHash, LockIDHash: e.LockIDHash, Err: context.Cause(ctx)}
}

// Map turns err into a *locking.Error. One already a *locking.Error (the
// backend's own, already classified and clean) gets this operation's name
// and hashes; any other is classified, and scrubbed while errors.Is/As
// still reach it (a gRPC status, a *pgconn.PgError).
func (e *OpErrors) Map(ctx context.Context, err error) error {
	var le *locking.Error
	if errors.As(err, &le) {
		c := *le
		c.Op = e.Op
		if c.KeyHash == "" {
			c.KeyHash = e.KeyHash
		}
		if c.LockIDHash == "" {
			c.LockIDHash = e.LockIDHash
		}
		return &c
	}
	code := locking.Internal
	if e.Classify != nil {
		code = e.Classify(ctx, err)
	}
	return &locking.Error{Code: code, Op: e.Op, KeyHash: e.KeyHash, LockIDHash: e.LockIDHash, Err: Scrub(err, e.Secrets...)}
}

// WithOp returns err with Op set when it is a *locking.Error, else err
// itself, so a validation error names the operation the caller made.
func WithOp(err error, op string) error {
	var le *locking.Error
	if errors.As(err, &le) {
		c := *le
		c.Op = op
		return &c
	}
	return err
}
