package model

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The canonical JSON of a district is hashed when the input is read, and a
// snapshot's whole JSON is written by get. encoding/json does it by
// reflection on a copy of the tree (jsonTree), sorting each map's keys
// through reflect.Values: about two thirds of reading a 5,000-district
// input went there. canonicalEncoder writes the same bytes straight from
// the canonical tree. The bytes are hashed into stored snapshots, so they
// must never differ from Marshal's reference path (marshalReflect); the
// golden tests and TestCanonicalEncoderMatchesReflect pin that.

// errNotCanonical says that a value holds a type canonicalEncoder does not
// write; Marshal then takes the reflecting path for the whole value.
var errNotCanonical = errors.New("model: not a canonical value")

// canonicalEncoder appends canonical JSON. keys is scratch space for the
// sorted keys of the maps being written, one segment per nesting level, so
// that a whole tree is written with a handful of allocations.
type canonicalEncoder struct {
	keys []string
	// sorted is, by nesting level, the sorted keys of the last map
	// written there: a snapshot's maps at one level mostly have the same
	// keys, and a map with as many keys, all of them among these, has
	// exactly these, with no need to collect and sort them again.
	sorted [][]string
	depth  int
}

// sameKeys reports whether m's keys are exactly keys.
func sameKeys(m map[string]any, keys []string) bool {
	if len(m) != len(keys) {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; !ok {
			return false
		}
	}
	return true
}

// appendValue appends v's canonical JSON to dst.
func (e *canonicalEncoder) appendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case string:
		return appendJSONString(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case float64:
		return appendFloat(dst, x)
	case []any:
		dst = append(dst, '[')
		for i, el := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = e.appendValue(dst, el); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case []string:
		dst = append(dst, '[')
		for i, s := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, s)
		}
		return append(dst, ']'), nil
	case map[string]any:
		keys, base := e.sortedKeys(x)
		e.depth++
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k)
			dst = append(dst, ':')
			var err error
			if dst, err = e.appendValue(dst, x[k]); err != nil {
				e.depth--
				return dst, err
			}
		}
		e.depth--
		e.release(base)
		return append(dst, '}'), nil
	}
	return dst, errNotCanonical
}

// sortedKeys returns m's keys in the order canonical JSON writes them
// (encoding/json sorts a map's keys by strings.Compare), for a map at the
// encoder's depth; release(base) frees them once the map is written.
func (e *canonicalEncoder) sortedKeys(m map[string]any) (keys []string, base int) {
	base = len(e.keys)
	if len(e.sorted) <= e.depth {
		e.sorted = append(e.sorted, nil)
	}
	keys = e.sorted[e.depth]
	if !sameKeys(m, keys) {
		for k := range m {
			e.keys = append(e.keys, k)
		}
		keys = e.keys[base:]
		slices.Sort(keys) // byte order, as strings.Compare
		e.sorted[e.depth] = append(e.sorted[e.depth][:0], keys...)
	}
	return keys, base
}

// release frees the keys sortedKeys returned with base.
func (e *canonicalEncoder) release(base int) {
	clear(e.keys[base:])
	e.keys = e.keys[:base]
}

// appendFloat appends f as floatNumber writes it: as encoding/json formats
// a float64 (ES6 style: %f between 1e-6 and 1e21, else %e with a short
// exponent), with ".0" added to a whole number.
func appendFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return dst, errNonFinite(f)
	}
	start := len(dst)
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json writes it.
		n := len(dst)
		if n-start >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	for _, c := range dst[start:] {
		if c == '.' || c == 'e' || c == 'E' {
			return dst, nil
		}
	}
	return append(dst, '.', '0'), nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as encoding/json writes a string with HTML
// escaping off: '"', '\\' and control characters escaped (\b \f \n \r \t
// by name, the rest as \u00XX), invalid UTF-8 as \ufffd, and U+2028 and
// U+2029 as \u2028 and \u2029.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
