package locking

import (
	"fmt"
	"strconv"
	"time"
)

// Fence limits: a fence above MaxFence is refused (Internal), one above
// FenceWarnThreshold should be reported, long before the 15 digits run out.
const (
	MaxFence           = 900_000_000_000_000
	FenceWarnThreshold = 90_000_000_000_000
	fenceDigits        = 15
)

// FormatFence renders n as a fence: 15 digits, zero-padded, so fences order
// as strings. n over MaxFence is an Internal error.
func FormatFence(n uint64) (string, error) {
	if n > MaxFence {
		return "", &Error{Code: Internal, Op: "fence", Err: fmt.Errorf("fence counter %d is over the maximum %d", n, uint64(MaxFence))}
	}
	return fmt.Sprintf("%0*d", fenceDigits, n), nil
}

// ParseFence reads a stored fence; for backends incrementing a counter.
func ParseFence(s string) (uint64, error) {
	if len(s) != fenceDigits {
		return 0, &Error{Code: Internal, Op: "fence", Err: fmt.Errorf("stored fence %q is not %d digits", s, fenceDigits)}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &Error{Code: Internal, Op: "fence", Err: fmt.Errorf("stored fence %q: %w", s, err)}
	}
	return n, nil
}

// FenceNeedsWarning reports whether fence is past FenceWarnThreshold.
func FenceNeedsWarning(fence string) bool {
	w, _ := FormatFence(FenceWarnThreshold)
	return len(fence) == fenceDigits && fence > w
}

// TimeTolerance is the slack the liveness predicate allows for clock skew
// between clients (or a client and the server). It is not configurable: all
// backends must agree on what "live" means.
const TimeTolerance = time.Second

// IsLive is the one liveness predicate: a lock expiring at expiresAtMs is
// still held at nowMs (both Unix milliseconds) until TimeTolerance after
// its expiry.
func IsLive(expiresAtMs, nowMs int64) bool {
	return expiresAtMs > nowMs-TimeTolerance.Milliseconds()
}
