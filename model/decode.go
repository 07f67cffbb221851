package model

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// maxInputDepth bounds the nesting the decoder accepts. Firestore stores at
// most maxDepth (20) levels and a district's data sits two levels below the
// input's root, so nothing nested this deep could be stored; Validate names
// the first value past Firestore's own limit. The bound also keeps a
// malicious input from costing more than a few path steps.
const maxInputDepth = 64

// byteOrderMarks are the byte-order marks a text editor may put before JSON,
// longest first (UTF-32's little-endian mark starts with UTF-16's).
var byteOrderMarks = []struct{ bom, name string }{
	{"\x00\x00\xFE\xFF", "UTF-32 big-endian, 00 00 FE FF"},
	{"\xFF\xFE\x00\x00", "UTF-32 little-endian, FF FE 00 00"},
	{"\xEF\xBB\xBF", "UTF-8, EF BB BF"},
	{"\xFE\xFF", "UTF-16 big-endian, FE FF"},
	{"\xFF\xFE", "UTF-16 little-endian, FF FE"},
}

// DecodeObject reads exactly one JSON object from r into canonical form.
// Numbers written with a fraction or exponent become float64, the rest int64;
// trailing data after the object is an error, and so are a key repeated in
// an object, a lone UTF-16 surrogate escape, invalid UTF-8 and a leading
// byte-order mark, since each would store something other than the input.
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

// source is the input a decoder reads, addressable by offset so that an
// error can be placed by line and column without keeping the input in
// memory: a *bytes.Reader, or an *io.SectionReader of a file.
type source interface {
	io.ReaderAt
	Size() int64
}

// position is the line and column of byte off of src.
func position(src source, off int64) (line, col int) {
	off = min(off, src.Size())
	line = 1
	lastNL := int64(-1)
	buf := make([]byte, min(off, 64<<10))
	for pos := int64(0); pos < off; {
		n, err := src.ReadAt(buf[:min(int64(len(buf)), off-pos)], pos)
		chunk := buf[:n]
		line += bytes.Count(chunk, []byte("\n"))
		if i := bytes.LastIndexByte(chunk, '\n'); i >= 0 {
			lastNL = pos + int64(i)
		}
		pos += int64(n)
		if n == 0 || err != nil && err != io.EOF {
			break
		}
	}
	return line, int(off - lastNL)
}

// bytesAt reads up to n bytes of src at off; fewer at its end.
func bytesAt(src source, off int64, n int) []byte {
	if off < 0 || off >= src.Size() {
		return nil
	}
	b := make([]byte, min(int64(n), src.Size()-off))
	k, _ := src.ReadAt(b, off)
	return b[:k]
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

// decodeValue reads one JSON value and builds its canonical form. It is
// strict where encoding/json is lenient, because leniency would store
// something other than the input: a key given twice in one object, a lone
// UTF-16 surrogate escape and invalid UTF-8 are errors (encoding/json keeps
// the last of two equal keys and turns lone surrogates and invalid UTF-8
// into U+FFFD), and so is a byte-order mark. Every problem names its JSON
// path.
func decodeValue(r io.Reader) (any, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("reading input: %w", err)
	}
	return decodeBytes(data, nil)
}

// decodeBytes is decodeValue of data in memory.
func decodeBytes(data []byte, capture captureFunc) (any, error) {
	return decodeSource(bytes.NewReader(data), bytes.NewBuffer(data), capture)
}

// captureFunc is called with every object the decoder has read, the
// decoder at its path, and the offsets of the object's first byte and of
// the byte after it; it returns what is kept in its place in the tree.
type captureFunc func(d *decoder, o Object, start, end int64) (any, error)

// decodeSource decodes the value rd reads, which is src from its start:
// rd streams the tokens, src places errors by line and column.
func decodeSource(src source, rd io.Reader, capture captureFunc) (any, error) {
	head := bytesAt(src, 0, 4)
	for _, m := range byteOrderMarks {
		if bytes.HasPrefix(head, []byte(m.bom)) {
			return nil, invalid("$", "file starts with a byte-order mark (%s): JSON input must be UTF-8 without one", m.name)
		}
	}
	// jsontext is encoding/json/v2's tokenizer. Its defaults reject invalid
	// UTF-8 and lone surrogates; duplicate keys are found below, where the
	// object is built anyway and the path is at hand.
	d := &decoder{src: src, dec: jsontext.NewDecoder(rd, jsontext.AllowDuplicateNames(true)), capture: capture}
	tok, err := d.dec.ReadToken()
	if err == io.EOF {
		return nil, invalid("$", "invalid JSON: the input is empty")
	}
	if err != nil {
		return nil, d.syntaxError(err, false)
	}
	v, err := d.value(tok)
	if err != nil {
		return nil, err
	}
	end := d.dec.InputOffset()
	if _, err := d.dec.ReadToken(); err != io.EOF {
		line, col := position(src, skipSpace(src, end))
		return nil, invalid("$", "invalid JSON: unexpected data after the top-level value at line %d, column %d", line, col)
	}
	return v, nil
}

// decoder builds the canonical tree from jsontext's tokens. steps is the
// path of the value being read; it is formatted only for a problem.
type decoder struct {
	src     source
	dec     *jsontext.Decoder
	steps   []pathElem
	capture captureFunc // nil: keep every object
	// keys interns object keys: a snapshot's thousands of districts
	// repeat the same few hundred, and one string each saves most of the
	// decoder's allocations.
	keys map[string]string
	// sizes is, by depth, how many members the last object read there
	// had: a snapshot's districts are alike, and a map made that size
	// need not grow. An object too small for its hint is at most as
	// costly as the one before it at its depth, so a wrong hint at most
	// doubles the maps' memory.
	sizes [maxInputDepth + 1]int
}

// maxInterned bounds the keys a decoder interns, so that an input of
// ever-new keys costs no more than without interning.
const maxInterned = 1 << 14

// key is the object key whose raw JSON string is raw.
func (d *decoder) key(raw []byte) (string, error) {
	b := raw[1 : len(raw)-1]
	if bytes.IndexByte(b, '\\') >= 0 {
		u, err := jsontext.AppendUnquote(nil, raw)
		return string(u), err
	}
	if k, ok := d.keys[string(b)]; ok {
		return k, nil
	}
	k := string(b)
	if d.keys == nil {
		d.keys = map[string]string{}
	}
	if len(d.keys) < maxInterned {
		d.keys[k] = k
	}
	return k, nil
}

func (d *decoder) path() string { return formatPath("$", d.steps) }

// value converts the token just read, reading the rest of an object or
// array.
func (d *decoder) value(tok jsontext.Token) (any, error) {
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't':
		return true, nil
	case 'f':
		return false, nil
	case '"':
		return tok.String(), nil
	case '0':
		// The token's raw text: exact, and an integer stays an integer.
		n, err := parseNumber(tok.String(), "")
		if err != nil {
			var ve *ValidationError
			errors.As(err, &ve)
			return nil, invalid(d.path(), "%s", ve.Problems[0].Message)
		}
		return n, nil
	case '{':
		return d.object(d.dec.InputOffset() - 1)
	case '[':
		return d.array()
	}
	return nil, invalid(d.path(), "invalid JSON: unexpected %s", tok.Kind())
}

func (d *decoder) tooDeep() error {
	return invalid(d.path(), "nested more than %d levels deep (Firestore stores at most %d)", maxInputDepth, maxDepth)
}

// object reads the rest of the object whose '{' is at offset start.
func (d *decoder) object(start int64) (any, error) {
	if len(d.steps) >= maxInputDepth {
		return nil, d.tooDeep()
	}
	depth := len(d.steps)
	m := make(map[string]any, d.sizes[depth])
	for {
		before := d.dec.InputOffset()
		if d.dec.PeekKind() != '"' {
			// The object's end, or an error.
			tok, err := d.dec.ReadToken()
			if err != nil {
				return nil, d.syntaxError(err, true)
			}
			if tok.Kind() != '}' {
				return nil, invalid(d.path(), "invalid JSON: unexpected %s", tok.Kind())
			}
			d.sizes[depth] = len(m)
			if d.capture != nil {
				return d.capture(d, m, start, d.dec.InputOffset())
			}
			return m, nil
		}
		raw, err := d.dec.ReadValue()
		if err != nil {
			return nil, d.syntaxError(err, true)
		}
		k, err := d.key(raw)
		if err != nil {
			return nil, d.syntaxError(err, true)
		}
		d.steps = append(d.steps, pathElem{key: k, isKey: true})
		if _, dup := m[k]; dup {
			line, col := position(d.src, keyStart(d.src, before))
			return nil, invalid(d.path(), "duplicate key %q at line %d, column %d: this object already has it, and only one of the values could be stored", k, line, col)
		}
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, d.syntaxError(err, false)
		}
		v, err := d.value(tok)
		if err != nil {
			return nil, err
		}
		m[k] = v
		d.steps = d.steps[:len(d.steps)-1]
	}
}

func (d *decoder) array() (any, error) {
	if len(d.steps) >= maxInputDepth {
		return nil, d.tooDeep()
	}
	a := []any{}
	for i := 0; ; i++ {
		d.steps = append(d.steps, pathElem{index: i})
		tok, err := d.dec.ReadToken()
		if err != nil {
			return nil, d.syntaxError(err, false)
		}
		if tok.Kind() == ']' {
			d.steps = d.steps[:len(d.steps)-1]
			return a, nil
		}
		v, err := d.value(tok)
		if err != nil {
			return nil, err
		}
		a = append(a, v)
		d.steps = d.steps[:len(d.steps)-1]
	}
}

// syntaxError turns the tokenizer's error into a problem at the current
// path, with the line and column of the offending byte. inKey says that an
// object key (or the object's end) was expected.
func (d *decoder) syntaxError(err error, inKey bool) error {
	path := d.path()
	var se *jsontext.SyntacticError
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return invalid(path, "invalid JSON: the input ends before the value is complete")
	}
	if !errors.As(err, &se) {
		return invalid(path, "invalid JSON: %v", err)
	}
	off := se.ByteOffset
	line, col := position(d.src, off)
	where := "in a string"
	if inKey {
		where = "in a key"
	}
	if esc, high, ok := surrogateAt(d.src, off); ok {
		why := `a low surrogate (\udc00–\udfff) must follow a high one (\ud800–\udbff)`
		if high {
			why = `a high surrogate (\ud800–\udbff) must be followed by a low one (\udc00–\udfff)`
		}
		return invalid(path, "invalid surrogate %s %s at line %d, column %d: %s; alone it is no character (it would be stored as U+FFFD)",
			esc, where, line, col, why)
	}
	if b := bytesAt(d.src, off, utf8.UTFMax); len(b) > 0 {
		if r, size := utf8.DecodeRune(b); r == utf8.RuneError && size == 1 {
			return invalid(path, "invalid JSON at line %d, column %d: byte 0x%02x is not valid UTF-8 (JSON input must be UTF-8)", line, col, b[0])
		}
	}
	return invalid(path, "invalid JSON at line %d, column %d: %v", line, col, se.Err)
}

// surrogateAt reports whether src holds a UTF-16 surrogate escape (\uD800
// to \uDFFF) at off, and whether it is a high one.
func surrogateAt(src source, off int64) (esc string, high, ok bool) {
	b := bytesAt(src, off, 6)
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return "", false, false
	}
	v, err := strconv.ParseUint(string(b[2:6]), 16, 16)
	if err != nil || !utf16.IsSurrogate(rune(v)) {
		return "", false, false
	}
	return string(b), v < 0xdc00, true
}

// keyStart is the offset of the key that follows off: past whitespace and
// the comma before it.
func keyStart(src source, off int64) int64 {
	off = skipSpace(src, off)
	if b := bytesAt(src, off, 1); len(b) == 1 && b[0] == ',' {
		off = skipSpace(src, off+1)
	}
	return off
}

func skipSpace(src source, off int64) int64 {
	for {
		b := bytesAt(src, off, 512)
		if len(b) == 0 {
			return off
		}
		for _, c := range b {
			switch c {
			case ' ', '\t', '\n', '\r':
				off++
			default:
				return off
			}
		}
	}
}
