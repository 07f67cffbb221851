package model

import (
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// refWalker is the check Validate and Open ran before the one walk
// (valueWalk), verbatim: the reference for its problems and its size.
type refWalker struct {
	root  string
	steps []pathElem
	add   func(path, format string, args ...any)
}

func (w *refWalker) path() string { return formatPath(w.root, w.steps) }

func (w *refWalker) check(v any, depth int, inArray bool) (size int) {
	if depth > maxDepth {
		w.add(w.path(), "nested more than %d levels deep, Firestore's limit", maxDepth)
		return FirestoreSize(v)
	}
	switch x := v.(type) {
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			w.add(w.path(), "%v is not a finite number", x)
		}
		return 8
	case string:
		if !utf8.ValidString(x) {
			w.add(w.path(), "string is not valid UTF-8")
		}
		return len(x) + 1
	case []any:
		if inArray {
			w.add(w.path(), "an array directly inside an array cannot be stored in Firestore")
			return FirestoreSize(v)
		}
		for i, e := range x {
			w.steps = append(w.steps, pathElem{index: i})
			size += w.check(e, depth+1, true)
			w.steps = w.steps[:len(w.steps)-1]
		}
		return size
	case map[string]any:
		for k, e := range x {
			w.steps = append(w.steps, pathElem{key: k, isKey: true})
			switch {
			case k == "":
				w.add(w.path(), "empty field name cannot be stored in Firestore")
			case len(k) > maxFieldNameBytes:
				w.add(w.path(), "field name is %d bytes, over Firestore's %d", len(k), maxFieldNameBytes)
			case len(k) >= 4 && strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__"):
				w.add(w.path(), "field name %q is reserved by Firestore (__name__ form)", k)
			case !utf8.ValidString(k):
				w.add(w.path(), "field name is not valid UTF-8")
			}
			size += len(k) + 1 + w.check(e, depth+1, false)
			w.steps = w.steps[:len(w.steps)-1]
		}
		return size
	case int64:
		return 8
	case nil, bool:
		return 1
	default:
		w.add(w.path(), "a %T is not a JSON value", v)
		return 8
	}
}

// collect returns an add function and the problems it collected, as
// sorted "path: message" lines (the walks visit maps in different orders).
func collect() (func(path, format string, args ...any), func() []string) {
	var got []string
	return func(path, format string, args ...any) {
			got = append(got, path+": "+fmt.Sprintf(format, args...))
		}, func() []string {
			slices.Sort(got)
			return got
		}
}

// oddValues are data that exercise every check and every fallback.
func oddValues() []Object {
	nest := func(n int, leaf any) any {
		v := leaf
		for range n {
			v = Object{"d": v}
		}
		return v
	}
	return []Object{
		{},
		nil,
		{"nan": math.NaN(), "inf": []any{1.5, math.Inf(-1)}, "ok": 39.0},
		{"deep": nest(25, []any{[]any{3.0}, "\xff"}), "shallow": nest(3, "x")},
		{"deepForeign": nest(22, []string{"abc", "de"}), "i": 2.0},
		{"": 1.0, "__x__": int64(1), "\xffk": "v", strings.Repeat("k", 1501): nil, "a": []any{[]any{int64(1), []string{"x"}}}},
		{"int": 7, "strs": []string{"a", "bb"}, "n": Object{"f": 1.5}},
		{"func": func() {}},
		{"struct": struct{ A int }{3}, "whole": math.Copysign(0, -1)},
		{"bad \xff": "\xed\xa0\x80", "ctl": "\x00\n\u2028"},
	}
}

// The one walk finds exactly what the walks it replaced found: the same
// problems at the same paths, the same size for the checks, and the same
// summary (SHA-256 of Marshal, FirestoreSize, EncodedSize,
// holdsWholeDouble) or Marshal's error. Without hashing (checkValue) the
// problems and size are the same too.
func TestOneWalkMatchesReference(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(7, 26))
	values := oddValues()
	for range 3000 {
		o := Object{}
		for range r.IntN(6) {
			o[canonicalStrings[r.IntN(len(canonicalStrings))]+string(rune('a'+r.IntN(26)))] = randomValue(r, 5)
		}
		values = append(values, o)
	}
	for _, d := range Generate("2026-11-20", 20, 5).Payload.Districts {
		values = append(values, d.data)
	}
	sc := new(summaryScratch)
	for i, o := range values {
		addRef, refProblems := collect()
		ref := refWalker{root: "$", add: addRef}
		refSize := ref.check(o, 1, false)
		b, refErr := Marshal(o)

		add, problems := collect()
		sum, size, err := summarizeData(o, "$", add, sc)
		if size != refSize || !slices.Equal(problems(), refProblems()) {
			t.Fatalf("value %d: size %d, problems %q; want %d, %q", i, size, problems(), refSize, refProblems())
		}
		if (err == nil) != (refErr == nil) || err != nil && err.Error() != refErr.Error() {
			t.Fatalf("value %d: error %v, want Marshal's %v", i, err, refErr)
		}
		if err == nil {
			want := DataSummary{Digest: sha256.Sum256(b), FirestoreSize: FirestoreSize(o), EncodedSize: EncodedSize(o),
				NoWholeDoubles: !holdsWholeDouble(o)}
			if sum != want {
				t.Fatalf("value %d: summary %+v, want %+v", i, sum, want)
			}
		}

		add, problems = collect()
		if size := checkValue(o, "$", 1, false, add); size != refSize || !slices.Equal(problems(), refProblems()) {
			t.Fatalf("value %d: checkValue size %d, problems %q; want %d, %q", i, size, problems(), refSize, refProblems())
		}
	}
}

// A district larger than the walk holds before hashing is hashed whole.
func TestOneWalkHashesLargeData(t *testing.T) {
	t.Parallel()
	o := Object{"rows": []any{}}
	for i := range 20000 {
		o["rows"] = append(o["rows"].([]any), Object{"i": int64(i), "s": strings.Repeat("é", i%50)})
	}
	b, err := Marshal(o)
	if err != nil || len(b) < 4*hashFlush {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	sum, err := DistrictStatistics{data: o}.Summary()
	if err != nil || sum.Digest != sha256.Sum256(b) {
		t.Fatalf("digest differs from Marshal's (%v)", err)
	}
}

// A district built in memory holds its data and reads its ids from it;
// one read lazily has the same data, read back by Data, never nil.
func TestDistrictData(t *testing.T) {
	t.Parallel()
	data := Object{"districtId": "42", "asOfDate": "2026-11-20", "n": 1.5}
	d := NewDistrict(data)
	got, err := d.Data()
	if d.DistrictID != "42" || d.AsOfDate != "2026-11-20" || d.Lazy() || err != nil {
		t.Fatalf("NewDistrict: %+v, lazy %v, %v", d, d.Lazy(), err)
	}
	got["m"] = int64(2) // the district's own map, not a copy
	if data["m"] != int64(2) {
		t.Error("Data returned a copy of the district's data")
	}
	mem := Generate("2026-11-20", 3, 9)
	b, err := Marshal(mem)
	if err != nil {
		t.Fatal(err)
	}
	path := t.TempDir() + "/in.json"
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	lazy, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, ld := range lazy.Payload.Districts {
		data, err := ld.Data()
		if !ld.Lazy() || err != nil || data == nil || Diff(&Snapshot{Payload: Payload{Districts: []DistrictStatistics{NewDistrict(data)}}},
			&Snapshot{Payload: Payload{Districts: mem.Payload.Districts[i : i+1]}}) != "" {
			t.Errorf("district %d read lazily: lazy %v, %v, data differs from the input's", i, ld.Lazy(), err)
		}
	}
	lazy.Close()
	if _, err := lazy.Payload.Districts[0].Data(); err == nil {
		t.Error("Data of a closed snapshot's district succeeded")
	}
}

// An Encoder reused from value to value writes what Marshal writes, and
// fails where it fails, without that failure reaching the next value.
func TestEncoderIsMarshal(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(26, 7))
	var e Encoder
	for i := range 2000 {
		v := randomValue(r, 4)
		if i%50 == 0 {
			v = Object{"m": Object{"bad": math.NaN()}, "a": Object{"x": 1.0}}
		}
		want, wantErr := Marshal(v)
		got, err := e.Marshal(v)
		if (err == nil) != (wantErr == nil) || err == nil && string(got) != string(want) {
			t.Fatalf("value %d: %q, %v; want %q, %v", i, got, err, want, wantErr)
		}
	}
}
