package gate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/snapwriter/snapwriter/model"
)

// Row is one district as readers see it: its document's data and its row of
// the rankings (nil when absent).
type Row struct {
	Data, Ranking model.Object
}

// Kind says how a field differs.
type Kind string

// The kinds of change.
const (
	// Changed is a field present on both sides with different values.
	Changed Kind = "changed"
	// Added is a field (or array element) only the new side has.
	Added Kind = "added"
	// Removed is a field (or array element) only the old side has.
	Removed Kind = "removed"
)

// Change is one field of one district that differs.
type Change struct {
	// Field is the rendered path: data.membership.total, rankings.paidClubs,
	// data.clubPerformance[00001234]["Mem. Base"]. Object keys that are not
	// identifiers ([A-Za-z_][A-Za-z0-9_]*) are written ["…"], JSON-quoted;
	// an array element is [its key values joined by ","] (a value holding
	// `,[]"` or empty is JSON-quoted), or [#fingerprint] — the first 8 hex
	// digits of the sha256 of its canonical JSON, whole doubles written as
	// integers — when the array has no key.
	Field string
	// Keys are the field's object keys from the row's root, array steps
	// left out: what Policy.Class took.
	Keys []string
	// Class is the policy's class of Keys.
	Class Class
	// Kind says whether the field changed, appeared or disappeared.
	Kind Kind
	// Old and New are the values, nil when absent (Kind says which): whole
	// subtrees for an added or removed object or element.
	Old, New any
}

// rootData and rootRankings are the names of a row's two roots in fields
// and in the keys the policy classifies.
const (
	rootData     = "data"
	rootRankings = "rankings"
)

// Compare returns the fields in which new differs from old, sorted by Field.
// Order is ignored (arrays of objects are matched element to element by the
// policy's array keys, arrays of scalars compare as multisets), an integer
// equals the double of the same value (a re-derivation may change the type),
// and volatile fields are never compared. A nil p is DefaultPolicy().
func Compare(p *Policy, old, new Row) []Change {
	if p == nil {
		p = DefaultPolicy()
	}
	w := walker{p: p}
	w.root(rootData, old.Data, new.Data)
	w.root(rootRankings, old.Ranking, new.Ranking)
	slices.SortStableFunc(w.out, func(a, b Change) int { return cmp.Compare(a.Field, b.Field) })
	return w.out
}

// walker collects the changes of one comparison.
type walker struct {
	p   *Policy
	out []Change
}

func (w *walker) root(name string, old, new model.Object) {
	keys := []string{name}
	switch {
	case old == nil && new == nil:
	case old == nil:
		w.add(name, keys, Added, nil, map[string]any(new))
	case new == nil:
		w.add(name, keys, Removed, map[string]any(old), nil)
	default:
		if w.p.Class(keys) == Volatile {
			return
		}
		w.object(name, keys, old, new)
	}
}

func (w *walker) add(field string, keys []string, k Kind, old, new any) {
	c := w.p.Class(keys)
	if c == Volatile {
		return
	}
	w.out = append(w.out, Change{Field: field, Keys: keys, Class: c, Kind: k, Old: old, New: new})
}

// object compares two objects whose field is path and keys keys.
func (w *walker) object(path string, keys []string, old, new map[string]any) {
	for k, ov := range old {
		// A fresh slice per child: Change.Keys must not share a backing array.
		ck := append(keys[:len(keys):len(keys)], k)
		cp := path + renderKey(k)
		nv, ok := new[k]
		if !ok {
			w.add(cp, ck, Removed, ov, nil)
			continue
		}
		if w.p.Class(ck) == Volatile {
			continue
		}
		w.value(cp, ck, ov, nv)
	}
	for k, nv := range new {
		if _, ok := old[k]; !ok {
			w.add(path+renderKey(k), append(keys[:len(keys):len(keys)], k), Added, nil, nv)
		}
	}
}

// value compares two values of one field.
func (w *walker) value(path string, keys []string, old, new any) {
	switch o := old.(type) {
	case map[string]any:
		if n, ok := new.(map[string]any); ok {
			w.object(path, keys, o, n)
			return
		}
	case []any:
		if n, ok := new.([]any); ok {
			w.array(path, keys, o, n)
			return
		}
	default:
		if scalarEqual(old, new) {
			return
		}
	}
	w.add(path, keys, Changed, old, new)
}

// array compares two arrays: of objects element to element, else as
// multisets.
func (w *walker) array(path string, keys []string, old, new []any) {
	if !allObjects(old) || !allObjects(new) {
		if !slices.Equal(sortedFingerprints(old), sortedFingerprints(new)) {
			w.add(path, keys, Changed, old, new)
		}
		return
	}
	if ks := w.matchKeys(old, new); ks != nil {
		om, nm := keyed(old, ks), keyed(new, ks)
		for label, oe := range om {
			ne, ok := nm[label]
			if !ok {
				w.add(path+"["+label+"]", keys, Removed, oe, nil)
				continue
			}
			w.object(path+"["+label+"]", keys, oe, ne)
		}
		for label, ne := range nm {
			if _, ok := om[label]; !ok {
				w.add(path+"["+label+"]", keys, Added, nil, ne)
			}
		}
		return
	}
	// No key: an element is its fingerprint, and a changed element is one
	// removed and one added.
	count := map[string]int{}
	first := map[string]any{}
	for _, e := range old {
		f := fingerprint(e)
		count[f]++
		first[f] = e
	}
	for _, e := range new {
		f := fingerprint(e)
		count[f]--
		if _, ok := first[f]; !ok {
			first[f] = e
		}
	}
	for _, f := range slices.Sorted(maps.Keys(count)) {
		field := path + "[#" + f[:8] + "]"
		for n := count[f]; n > 0; n-- {
			w.add(field, keys, Removed, first[f], nil)
		}
		for n := count[f]; n < 0; n++ {
			w.add(field, keys, Added, nil, first[f])
		}
	}
}

// matchKeys returns the first array keys of the policy whose fields are
// scalars in every element of both arrays and unique within each, or nil.
func (w *walker) matchKeys(old, new []any) []string {
	for _, ks := range w.p.arrayKeys {
		if usable(old, ks) && usable(new, ks) {
			return ks
		}
	}
	return nil
}

func usable(elems []any, ks []string) bool {
	seen := make(map[string]bool, len(elems))
	for _, e := range elems {
		l, ok := label(e.(map[string]any), ks)
		if !ok || seen[l] {
			return false
		}
		seen[l] = true
	}
	return true
}

// label renders an element's key values, joined by ","; ok is false when a
// key is absent or not a string, number or bool.
func label(o map[string]any, ks []string) (string, bool) {
	parts := make([]string, len(ks))
	for i, k := range ks {
		v, present := o[k]
		if !present {
			return "", false
		}
		switch x := v.(type) {
		case string:
			parts[i] = x
			if x == "" || strings.ContainsAny(x, `,[]"`) {
				parts[i] = quote(x)
			}
		case bool, int64, float64:
			parts[i] = canonical(v)
		default:
			return "", false
		}
	}
	return strings.Join(parts, ","), true
}

func keyed(elems []any, ks []string) map[string]map[string]any {
	m := make(map[string]map[string]any, len(elems))
	for _, e := range elems {
		o := e.(map[string]any)
		l, _ := label(o, ks)
		m[l] = o
	}
	return m
}

func allObjects(elems []any) bool {
	for _, e := range elems {
		if _, ok := e.(map[string]any); !ok {
			return false
		}
	}
	return true
}

func sortedFingerprints(elems []any) []string {
	fs := make([]string, len(elems))
	for i, e := range elems {
		fs[i] = canonical(e)
	}
	slices.Sort(fs)
	return fs
}

// fingerprint is the hex sha256 of v's canonical JSON, whole doubles as
// integers.
func fingerprint(v any) string {
	sum := sha256.Sum256([]byte(canonical(v)))
	return hex.EncodeToString(sum[:])
}

// canonical is v's canonical JSON with whole doubles written as integers,
// so that an integer and its double compare equal inside arrays as they do
// elsewhere.
func canonical(v any) string {
	b, err := model.Marshal(wholeAsInt(v))
	if err != nil {
		// Not canonical (a NaN, a foreign type): still a stable text to compare.
		return "!" + err.Error()
	}
	return string(b)
}

func wholeAsInt(v any) any {
	switch x := v.(type) {
	case float64:
		if i, ok := model.IntegerValue(x); ok {
			return i
		}
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = wholeAsInt(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = wholeAsInt(e)
		}
		return l
	}
	return v
}

// scalarEqual reports whether two values, the first not an object or
// array, are equal: numbers by value whatever their type, others by type
// and value.
func scalarEqual(a, b any) bool {
	switch x := a.(type) {
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			i, ok := model.IntegerValue(y)
			return ok && i == x
		}
		return false
	case float64:
		switch y := b.(type) {
		case float64:
			return x == y
		case int64:
			i, ok := model.IntegerValue(x)
			return ok && i == y
		}
		return false
	case nil, bool, string:
		return a == b
	}
	return canonical(a) == canonical(b)
}

// renderKey renders an object key as a step of a field: .name for an
// identifier, else ["…"].
func renderKey(k string) string {
	if isIdent(k) {
		return "." + k
	}
	return "[" + quote(k) + "]"
}

// isIdent reports whether k matches [A-Za-z_][A-Za-z0-9_]*.
func isIdent(k string) bool {
	if k == "" {
		return false
	}
	for i, r := range k {
		letter := r == '_' || ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z')
		if !letter && (i == 0 || r < '0' || r > '9') {
			return false
		}
	}
	return true
}

func quote(s string) string {
	b, err := model.Marshal(s)
	if err != nil {
		return `"` + s + `"`
	}
	return string(b)
}
