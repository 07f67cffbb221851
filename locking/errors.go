package locking

import (
	"errors"
	"fmt"
)

// Code classifies a lock error, as the lock interface spec names them.
type Code int

// The error codes of the lock contract.
const (
	ServiceUnavailable Code = iota + 1 // storage unreachable or overloaded; retry later
	AuthFailed                         // credentials refused
	InvalidArgument                    // bad key, lockId, TTL or configuration
	RateLimited                        // storage quota exhausted
	NetworkTimeout                     // a call to storage timed out
	AcquisitionTimeout                 // the lock stayed held for the whole wait
	Aborted                            // the caller's context ended
	Internal                           // anything else, including fence overflow
)

var codeNames = [...]string{"", "ServiceUnavailable", "AuthFailed", "InvalidArgument", "RateLimited",
	"NetworkTimeout", "AcquisitionTimeout", "Aborted", "Internal"}

func (c Code) String() string {
	if c > 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", int(c))
}

// Error is the error every lock operation returns. Its message names the
// key and lockId only by hash, so it can be logged.
type Error struct {
	Code       Code
	Op         string // "acquire", "release", …
	KeyHash    string // HashKey of the key, when known
	LockIDHash string // HashKey of the lockId, when known
	Err        error  // the cause, if any
}

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

// Is matches the sentinel of the same code, so errors.Is(err,
// ErrAcquisitionTimeout) works on any acquisition timeout.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Op == "" && t.Err == nil && t.KeyHash == "" && t.LockIDHash == "" && t.Code == e.Code
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

// ErrLeaseLost means a held lock was lost: it expired or was taken over
// before the lease could extend it. Work done under it is no longer
// exclusive.
var ErrLeaseLost = errors.New("locking: lease lost")

// Errorf builds an *Error; for backends.
func Errorf(code Code, op string, format string, args ...any) *Error {
	return &Error{Code: code, Op: op, Err: fmt.Errorf(format, args...)}
}
