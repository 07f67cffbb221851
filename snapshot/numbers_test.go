package snapshot

import (
	"math"
	"testing"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// firestoreEqual reports whether a and b are equal as Repair and Verify
// compare data: by the content hashes of their normal forms.
func firestoreEqual(t *testing.T, a, b any) bool {
	t.Helper()
	ha, err := numbersHash(a, "")
	if err != nil {
		t.Fatal(err)
	}
	hb, err := numbersHash(b, "")
	if err != nil {
		t.Fatal(err)
	}
	if ha == "" { // nothing to normalise: the exact hash
		ha = mustHash(t, a)
	}
	if hb == "" {
		hb = mustHash(t, b)
	}
	return ha == hb
}

func mustHash(t *testing.T, v any) string {
	t.Helper()
	h, err := layout.ContentHash(v)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Numbers compare as Firestore compares them: by value, an integer equal
// to a double exactly when the double is whole and its integer is that
// integer — computed exactly, not by converting the integer to a double.
func TestNumbersCompareAsFirestore(t *testing.T) {
	t.Parallel()
	negZero := math.Copysign(0, -1)
	cases := []struct {
		name  string
		a, b  any
		equal bool
	}{
		{"int 39, double 39.0", int64(39), 39.0, true},
		{"int 0, double -0.0", int64(0), negZero, true},
		{"double 0.0, double -0.0", 0.0, negZero, true},
		{"int -7, double -7.0", int64(-7), -7.0, true},
		{"int 2^53, double 2^53", int64(two53), float64(two53), true},
		{"int 2^53+2, double 2^53+2", int64(two53 + 2), float64(two53 + 2), true},
		{"int -2^63, double -2^63", int64(math.MinInt64), float64(-two63), true},
		{"int 39, double 39.5", int64(39), 39.5, false},
		{"double 39.0, double 39.5", 39.0, 39.5, false},
		{`string "39", int 39`, "39", int64(39), false},
		{`string "39", double 39.0`, "39", 39.0, false},
		{"int 2^53+1, double 2^53", int64(two53 + 1), float64(two53), false},
		{"int max, double 2^63", int64(math.MaxInt64), float64(two63), false},
		{"int 1, bool true", int64(1), true, false},
		{"int 0, null", int64(0), nil, false},
		{"nested: whole doubles deep in maps and arrays",
			map[string]any{"a": []any{1.0, map[string]any{"b": negZero, "c": []any{2.5, "x"}}}, "d": 3.0},
			map[string]any{"a": []any{int64(1), map[string]any{"b": int64(0), "c": []any{2.5, "x"}}}, "d": int64(3)}, true},
		{"nested: one real difference deep down",
			map[string]any{"a": []any{1.0, map[string]any{"b": 2.0}}},
			map[string]any{"a": []any{int64(1), map[string]any{"b": 2.5}}}, false},
		{"nested: string in an array",
			[]any{1.0, "2"}, []any{int64(1), int64(2)}, false},
	}
	for _, c := range cases {
		if got := firestoreEqual(t, c.a, c.b); got != c.equal {
			t.Errorf("%s: equal %v, want %v", c.name, got, c.equal)
		}
		if got := firestoreEqual(t, c.b, c.a); got != c.equal {
			t.Errorf("%s (swapped): equal %v, want %v", c.name, got, c.equal)
		}
	}
}

// normalNumbers leaves its argument as it was, and a value with no number
// to change is its own normal form: its hash is the exact one.
func TestNormalNumbersCopiesOnWrite(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a": []any{1.0, 2.5}, "b": map[string]any{"c": math.Copysign(0, -1)}, "s": "x"}
	before := mustHash(t, in)
	n, changed := normalNumbers(in)
	if !changed {
		t.Fatal("changed false for whole doubles")
	}
	if after := mustHash(t, in); after != before {
		t.Error("normalNumbers changed its argument")
	}
	if got := n.(map[string]any)["a"].([]any)[0]; got != int64(1) {
		t.Errorf("normal form of 1.0 is %T(%v), want int64(1)", got, got)
	}
	plain := map[string]any{"a": []any{int64(1), 2.5, math.MaxFloat64, float64(two63)}, "s": "x"}
	if h, err := numbersHash(plain, "exact"); err != nil || h != "exact" {
		t.Errorf("numbersHash of a value with nothing to change = %q, %v; want the exact hash", h, err)
	}
}

// Whatever normalisation does for comparing, the content hash of what
// snapwriter writes stays the hash of the bytes: 39.0 and 39 hash apart.
func TestContentHashStaysExact(t *testing.T) {
	t.Parallel()
	if mustHash(t, map[string]any{"n": 39.0}) == mustHash(t, map[string]any{"n": int64(39)}) {
		t.Error("contentHash of 39.0 equals that of 39")
	}
	d := model.NewDistrict(model.Object{"districtId": "1", "asOfDate": day, "n": 39.0})
	h, err := layout.DataHash(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := mustHash(t, memData(d)); h != want {
		t.Errorf("dataHash %s, want the exact hash %s", h, want)
	}
}
