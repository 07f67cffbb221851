package locking

import (
	"context"
	"time"
)

// Backend is a lock storage. Implementations validate keys, lockIds and
// TTLs before any I/O, use IsLive for every liveness decision, verify
// ownership explicitly on release and extend, and never retry contention
// themselves (Acquire does). A lock held by someone else is a result
// (OK false), not an error.
type Backend interface {
	// Acquire takes key for ttl if no live lock holds it.
	Acquire(ctx context.Context, key string, ttl time.Duration) (AcquireResult, error)
	// Release frees the lock lockID names; false if it is not live or
	// not found.
	Release(ctx context.Context, lockID string) (bool, error)
	// Extend sets a live lock's expiry to now+ttl; OK false if the lock is
	// not live or not found. An expired lock is never revived.
	Extend(ctx context.Context, lockID string, ttl time.Duration) (ExtendResult, error)
	// IsLocked reports whether a live lock holds key.
	IsLocked(ctx context.Context, key string) (bool, error)
	// LookupKey describes the live lock on key, or returns nil.
	LookupKey(ctx context.Context, key string) (*LockInfo, error)
	// LookupLockID describes the live lock lockID names, or returns nil.
	LookupLockID(ctx context.Context, lockID string) (*LockInfo, error)
	// Capabilities describes the backend.
	Capabilities() Capabilities
}

// Capabilities describes what a backend offers.
type Capabilities struct {
	Backend         string // "firestore", "postgres", …
	SupportsFencing bool   // AcquireResult.Fence is set
	TimeAuthority   string // "client" or "server": whose clock decides expiry
}

// AcquireResult is the outcome of Backend.Acquire.
type AcquireResult struct {
	OK        bool
	LockID    string    // set when OK
	ExpiresAt time.Time // set when OK
	Fence     string    // set when OK and the backend supports fencing
}

// ExtendResult is the outcome of Backend.Extend.
type ExtendResult struct {
	OK        bool
	ExpiresAt time.Time // the new expiry, when OK
}

// LockInfo describes a lock without revealing its key or lockId.
type LockInfo struct {
	KeyHash    string
	LockIDHash string
	ExpiresAt  time.Time
	AcquiredAt time.Time
	Fence      string
}

// ValidateTTL reports an InvalidArgument error unless ttl is a positive
// whole number of milliseconds.
func ValidateTTL(ttl time.Duration) error {
	if ttl < time.Millisecond || ttl%time.Millisecond != 0 {
		return &Error{Code: InvalidArgument, Op: "ttl", Err: errorString("ttl " + ttl.String() + " is not a positive whole number of milliseconds")}
	}
	return nil
}

type errorString string

func (e errorString) Error() string { return string(e) }
