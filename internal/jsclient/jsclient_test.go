package jsclient

import (
	"math"
	"reflect"
	"testing"
)

func TestNumbers(t *testing.T) {
	in := map[string]any{"whole": 39.0, "frac": 39.5, "negZero": math.Copysign(0, -1), "big": float64(1 << 60),
		"s": "39", "list": []any{1.0, 2.5}}
	want := map[string]any{"whole": int64(39), "frac": 39.5, "negZero": int64(0), "big": float64(1 << 60),
		"s": "39", "list": []any{int64(1), 2.5}}
	if got := Numbers(in); !reflect.DeepEqual(got, want) {
		t.Fatalf("Numbers(%v) = %v; want %v", in, got, want)
	}
	if in["whole"] != 39.0 {
		t.Error("Numbers changed its argument")
	}
}
