package locking

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Status describes the lock on one key for an operator, by hashes unless
// read with GetStatusRaw. It is shaped for JSON output: the lock's fields
// are set, and omitted, only when Locked.
type Status struct {
	Locked      bool    `json:"locked"`
	KeyHash     string  `json:"keyHash"` // HashKey of the normalised key
	LockIDHash  string  `json:"lockIdHash,omitempty"`
	Fence       string  `json:"fence,omitempty"`
	AcquiredAt  *string `json:"acquiredAt,omitempty"`  // RFC 3339, UTC, to the millisecond
	ExpiresAt   *string `json:"expiresAt,omitempty"`   // as AcquiredAt
	RemainingMs *int64  `json:"remainingMs,omitempty"` // until ExpiresAt, never negative
	Key         string  `json:"key,omitempty"`         // raw, GetStatusRaw only: never log
	LockID      string  `json:"lockId,omitempty"`      // raw, GetStatusRaw only: never log
}

// Remaining is the time left until the lock expires, truncated to the
// millisecond; 0 when the key is not locked. A lock stays live for
// TimeTolerance after its expiry, so Remaining is 0 during that time.
func (s Status) Remaining() time.Duration {
	if s.RemainingMs == nil {
		return 0
	}
	return time.Duration(*s.RemainingMs) * time.Millisecond
}

// GetStatus describes the live lock on key, or says that key is not
// locked. It only reads, and fails with InvalidArgument, before any I/O,
// for an invalid key.
func GetStatus(ctx context.Context, b Backend, key string) (Status, error) {
	return getStatus(ctx, b, key, false)
}

// GetStatusRaw is GetStatus with the raw key and lockId of a live lock,
// for debugging only: never log the result's Key or LockID. It fails with
// ErrDebugUnsupported when b does not implement DebugLookuper.
func GetStatusRaw(ctx context.Context, b Backend, key string) (Status, error) {
	return getStatus(ctx, b, key, true)
}

// getStatus is GetStatus, with the raw values when raw.
func getStatus(ctx context.Context, b Backend, key string, raw bool) (Status, error) {
	nkey, err := NormalizeAndValidateKey(key)
	if err != nil {
		return Status{}, err
	}
	s := Status{KeyHash: HashKey(nkey)}
	var info *LockInfo
	if raw {
		var d *LockInfoDebug
		if d, err = GetByKeyRaw(ctx, b, key); d != nil {
			info, s.Key, s.LockID = &d.LockInfo, d.Key, d.LockID
		}
	} else {
		info, err = GetByKey(ctx, b, key)
	}
	if err != nil {
		return Status{}, fmt.Errorf("reading the lock (key hash %s): %w", s.KeyHash, err)
	}
	if info == nil {
		return s, nil
	}
	remaining := max(time.Until(info.ExpiresAt), 0).Truncate(time.Millisecond).Milliseconds()
	acquired, expires := formatTime(info.AcquiredAt), formatTime(info.ExpiresAt)
	s.Locked, s.KeyHash, s.LockIDHash, s.Fence = true, info.KeyHash, info.LockIDHash, info.Fence
	s.AcquiredAt, s.ExpiresAt, s.RemainingMs = &acquired, &expires, &remaining
	return s, nil
}

// formatTime is t as Status shows it: UTC, to the millisecond, so that
// lines of times align.
func formatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// ReasonNotHeld is ForceRelease's Reason when the backend cannot say why
// the lockId names no live lock (it does not implement ReasonReporter).
const ReasonNotHeld Reason = "not-held"

// ErrNotReleased is returned by ForceRelease when no live lock carries
// the lockId: nothing was changed, and the ReleaseResult says why.
var ErrNotReleased = errors.New("locking: nothing released")

// ReleaseResult is the outcome of ForceRelease, by hashes only, so it can
// be logged. It is shaped for JSON output.
type ReleaseResult struct {
	Released   bool   `json:"released"`
	LockIDHash string `json:"lockIdHash"`
	// Reason says why nothing was released: ReasonNotFound, ReasonExpired
	// or ReasonNotHeld. Empty when Released.
	Reason Reason `json:"reason,omitempty"`
	// KeyHash and Fence describe the released lock, when the read before
	// the release found it.
	KeyHash string `json:"keyHash,omitempty"`
	Fence   string `json:"fence,omitempty"`
}

// ForceRelease releases the live lock lockID names on anyone's behalf, as
// its holder would: b.Release, which changes nothing unless that lock is
// still live and still carries lockID. It first reads the lock, only to
// describe it in the result. When nothing is released it returns the
// result, with its Reason, and an error matching ErrNotReleased; other
// errors wrap b's.
//
// The fence counter stays: the next holder gets a larger fence, so a
// holder that still believes it holds the lock is fenced out.
func ForceRelease(ctx context.Context, b Backend, lockID string) (ReleaseResult, error) {
	idHash := HashKey(lockID)
	// Diagnostic only: the release below re-checks everything itself.
	info, err := GetByID(ctx, b, lockID)
	if err != nil {
		return ReleaseResult{}, fmt.Errorf("looking up lock %s: %w", idHash, err)
	}
	r := ReleaseResult{LockIDHash: idHash}
	if rr, ok := b.(ReasonReporter); ok {
		r.Released, r.Reason, err = rr.ReleaseWithReason(ctx, lockID)
	} else {
		r.Released, err = b.Release(ctx, lockID)
	}
	switch {
	case err != nil:
		return ReleaseResult{}, fmt.Errorf("releasing lock %s: %w", idHash, err)
	case !r.Released:
		if r.Reason == "" {
			r.Reason = ReasonNotHeld
		}
		return r, fmt.Errorf("%w: lock %s is not held (%s)", ErrNotReleased, idHash, r.Reason)
	}
	r.Reason = ""
	if info != nil {
		r.KeyHash, r.Fence = info.KeyHash, info.Fence
	}
	return r, nil
}
