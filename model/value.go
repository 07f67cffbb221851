package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Object is a JSON object in canonical form: its values are nil, bool,
// string, int64, float64, []any or map[string]any, recursively.
type Object = map[string]any

// DecodeObject reads exactly one JSON object from r into canonical form.
// Numbers written with a fraction or exponent become float64, the rest int64;
// trailing data after the object is an error, and so are a key repeated in
// an object, a lone UTF-16 surrogate escape, invalid UTF-8 and a leading
// byte-order mark (see decodeValue).
func DecodeObject(r io.Reader) (Object, error) {
	v, err := decodeValue(r)
	if err != nil {
		return nil, err
	}
	o, ok := v.(map[string]any)
	if !ok {
		return nil, invalid("$", "want a JSON object, got %s", kindOf(v))
	}
	return o, nil
}

func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	prefix := data[:off]
	line = bytes.Count(prefix, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(prefix, '\n')
	return line, col
}

func parseNumber(s, path string) (any, error) {
	if !strings.ContainsAny(s, ".eE") {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			// Firestore has no integer wider than 64 bits; storing it as a
			// double would silently change the value.
			return nil, invalid(path, "integer %s is outside the 64-bit range Firestore stores", s)
		}
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, invalid(path, "number %s is outside the range of a double", s)
	}
	return f, nil
}

// Normalize converts a Go value built by hand or by encoding/json (int,
// float32, []string, map[string]string, json.Number, …) into canonical form.
// Values it cannot represent in JSON are returned as an error.
func Normalize(v any) (any, error) { return normalize(v, "$") }

func normalize(v any, path string) (any, error) {
	switch x := v.(type) {
	case nil, bool, string, int64, float64:
		return x, nil
	case json.Number:
		return parseNumber(string(x), path)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			c, err := normalize(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			c, err := normalize(e, childPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return rv.Int(), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		u := rv.Uint()
		if u > math.MaxInt64 {
			return nil, invalid(path, "integer %d is outside the 64-bit range Firestore stores", u)
		}
		return int64(u), nil
	case reflect.Float32, reflect.Float64:
		return rv.Float(), nil
	case reflect.String:
		return rv.String(), nil
	case reflect.Bool:
		return rv.Bool(), nil
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			c, err := normalize(rv.Index(i).Interface(), fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = c
		}
		return out, nil
	case reflect.Map:
		if rv.Type().Key().Kind() != reflect.String {
			break
		}
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key().String()
			c, err := normalize(it.Value().Interface(), childPath(path, k))
			if err != nil {
				return nil, err
			}
			out[k] = c
		}
		return out, nil
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil, nil
		}
		return normalize(rv.Elem().Interface(), path)
	}
	return nil, invalid(path, "a %T is not a JSON value", v)
}

// Marshal encodes v as JSON, writing canonical values so they decode back to
// the same types: a float64 with an integral value keeps a ".0" (encoding/json
// would write it as an integer). Map keys are sorted. Types other than the
// canonical ones and the model's own are encoded by encoding/json.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := encode(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encode(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(x))
	case string:
		encodeString(buf, x)
	case int64:
		buf.WriteString(strconv.FormatInt(x, 10))
	case int:
		buf.WriteString(strconv.Itoa(x))
	case float64:
		return encodeFloat(buf, x)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encode(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeString(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			encodeString(buf, k)
			buf.WriteByte(':')
			if err := encode(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case *Snapshot:
		return encode(buf, x.tree())
	case Snapshot:
		return encode(buf, x.tree())
	case PayloadMetadata:
		return encode(buf, x.tree())
	case *PayloadMetadata:
		return encode(buf, x.tree())
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	return nil
}

func encodeFloat(buf *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("model: %v cannot be encoded as JSON", f)
	}
	// The same formatting rule as encoding/json.
	format := byte('f')
	if a := math.Abs(f); a != 0 && (a < 1e-6 || a >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		// Clean up e-09 to e-9, as encoding/json does.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	if !bytes.ContainsAny(b, ".eE") {
		b = append(b, '.', '0')
	}
	buf.Write(b)
	return nil
}

func encodeString(buf *bytes.Buffer, s string) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)           // a string always encodes
	buf.Truncate(buf.Len() - 1) // Encode's newline
}

// FirestoreSize is the storage size Firestore charges for a canonical value
// (https://cloud.google.com/firestore/docs/storage-size): strings are their
// UTF-8 length + 1, numbers 8, booleans and null 1, a map the sum of its keys
// (length + 1) and values, an array the sum of its elements.
func FirestoreSize(v any) int {
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
			n += FirestoreSize(e)
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
			n += len(k) + 1 + FirestoreSize(e)
		}
		return n
	default:
		return 8
	}
}

// checkValue reports what Firestore cannot store: NaN and infinities (they
// have no JSON form either), invalid UTF-8, arrays directly inside arrays,
// reserved or oversize field names, and nesting deeper than Firestore allows.
// It returns v's FirestoreSize, so one walk serves both checks.
func checkValue(v any, path string, depth int, inArray bool, add func(path, format string, args ...any)) int {
	w := walker{root: path, add: add}
	return w.check(v, depth, inArray)
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

// walker checks a value tree, keeping the current path as a stack of steps
// so that walking a large snapshot allocates nothing per value.
type walker struct {
	root  string
	steps []pathElem
	add   func(path, format string, args ...any)
}

func (w *walker) path() string { return formatPath(w.root, w.steps) }

func (w *walker) check(v any, depth int, inArray bool) (size int) {
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
