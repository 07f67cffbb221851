package model

import "math"

// maxExactInt is 2^63, exactly a float64: a whole double d with
// -maxExactInt <= d < maxExactInt converts to int64 without loss.
const maxExactInt = 1 << 63

// IntegerValue returns the int64 that Firestore compares equal to the
// double f, when there is one: f is whole and in int64's range, so the
// conversion is exact (39.0 is 39, -0.0 is 0). A double beyond 2^53 is
// whole and equals exactly one integer — 2^53 equals 9007199254740992,
// never 9007199254740993 — as Firestore compares them; the answer is never
// found by converting an integer to a double.
func IntegerValue(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < -maxExactInt || f >= maxExactInt {
		return 0, false // fractional, NaN, infinite or beyond int64
	}
	return int64(f), true
}

// holdsWholeDouble reports whether canonical value v holds, at any depth,
// a double equal to an integer (IntegerValue). The lazy reader finds the
// same in the walk that checks the data (valueWalk.wholeDouble).
func holdsWholeDouble(v any) bool {
	switch x := v.(type) {
	case float64:
		_, ok := IntegerValue(x)
		return ok
	case map[string]any:
		for _, e := range x {
			if holdsWholeDouble(e) {
				return true
			}
		}
	case []any:
		for _, e := range x {
			if holdsWholeDouble(e) {
				return true
			}
		}
	}
	return false
}
