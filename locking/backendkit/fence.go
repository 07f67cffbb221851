package backendkit

import (
	"fmt"
	"strconv"

	"github.com/snapwriter/snapwriter/locking"
)

// Fence limits: a fence above MaxFence is refused with Internal; one above
// FenceWarnThreshold deserves an operator's attention (rotate the key
// namespace) long before the 15 digits run out.
const (
	MaxFence           = 900_000_000_000_000
	FenceWarnThreshold = 90_000_000_000_000
)

const (
	fenceDigits   = 15
	fenceWarnText = "090000000000000" // FenceWarnThreshold as a fence
)

// FormatFence renders counter value n as a fence: 15 digits, zero-padded,
// so that fences order as strings. n over MaxFence is an Internal error
// (overflow).
func FormatFence(n uint64) (string, error) {
	if n > MaxFence {
		return "", &locking.Error{Code: locking.Internal, Op: "fence",
			Err: fmt.Errorf("fence counter %d is over the maximum %d", n, uint64(MaxFence))}
	}
	return fmt.Sprintf("%0*d", fenceDigits, n), nil
}

// ParseFence reads a stored fence back into its counter value, for
// backends that increment one. Only the 15-digit form is accepted: a
// counter of another width would not order as a string against ours.
func ParseFence(s string) (uint64, error) {
	bad := len(s) != fenceDigits
	for i := 0; !bad && i < len(s); i++ {
		bad = s[i] < '0' || s[i] > '9'
	}
	if bad {
		return 0, &locking.Error{Code: locking.Internal, Op: "fence", Err: fmt.Errorf("stored fence %q is not %d digits", s, fenceDigits)}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, &locking.Error{Code: locking.Internal, Op: "fence", Err: err}
	}
	return n, nil
}

// FenceNeedsWarning reports whether fence is past FenceWarnThreshold, so
// a backend can warn while there are still years of headroom.
func FenceNeedsWarning(fence string) bool {
	return len(fence) == fenceDigits && fence > fenceWarnText
}
