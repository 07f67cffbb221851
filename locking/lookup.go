package locking

import (
	"context"
	"errors"
	"fmt"
)

// LockInfoDebug is LockInfo plus the raw key and lockId, for debugging
// only. Never log it or put it in an error: the key may carry user data,
// and the lockId is the capability to release the lock. Log the embedded
// LockInfo (hashes only) instead.
type LockInfoDebug struct {
	LockInfo
	Key    string // the caller's key, raw: debugging only, never log
	LockID string // the lock's id, raw: debugging only, never log
}

// DebugLookuper is implemented by backends that can return the raw key
// and lockId of a live lock, for debugging. It is separate from Backend so
// the core interface stays small; use GetByKeyRaw, GetByIDRaw or
// LookupDebug rather than calling it directly. Both methods only read,
// validate their input before any I/O as LookupKey and LookupLockID do,
// and return nil, nil when there is no live lock.
type DebugLookuper interface {
	// LookupKeyDebug is LookupKey with the raw key and lockId.
	LookupKeyDebug(ctx context.Context, key string) (*LockInfoDebug, error)
	// LookupLockIDDebug is LookupLockID with the raw key and lockId.
	LookupLockIDDebug(ctx context.Context, lockID string) (*LockInfoDebug, error)
}

// ErrDebugUnsupported is returned by the raw lookups when the backend does
// not implement DebugLookuper. It wraps errors.ErrUnsupported.
var ErrDebugUnsupported = fmt.Errorf("locking: backend does not support raw lookups: %w", errors.ErrUnsupported)

// Owns reports whether lockID names a live lock. It only reads. It is for
// diagnostics: never gate a release or extend on it, as the lock may
// expire between the check and the mutation; release and extend verify
// ownership themselves.
func Owns(ctx context.Context, b Backend, lockID string) (bool, error) {
	info, err := b.LookupLockID(ctx, lockID)
	if err != nil {
		return false, err
	}
	return info != nil, nil
}

// GetByKey describes the live lock on key, sanitized, or returns nil, nil
// when there is none (the same as b.LookupKey).
func GetByKey(ctx context.Context, b Backend, key string) (*LockInfo, error) {
	return b.LookupKey(ctx, key)
}

// GetByID describes the live lock lockID names, sanitized, or returns nil,
// nil when there is none (the same as b.LookupLockID).
func GetByID(ctx context.Context, b Backend, lockID string) (*LockInfo, error) {
	return b.LookupLockID(ctx, lockID)
}

// GetByKeyRaw is GetByKey with the raw key and lockId, for debugging only:
// never log the result's Key or LockID. It fails with ErrDebugUnsupported
// when b does not implement DebugLookuper.
func GetByKeyRaw(ctx context.Context, b Backend, key string) (*LockInfoDebug, error) {
	d, ok := b.(DebugLookuper)
	if !ok {
		return nil, ErrDebugUnsupported
	}
	return d.LookupKeyDebug(ctx, key)
}

// GetByIDRaw is GetByID with the raw key and lockId, for debugging only:
// never log the result's Key or LockID. It fails with ErrDebugUnsupported
// when b does not implement DebugLookuper.
func GetByIDRaw(ctx context.Context, b Backend, lockID string) (*LockInfoDebug, error) {
	d, ok := b.(DebugLookuper)
	if !ok {
		return nil, ErrDebugUnsupported
	}
	return d.LookupLockIDDebug(ctx, lockID)
}

// LookupQuery selects a lock for LookupDebug: set exactly one of Key and
// LockID.
type LookupQuery struct {
	Key    string
	LockID string
}

// LookupDebug is GetByKeyRaw when q.Key is set, GetByIDRaw when q.LockID
// is: one entry point for tools that take either. The result is for
// debugging only: never log its Key or LockID. It fails with
// InvalidArgument, before any I/O, unless exactly one of the two is set.
func LookupDebug(ctx context.Context, b Backend, q LookupQuery) (*LockInfoDebug, error) {
	switch {
	case q.Key != "" && q.LockID != "":
		return nil, &Error{Code: InvalidArgument, Op: "lookup", Err: errors.New("lookup query sets both key and lockId")}
	case q.Key != "":
		return GetByKeyRaw(ctx, b, q.Key)
	case q.LockID != "":
		return GetByIDRaw(ctx, b, q.LockID)
	}
	return nil, &Error{Code: InvalidArgument, Op: "lookup", Err: errors.New("lookup query sets neither key nor lockId")}
}
