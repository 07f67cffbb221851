package model

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// canonicalStrings are strings whose JSON encoding has a special case:
// every escape encoding/json writes, invalid UTF-8, the JavaScript line
// separators, HTML characters (not escaped), DEL and multi-byte runes.
var canonicalStrings = []string{
	"", "plain", `quote " and \ backslash`, "\b\f\n\r\t", "\x00\x01\x1f", "\x7f",
	"<a href='x'>&amp;</a>", "\u2028\u2029", "é – 😀", "bad \xff utf8", "\xed\xa0\x80",
	"trailing \xe2\x82", "Mem. Base", "% Club Growth",
}

// canonicalFloats are floats at encoding/json's format boundaries.
var canonicalFloats = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.5, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789012345678901.0,
	1e-9, 1.5e-10, 1e300, -1e300, math.MaxFloat64, math.SmallestNonzeroFloat64, 3.14159, 100, 2.5e21,
}

// randomValue builds a canonical tree of the given depth from r.
func randomValue(r *rand.Rand, depth int) any {
	k := r.IntN(9)
	if depth <= 0 && k >= 6 {
		k = r.IntN(6)
	}
	switch k {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return canonicalStrings[r.IntN(len(canonicalStrings))] + strings.Repeat("x", r.IntN(3))
	case 3:
		return r.Int64() - math.MaxInt64/2
	case 4:
		return canonicalFloats[r.IntN(len(canonicalFloats))]
	case 5:
		return (r.Float64() - 0.5) * math.Pow(10, float64(r.IntN(40)-20))
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(6) {
			m[canonicalStrings[r.IntN(len(canonicalStrings))]+string(rune('a'+r.IntN(26)))] = randomValue(r, depth-1)
		}
		return m
	default:
		if r.IntN(5) == 0 {
			return []string{canonicalStrings[r.IntN(len(canonicalStrings))], "b"}
		}
		a := []any{}
		for range r.IntN(5) {
			a = append(a, randomValue(r, depth-1))
		}
		return a
	}
}

// TestCanonicalEncoderMatchesReflect holds Marshal's own encoder to
// encoding/json's bytes (marshalReflect) on random trees and on the
// boundary cases, since those bytes are hashed into stored snapshots.
func TestCanonicalEncoderMatchesReflect(t *testing.T) {
	var vals []any
	for _, s := range canonicalStrings {
		vals = append(vals, s, map[string]any{s: s})
	}
	for _, f := range canonicalFloats {
		vals = append(vals, f, -f, []any{f})
	}
	vals = append(vals, []any(nil), map[string]any(nil), []string(nil), int(7), int64(math.MinInt64),
		Generate("2026-11-20", 3, 5), *Generate("2026-11-20", 2, 9), Generate("2026-11-20", 1, 2).Payload.Metadata)
	r := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		vals = append(vals, randomValue(r, 5))
	}
	for i, v := range vals {
		got, err := Marshal(v)
		if err != nil {
			t.Fatalf("value %d: Marshal: %v", i, err)
		}
		want, err := marshalReflect(v)
		if err != nil {
			t.Fatalf("value %d: marshalReflect: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d: Marshal wrote\n%s\nencoding/json writes\n%s", i, got, want)
		}
	}
}

// TestCanonicalEncoderErrors: what encoding/json refuses, Marshal refuses
// with the same error, and a type of the caller's is still written by
// encoding/json.
func TestCanonicalEncoderErrors(t *testing.T) {
	for _, v := range []any{math.NaN(), map[string]any{"a": []any{math.Inf(1)}}} {
		_, err := Marshal(v)
		_, want := marshalReflect(v)
		if err == nil || want == nil || err.Error() != want.Error() {
			t.Errorf("Marshal(%v) error %v, want %v", v, err, want)
		}
	}
	b, err := Marshal(map[string]any{"x": htmlish{A: "<"}})
	if err != nil || string(b) != `{"x":{"A":"\u003c","F":0,"M":null}}` {
		t.Errorf("Marshal of a foreign type = %s, %v", b, err)
	}
}

// One encoder reused from value to value, as the summarizing goroutines
// reuse theirs, writes what encoding/json does although it keeps each
// level's last sorted keys: maps of as many keys but others, of fewer and
// of more, and random trees in turn.
func TestCanonicalEncoderReusedMatchesReflect(t *testing.T) {
	vals := []any{
		map[string]any{"a": 1, "b": map[string]any{"x": 1, "y": 2}},
		map[string]any{"a": 1, "b": map[string]any{"x": 1, "y": 2}},
		map[string]any{"a": 1, "c": map[string]any{"y": 1, "z": 2}},
		map[string]any{"b": []any{map[string]any{"x": 1, "y": 2}, map[string]any{"y": 1, "z": 2}, map[string]any{"y": 1}}, "a": 1},
		map[string]any{"a": 1},
		map[string]any{"a": 1, "b": 2, "c": 3},
		map[string]any{"c": 1, "b": 2, "a": 3},
		map[string]any{},
		map[string]any{"a": []any{map[string]any{"k": map[string]any{"k": 1, "j": 2}}, map[string]any{"k": map[string]any{"j": 1, "i": 2}}}},
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		vals = append(vals, randomValue(r, 4))
	}
	var enc canonicalEncoder
	for i, v := range vals {
		got, err := appendMarshal(nil, &enc, v)
		if err != nil {
			t.Fatalf("value %d: %v", i, err)
		}
		want, err := marshalReflect(v)
		if err != nil {
			t.Fatalf("value %d: marshalReflect: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("value %d: the reused encoder wrote\n%s\nencoding/json writes\n%s", i, got, want)
		}
		if enc.depth != 0 {
			t.Fatalf("value %d: depth %d after it", i, enc.depth)
		}
	}
}
