package locking

import (
	"errors"
	"strconv"
)

// Code classifies a lock error, so callers can tell what to do about it
// (retry, fix the input, give up) whatever the backend.
type Code int

// The codes, the same on every backend.
const (
	ServiceUnavailable Code = iota + 1 // storage unreachable, overloaded or contended; retry later
	AuthFailed                         // credentials refused
	InvalidArgument                    // bad key, lockId, TTL, option or configuration
	RateLimited                        // storage quota exhausted
	NetworkTimeout                     // a call to storage timed out
	AcquisitionTimeout                 // the lock stayed held for the whole wait (Acquire only)
	Aborted                            // the caller's context was cancelled
	Internal                           // anything else, including fence overflow and duplicate lockIds
)

// String returns the code's name, as SyncGuard's TypeScript LockError
// spells it.
func (c Code) String() string {
	switch c {
	case ServiceUnavailable:
		return "ServiceUnavailable"
	case AuthFailed:
		return "AuthFailed"
	case InvalidArgument:
		return "InvalidArgument"
	case RateLimited:
		return "RateLimited"
	case NetworkTimeout:
		return "NetworkTimeout"
	case AcquisitionTimeout:
		return "AcquisitionTimeout"
	case Aborted:
		return "Aborted"
	case Internal:
		return "Internal"
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Error is the error lock operations return. It names the key and lockId
// only by HashKey, never raw, so it can be logged: a key may carry user
// data, and a lockId is a capability to release someone's lock.
type Error struct {
	Code       Code
	Op         string // "acquire", "release", "extend", …
	KeyHash    string // HashKey of the key, when known
	LockIDHash string // HashKey of the lockId, when known
	Err        error  // the cause, if any
}

// Error renders as "locking: <op>: <Code> (key <hash>): <cause>".
func (e *Error) Error() string {
	s := "locking: "
	if e.Op != "" {
		s += e.Op + ": "
	}
	s += e.Code.String()
	if e.KeyHash != "" {
		s += " (key " + e.KeyHash + ")"
	}
	if e.LockIDHash != "" {
		s += " (lockId " + e.LockIDHash + ")"
	}
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is a sentinel (an *Error without a cause) of
// the same code, so errors.Is(err, ErrAcquisitionTimeout) matches any
// acquisition timeout whatever its Op or hashes.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Err == nil && t.Code == e.Code
}

// Sentinels for errors.Is, one per code. They are never modified.
var (
	ErrServiceUnavailable = &Error{Code: ServiceUnavailable}
	ErrAuthFailed         = &Error{Code: AuthFailed}
	ErrInvalidArgument    = &Error{Code: InvalidArgument}
	ErrRateLimited        = &Error{Code: RateLimited}
	ErrNetworkTimeout     = &Error{Code: NetworkTimeout}
	ErrAcquisitionTimeout = &Error{Code: AcquisitionTimeout}
	ErrAborted            = &Error{Code: Aborted}
	ErrInternal           = &Error{Code: Internal}
)

// ErrContended marks a backend failure caused by another transaction
// holding the lock's record: on Firestore, a transaction that died after
// reading it (a holder killed inside an extension) keeps it locked until
// Firestore expires it, 60 s later. It comes inside a ServiceUnavailable
// *Error; Acquire waits it out for RetryPolicy.ContentionWait.
var ErrContended = errors.New("locking: the lock's record is locked by another transaction")

// ErrLeaseLost means a held lock was lost: it expired or passed to someone
// else before the lease could extend it. Work done under it may not have
// been exclusive; only fences can tell.
var ErrLeaseLost = errors.New("locking: lease lost")

// ErrReleased is the cause (context.Cause) of a Lease.Context context that
// ended because the lease was released. Lease.Err stays nil after a clean
// release: it reports only losses.
var ErrReleased = errors.New("locking: lease released")
