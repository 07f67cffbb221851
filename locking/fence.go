package locking

import (
	"fmt"
	"strconv"
	"time"
)

// Fence limits (DESIGN §4, as SyncGuard's): a fence above MaxFence is
// refused with Internal; one above FenceWarnThreshold deserves an operator's
// attention (rotate the key namespace) long before the 15 digits run out.
const (
	MaxFence           = 900_000_000_000_000
	FenceWarnThreshold = 90_000_000_000_000
)

const (
	fenceDigits   = 15
	fenceWarnText = "090000000000000" // FenceWarnThreshold as a fence
)

// FormatFence renders n as a fence: 15 digits, zero-padded, so that fences
// order as strings. n over MaxFence is an Internal error (overflow).
func FormatFence(n uint64) (string, error) {
	if n > MaxFence {
		return "", &Error{Code: Internal, Op: "fence",
			Err: fmt.Errorf("fence counter %d is over the maximum %d", n, uint64(MaxFence))}
	}
	return fmt.Sprintf("%0*d", fenceDigits, n), nil
}

// ParseFence reads a stored fence, for backends incrementing a counter. Only
// the 15-digit form is accepted: a counter of another width would not order
// as a string against ours.
func ParseFence(s string) (uint64, error) {
	bad := len(s) != fenceDigits
	for i := 0; !bad && i < len(s); i++ {
		bad = s[i] < '0' || s[i] > '9'
	}
	if bad {
		return 0, &Error{Code: Internal, Op: "fence", Err: fmt.Errorf("stored fence %q is not %d digits", s, fenceDigits)}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &Error{Code: Internal, Op: "fence", Err: err}
	}
	return n, nil
}

// FenceNeedsWarning reports whether fence is past FenceWarnThreshold.
func FenceNeedsWarning(fence string) bool {
	return len(fence) == fenceDigits && fence > fenceWarnText
}

// TimeTolerance is the slack the liveness predicate allows for clock skew
// between clients (or a client and the server). It is not configurable:
// every backend and every client must agree on what "live" means.
const TimeTolerance = time.Second

// IsLive is the one liveness predicate (the spec's isLive with
// TIME_TOLERANCE_MS): a lock expiring at expiresAtMs is still held at nowMs,
// both Unix milliseconds, until TimeTolerance after its expiry, i.e. while
// expiresAtMs > nowMs − 1000.
func IsLive(expiresAtMs, nowMs int64) bool {
	return expiresAtMs > nowMs-TimeTolerance.Milliseconds()
}
