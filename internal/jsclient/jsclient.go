// Package jsclient stores values the way the application's JavaScript
// Firestore client does, for tests that fabricate application-written
// snapshots.
package jsclient

import "math"

// Numbers is v as the application's client (@google-cloud/firestore)
// stores it: JavaScript has one number type, and the client sends a number
// that Number.isSafeInteger accepts as an integer, any other as a double.
// So 39.0 in the application's input is stored as the integer 39, and -0
// as the integer 0; a whole double beyond 2^53 stays a double. Maps and
// arrays are copied, with their numbers converted.
func Numbers(v any) any {
	const maxSafe = 1<<53 - 1
	switch x := v.(type) {
	case float64:
		if x == math.Trunc(x) && math.Abs(x) <= maxSafe {
			return int64(x)
		}
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Numbers(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Numbers(e)
		}
		return out
	}
	return v
}
