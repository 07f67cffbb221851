package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/snapwriter/snapwriter/internal/walkcount"
)

// Object is a JSON object in canonical form: its values are nil, bool,
// string, int64, float64, []any or map[string]any, recursively.
type Object = map[string]any

// Marshal encodes v as JSON, writing canonical values so they decode back to
// the same types: a float64 with an integral value keeps a ".0" (encoding/json
// would write it as an integer). Map keys are sorted and strings are not
// HTML-escaped. Types other than the canonical ones and the model's own are
// encoded by json.Marshal, as they come. The bytes are hashed into stored
// snapshots, so they never change.
func Marshal(v any) ([]byte, error) {
	return appendMarshal(nil, new(canonicalEncoder), v)
}

// Encoder writes canonical JSON as Marshal does, reusing its space from
// one value to the next: for a caller that encodes many small values.
// Its zero value is ready to use; it is not safe for concurrent use.
type Encoder struct {
	enc canonicalEncoder
	buf []byte
}

// Marshal returns Marshal(v), in space that e's next call reuses.
func (e *Encoder) Marshal(v any) ([]byte, error) {
	b, err := appendMarshal(e.buf[:0], &e.enc, v)
	if err != nil {
		e.enc = canonicalEncoder{} // a failed map leaves its keys behind
		return nil, err
	}
	e.buf = b[:0]
	return b, nil
}

// appendMarshal appends Marshal(v) to dst, writing with e: a caller that
// marshals many values reuses dst's space and e's.
func appendMarshal(dst []byte, e *canonicalEncoder, v any) ([]byte, error) {
	walkcount.Add(walkcount.Marshal)
	t := v
	switch x := v.(type) {
	case *Snapshot:
		o, err := x.tree()
		if err != nil {
			return dst, err
		}
		t = o
	case Snapshot:
		o, err := x.tree()
		if err != nil {
			return dst, err
		}
		t = o
	case *PayloadMetadata:
		t = x.tree()
	case PayloadMetadata:
		t = x.tree()
	}
	out, err := e.appendValue(dst, t)
	if errors.Is(err, errNotCanonical) {
		// A type of a library caller's: encoding/json writes it.
		b, err := marshalReflect(t)
		return append(dst, b...), err
	}
	return out, err
}

// marshalReflect is Marshal by encoding/json, on the tree jsonTree builds:
// the reference canonicalEncoder must match, and the path for values of
// other types.
func marshalReflect(v any) ([]byte, error) {
	t, err := jsonTree(v)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(t); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// jsonTree copies v into the tree encoding/json encodes as Marshal must:
// every float64 becomes the json.Number of its canonical text, nil lists and
// objects become empty ones (canonical JSON has no null for them), and values
// of other types become their own json.Marshal encoding, which they keep.
func jsonTree(v any) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, int64, int:
		return x, nil
	case float64:
		return floatNumber(x)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := jsonTree(e)
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case []string:
		if x == nil {
			return []string{}, nil
		}
		return x, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := jsonTree(e)
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case *Snapshot:
		return snapshotTree(*x)
	case Snapshot:
		return snapshotTree(x)
	case *PayloadMetadata:
		return jsonTree(x.tree())
	case PayloadMetadata:
		return jsonTree(x.tree())
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(b), nil
}

func snapshotTree(s Snapshot) (any, error) {
	t, err := s.tree()
	if err != nil {
		return nil, err
	}
	return jsonTree(t)
}

// EncodedSize is an upper bound on a canonical value's size inside a
// Firestore Commit request. Firestore's storage size undercounts the
// protobuf framing of small fields (tags, lengths, map entries), so each
// element is charged a generous fixed overhead.
func EncodedSize(v any) int {
	countTree(walkcount.EncodedSize, v)
	return encodedSize(v)
}

func encodedSize(v any) int {
	switch x := v.(type) {
	case string:
		return len(x) + 8
	case []any:
		n := 8
		for _, e := range x {
			n += encodedSize(e) + 4
		}
		return n
	case map[string]any:
		n := 8
		for k, e := range x {
			n += len(k) + encodedSize(e) + 12
		}
		return n
	default: // numbers, bools, null
		return 12
	}
}

// floatNumber is f as encoding/json writes it, with ".0" added to a whole
// number so that it reads back as a float, not an integer.
func floatNumber(f float64) (json.Number, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "", errNonFinite(f)
	}
	b, err := json.Marshal(f)
	if err != nil {
		return "", err
	}
	if !bytes.ContainsAny(b, ".eE") {
		b = append(b, '.', '0')
	}
	return json.Number(b), nil
}

// errNonFinite is the error of marshalling a NaN or an infinity, which JSON
// has no form for.
func errNonFinite(f float64) error { return fmt.Errorf("model: %v cannot be encoded as JSON", f) }

// FirestoreSize is the storage size Firestore charges for a canonical value
// (https://cloud.google.com/firestore/docs/storage-size): strings are their
// UTF-8 length + 1, numbers 8, booleans and null 1, a map the sum of its keys
// (length + 1) and values, an array the sum of its elements.
func FirestoreSize(v any) int {
	countTree(walkcount.FirestoreSize, v)
	return firestoreSize(v)
}

func firestoreSize(v any) int {
	switch x := v.(type) {
	case nil, bool:
		return 1
	case string:
		return len(x) + 1
	case int64, float64, int:
		return 8
	case []any:
		n := 0
		for _, e := range x {
			n += firestoreSize(e)
		}
		return n
	case []string:
		n := 0
		for _, e := range x {
			n += len(e) + 1
		}
		return n
	case map[string]any:
		n := 0
		for k, e := range x {
			n += len(k) + 1 + firestoreSize(e)
		}
		return n
	default:
		return 8
	}
}

// checkValue reports what Firestore cannot store: NaN and infinities (they
// have no JSON form either), invalid UTF-8, arrays directly inside arrays,
// reserved or oversize field names, and nesting deeper than Firestore allows.
// It returns v's FirestoreSize, so one walk serves both checks (valueWalk).
func checkValue(v any, path string, depth int, inArray bool, add func(path, format string, args ...any)) int {
	walkcount.Add(walkcount.Walk)
	w := valueWalk{root: path, add: add}
	size, _ := w.walk(v, depth, inArray, false)
	return size
}

// countTree counts a call of kind on v (walkcount) when v is a tree to
// walk, a map or a list; never outside the walkcount build.
func countTree(kind walkcount.Kind, v any) {
	if !walkcount.Enabled {
		return
	}
	switch v.(type) {
	case map[string]any, []any, []string:
		walkcount.Add(kind)
	}
}

// checkFirestoreSize checks v as checkValue does and returns its
// FirestoreSize from the same walk: exactly, also for a value of a type
// that is not canonical, which the walk counts as 8 bytes.
func checkFirestoreSize(v any, path string, depth int, add func(path, format string, args ...any)) int {
	walkcount.Add(walkcount.Walk)
	w := valueWalk{root: path, add: add}
	size, _ := w.walk(v, depth, false, false)
	if w.foreign {
		return FirestoreSize(v)
	}
	return size
}

// pathElem is one step of a JSON path: a key or an array index.
type pathElem struct {
	key   string
	index int
	isKey bool
}

// formatPath formats the path of steps below root; only problems need it,
// so paths are never formatted up front.
func formatPath(root string, steps []pathElem) string {
	p := root
	for _, s := range steps {
		if s.isKey {
			p = childPath(p, s.key)
		} else {
			p = fmt.Sprintf("%s[%d]", p, s.index)
		}
	}
	return p
}

// childPath appends a key to a JSON path, quoting keys that are not plain
// identifiers.
func childPath(path, key string) string {
	if identifier.MatchString(key) {
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

func kindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case int64, float64:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("a %T", v)
}
