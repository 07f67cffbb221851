package locking

import (
	"context"
	"fmt"
	"time"
)

// Backend is a lock storage: single-attempt operations on one lock each,
// which Acquire, Do and Lease build on. Implementations validate keys
// (NormalizeAndValidateKey), lockIds (ValidateLockID) and TTLs
// (ValidateTTL) before any I/O, decide liveness only with IsLive, verify
// ownership explicitly on release and extend, and never retry themselves
// (Acquire does); locking/backendkit has the shared pieces. A lock held by
// someone else is a result (OK false), not an error; failures are *Error
// values.
//
// Release and Extend are idempotent and safe to call with a lockId that is
// not (or no longer) held: they report false and change nothing.
type Backend interface {
	// Acquire takes key for ttl if no live lock holds it, returning a new
	// lockId and, on fencing backends, a fence larger than any before for
	// key. OK false means the lock is held.
	Acquire(ctx context.Context, key string, ttl time.Duration) (AcquireResult, error)
	// Release frees the lock lockID names. It returns false, changing
	// nothing, when that lock is not found, expired, or not lockID's.
	Release(ctx context.Context, lockID string) (bool, error)
	// Extend sets the live lock lockID names to expire at now+ttl (it
	// replaces the remaining time, it does not add to it). OK is false when
	// the lock is not found or not live: an expired lock is never revived.
	Extend(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, error)
	// IsLocked reports whether a live lock holds key. It only reads.
	IsLocked(ctx context.Context, key string) (bool, error)
	// LookupKey describes the live lock on key, sanitized, or returns nil,
	// nil when there is none. It only reads.
	LookupKey(ctx context.Context, key string) (*LockInfo, error)
	// LookupLockID describes the live lock lockID names, sanitized, or
	// returns nil, nil. It only reads, and is for diagnostics: never gate a
	// mutation on it.
	LookupLockID(ctx context.Context, lockID string) (*LockInfo, error)
	// Capabilities describes the backend.
	Capabilities() Capabilities
}

// KeyedBackend is implemented by backends that can release or extend a
// lock faster when they are also told its key, as a Lease always is: the
// backend reads the key's lock document directly and verifies the lockId
// on it, instead of finding the document by a lockId query. The results
// and guarantees are Release's and Extend's: a lockId that is not the
// live lock's on key changes nothing and returns false.
type KeyedBackend interface {
	// ReleaseKey is Release of the lock lockID names on key.
	ReleaseKey(ctx context.Context, key, lockID string) (bool, error)
	// ExtendKey is Extend of the lock lockID names on key.
	ExtendKey(ctx context.Context, key, lockID string, ttl time.Duration) (ExtendResult, error)
}

// Capabilities describes what a backend offers.
type Capabilities struct {
	Backend         string // "firestore", "postgres", …
	SupportsFencing bool   // AcquireResult.Fence and LockInfo.Fence are set
	TimeAuthority   string // "client" or "server": whose clock decides expiry
}

// AcquireResult is the outcome of Backend.Acquire.
type AcquireResult struct {
	OK        bool      // false: another live lock holds the key
	LockID    string    // set when OK; the handle for Release and Extend
	ExpiresAt time.Time // set when OK, by the backend's time authority
	Fence     string    // set when OK on a fencing backend: 15 digits
}

// ExtendResult is the outcome of Backend.Extend.
type ExtendResult struct {
	OK        bool      // false: the lock was not found or not live
	ExpiresAt time.Time // the new expiry, when OK
}

// LockInfo describes a live lock without revealing its key or lockId, so it
// can be logged.
type LockInfo struct {
	KeyHash    string // HashKey of the key
	LockIDHash string // HashKey of the lockId
	ExpiresAt  time.Time
	AcquiredAt time.Time
	Fence      string // set on fencing backends
}

// ValidateTTL fails with InvalidArgument unless ttl is a positive whole
// number of milliseconds, the unit every backend stores.
func ValidateTTL(ttl time.Duration) error { return validateTTL("ttl", ttl) }

// validateTTL is ValidateTTL with its error named op.
func validateTTL(op string, ttl time.Duration) error {
	if ttl < time.Millisecond || ttl%time.Millisecond != 0 {
		return &Error{Code: InvalidArgument, Op: op,
			Err: fmt.Errorf("ttl %s is not a positive whole number of milliseconds", ttl)}
	}
	return nil
}
