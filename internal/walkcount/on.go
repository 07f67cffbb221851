//go:build walkcount

package walkcount

import "sync/atomic"

// Enabled reports whether this build counts.
const Enabled = true

// counts is the test build's only state: one counter per Kind.
var counts [kinds]atomic.Int64

// Add counts one k.
func Add(k Kind) { counts[k].Add(1) }

// Count is how many k were counted since Reset.
func Count(k Kind) int64 { return counts[k].Load() }

// Reset sets every count to 0.
func Reset() {
	for i := range counts {
		counts[i].Store(0)
	}
}
