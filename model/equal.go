package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/snapwriter/snapwriter/internal/plural"
)

// Equal reports whether a and b have the same JSON form, value for value and
// type for type: an integer never equals a float, a missing key never equals
// a null.
func Equal(a, b *Snapshot) bool { return Diff(a, b) == "" }

// Diff describes how a and b differ, at most a few paths; "" when Equal.
func Diff(a, b *Snapshot) string {
	switch {
	case a == nil && b == nil:
		return ""
	case a == nil || b == nil:
		return fmt.Sprintf("one snapshot is nil (%v, %v)", a == nil, b == nil)
	}
	ta, err := a.tree()
	if err != nil {
		return "reading the first snapshot: " + err.Error()
	}
	tb, err := b.tree()
	if err != nil {
		return "reading the second snapshot: " + err.Error()
	}
	var out []string
	diffValue("$", ta, tb, &out)
	if len(out) > maxDiffs {
		out = append(out[:maxDiffs], fmt.Sprintf("… and %d more", len(out)-maxDiffs))
	}
	return strings.Join(out, "; ")
}

const maxDiffs = 5

func diffValue(path string, a, b any, out *[]string) {
	if len(*out) > maxDiffs {
		return
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: %s vs %s", path, show(a), show(b)))
			return
		}
		keys := make([]string, 0, len(x)+len(y))
		for k := range x {
			keys = append(keys, k)
		}
		for k := range y {
			if _, ok := x[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			va, oka := x[k]
			vb, okb := y[k]
			p := childPath(path, k)
			switch {
			case !oka:
				*out = append(*out, fmt.Sprintf("%s: missing vs %s", p, show(vb)))
			case !okb:
				*out = append(*out, fmt.Sprintf("%s: %s vs missing", p, show(va)))
			default:
				diffValue(p, va, vb, out)
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok {
			*out = append(*out, fmt.Sprintf("%s: %s vs %s", path, show(a), show(b)))
			return
		}
		if len(x) != len(y) {
			*out = append(*out, fmt.Sprintf("%s: %s vs %d", path, plural.N(len(x), "element"), len(y)))
			return
		}
		for i := range x {
			diffValue(fmt.Sprintf("%s[%d]", path, i), x[i], y[i], out)
		}
	default:
		// Canonical scalars compare with ==, which also compares types.
		if !scalar(a) || !scalar(b) || a != b {
			*out = append(*out, fmt.Sprintf("%s: %s vs %s", path, show(a), show(b)))
		}
	}
}

func scalar(v any) bool {
	switch v.(type) {
	case nil, bool, string, int64, float64:
		return true
	}
	return false
}

func show(v any) string {
	s := fmt.Sprintf("%T(%v)", v, v)
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
