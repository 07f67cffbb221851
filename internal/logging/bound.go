package logging

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// MaxEntryBytes bounds every log line New's logger writes: a line, its
// newline included, is shorter than this, whatever a caller logs. Cloud
// Logging refuses entries over 256 KB and a terminal's reader gives up
// long before; a caller logs counts and a bounded sample of a list, and
// this is the net under a caller that does not.
const MaxEntryBytes = 64 << 10

// TruncatedKey is the field an entry over MaxEntryBytes gets in place of
// what was cut from it: a sentence saying what was cut, and how much.
const TruncatedKey = "logTruncated"

// The budgets of the passes that shrink an entry over the bound, each
// tighter than the last: first every field and the message at most
// field and text bytes, then less; when even the second is over, the
// fields are dropped (a hundred and more fields of 512 bytes).
var shrinkPasses = [...]struct{ field, text int }{
	{field: 8 << 10, text: 8 << 10},
	{field: 512, text: 1 << 10},
}

// maxNameBytes bounds a logger's name in a shrunk entry.
const maxNameBytes = 256

// boundedCore is zapcore's ioCore, writing entries encoded by enc to out
// at the levels it enables, but for an entry of max bytes or more: that
// one is encoded again, its long strings, arrays and objects cut (shrink).
type boundedCore struct {
	zapcore.LevelEnabler
	enc zapcore.Encoder // with the context fields added
	// base is enc before any context field, and ctx those fields: a shrunk
	// entry is encoded on base with its context fields cut as its own are.
	base zapcore.Encoder
	ctx  []zapcore.Field
	out  zapcore.WriteSyncer
	max  int
}

// newBoundedCore is a core writing enc's entries to out at lvl, each
// shorter than max bytes.
func newBoundedCore(enc zapcore.Encoder, out zapcore.WriteSyncer, lvl zapcore.LevelEnabler, max int) *boundedCore {
	return &boundedCore{LevelEnabler: lvl, enc: enc, base: enc.Clone(), out: out, max: max}
}

// Level reports the minimum level the core writes, for zap.IncreaseLevel
// and zapcore.LevelOf.
func (c *boundedCore) Level() zapcore.Level { return zapcore.LevelOf(c.LevelEnabler) }

// With adds fields to every entry of the returned core.
func (c *boundedCore) With(fields []zapcore.Field) zapcore.Core {
	clone := *c
	clone.enc = c.enc.Clone()
	for _, f := range fields {
		f.AddTo(clone.enc)
	}
	clone.ctx = append(slices.Clip(c.ctx), fields...)
	return &clone
}

// Check adds the core to ce when it writes ent's level.
func (c *boundedCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(ent.Level) {
		return ce.AddCore(ent, c)
	}
	return ce
}

// Write encodes ent with fields, shrunk if it comes to max bytes or more,
// and writes it in one Write.
func (c *boundedCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	buf, err := c.enc.EncodeEntry(ent, fields)
	if err != nil {
		return err
	}
	if size := buf.Len(); size >= c.max {
		buf.Free()
		if buf, err = c.shrink(ent, fields, size); err != nil {
			return err
		}
	}
	_, err = c.out.Write(buf.Bytes())
	buf.Free()
	if err != nil {
		return err
	}
	if ent.Level > zapcore.ErrorLevel {
		// As ioCore: the process may be about to end.
		_ = c.Sync()
	}
	return nil
}

// Sync flushes the output.
func (c *boundedCore) Sync() error { return c.out.Sync() }

// shrink encodes ent, size bytes as it came, again with its context and
// fields cut to the passes' budgets until it is under max bytes; the
// entry says what was cut in a TruncatedKey field, its first.
func (c *boundedCore) shrink(ent zapcore.Entry, fields []zapcore.Field, size int) (*buffer.Buffer, error) {
	all := append(slices.Clip(c.ctx), fields...)
	for _, p := range shrinkPasses {
		var cut cuts
		e := cutEntry(ent, p.text, &cut)
		fs := make([]zapcore.Field, 1, 1+len(all))
		for _, f := range all {
			fs = append(fs, boundField(f, p.field, &cut))
		}
		fs[0] = zap.String(TruncatedKey, cut.say(size, c.max))
		buf, err := c.base.EncodeEntry(e, fs)
		if err != nil || buf.Len() < c.max {
			return buf, err
		}
		buf.Free()
	}
	// Too many fields even at the tightest budget: the message alone.
	var cut cuts
	e := cutEntry(ent, shrinkPasses[len(shrinkPasses)-1].text, &cut)
	cut.add("all %d fields dropped", len(all))
	return c.base.EncodeEntry(e, []zapcore.Field{zap.String(TruncatedKey, cut.say(size, c.max))})
}

// cuts lists what shrink cut from an entry, in words.
type cuts []string

func (c *cuts) add(format string, args ...any) { *c = append(*c, fmt.Sprintf(format, args...)) }

// say is the TruncatedKey field's sentence for an entry of size bytes.
func (c cuts) say(size, max int) string {
	return fmt.Sprintf("entry of %d bytes cut to stay under %d: %s", size, max, strings.Join(c, "; "))
}

// cutEntry is ent with its message and stack at most text bytes and its
// logger's name at most maxNameBytes.
func cutEntry(ent zapcore.Entry, text int, cut *cuts) zapcore.Entry {
	ent.Message = cutText("message", ent.Message, text, cut)
	ent.Stack = cutText("stack", ent.Stack, text, cut)
	ent.LoggerName = cutText("logger", ent.LoggerName, maxNameBytes, cut)
	return ent
}

// cutText is s cut to at most n bytes (on a rune boundary, and "…"
// after), noting the cut as what's.
func cutText(what, s string, n int, cut *cuts) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	cut.add("%s kept its first %d of %d bytes", what, i, len(s))
	return s[:i] + "…"
}

// boundField is f when it encodes in about budget bytes or fewer, else f
// cut: text to its first budget bytes, an array to the elements that fit,
// an object or a reflected value to the start of its JSON, as text.
func boundField(f zapcore.Field, budget int, cut *cuts) zapcore.Field {
	switch f.Type {
	case zapcore.StringType:
		if len(f.String) > budget {
			return zap.String(f.Key, cutText(f.Key, f.String, budget, cut))
		}
	case zapcore.ByteStringType, zapcore.BinaryType:
		if b, _ := f.Interface.([]byte); len(b) > budget {
			if f.Type == zapcore.BinaryType {
				// Base64 in the entry: a third larger.
				budget = budget * 3 / 4
			}
			cut.add("%s kept its first %d of %d bytes", f.Key, budget, len(b))
			f.Interface = b[:budget]
		}
	case zapcore.ErrorType, zapcore.StringerType:
		// Measured as encoded: an error's verbose form ("%+v", under
		// KEYVerbose) may be long where its message is not. Cut, either is
		// its text.
		if jsonLen(func(e zapcore.ObjectEncoder) error { f.AddTo(e); return nil }) <= budget {
			return f
		}
		var s string
		switch v := f.Interface.(type) {
		case error:
			s = v.Error()
		case fmt.Stringer:
			s = v.String()
		}
		return zap.String(f.Key, cutText(f.Key, s, budget, cut))
	case zapcore.ArrayMarshalerType:
		arr, _ := f.Interface.(zapcore.ArrayMarshaler)
		if arr == nil || jsonLen(func(e zapcore.ObjectEncoder) error { return e.AddArray(f.Key, arr) }) <= budget {
			return f
		}
		// Counted once here, for the sentence; encoded again the same.
		limited := &limitedArray{arr: arr, budget: budget}
		jsonLen(func(e zapcore.ObjectEncoder) error { return e.AddArray(f.Key, limited) })
		cut.add("%s kept its first %d of %d items", f.Key, limited.kept, limited.total)
		return zap.Array(f.Key, &limitedArray{arr: arr, budget: budget})
	case zapcore.ObjectMarshalerType, zapcore.ReflectType, zapcore.InlineMarshalerType:
		n := jsonLen(func(e zapcore.ObjectEncoder) error { f.AddTo(e); return nil })
		if n <= budget {
			return f
		}
		if f.Type == zapcore.InlineMarshalerType {
			// Its fields are the entry's own: no key to put text under.
			cut.add("inline fields of %d bytes dropped", n)
			return zap.Skip()
		}
		return zap.String(f.Key, cutText(f.Key+" (as JSON text)", jsonText(f), budget, cut))
	}
	return f
}

// limitedArray is arr's first elements that fit in budget bytes of JSON;
// MarshalLogArray counts the elements it kept and all of them.
type limitedArray struct {
	arr         zapcore.ArrayMarshaler
	budget      int
	kept, total int
}

// MarshalLogArray appends arr's elements to enc while they fit.
func (l *limitedArray) MarshalLogArray(enc zapcore.ArrayEncoder) error {
	le := &limitEncoder{enc: enc, left: l.budget}
	err := l.arr.MarshalLogArray(le)
	l.kept, l.total = le.kept, le.total
	return err
}

// limitEncoder passes on elements to enc while left, the bytes they may
// still take, lasts: then it counts the rest, and passes on none.
type limitEncoder struct {
	enc         zapcore.ArrayEncoder
	left        int
	full        bool
	kept, total int
}

// fits counts an element of about n bytes of JSON (a comma included) and
// reports whether it is to be passed on.
func (e *limitEncoder) fits(n int) bool {
	e.total++
	if e.full || n > e.left {
		e.full = true
		return false
	}
	e.left -= n
	e.kept++
	return true
}

// Sizes of elements in JSON, a comma included: at most, for numbers; for
// a time or a duration as the encoders here write them.
const (
	numberLen  = 25
	complexLen = 2*numberLen + 4
	timeLen    = 40
)

func (e *limitEncoder) AppendBool(v bool) {
	if e.fits(6) {
		e.enc.AppendBool(v)
	}
}

func (e *limitEncoder) AppendByteString(v []byte) {
	if e.fits(quotedLen(string(v))) {
		e.enc.AppendByteString(v)
	}
}

func (e *limitEncoder) AppendComplex128(v complex128) {
	if e.fits(complexLen) {
		e.enc.AppendComplex128(v)
	}
}

func (e *limitEncoder) AppendComplex64(v complex64) {
	if e.fits(complexLen) {
		e.enc.AppendComplex64(v)
	}
}

func (e *limitEncoder) AppendFloat64(v float64) {
	if e.fits(numberLen) {
		e.enc.AppendFloat64(v)
	}
}

func (e *limitEncoder) AppendFloat32(v float32) {
	if e.fits(numberLen) {
		e.enc.AppendFloat32(v)
	}
}

func (e *limitEncoder) AppendInt(v int) {
	if e.fits(numberLen) {
		e.enc.AppendInt(v)
	}
}

func (e *limitEncoder) AppendInt64(v int64) {
	if e.fits(numberLen) {
		e.enc.AppendInt64(v)
	}
}

func (e *limitEncoder) AppendInt32(v int32) {
	if e.fits(numberLen) {
		e.enc.AppendInt32(v)
	}
}

func (e *limitEncoder) AppendInt16(v int16) {
	if e.fits(numberLen) {
		e.enc.AppendInt16(v)
	}
}

func (e *limitEncoder) AppendInt8(v int8) {
	if e.fits(numberLen) {
		e.enc.AppendInt8(v)
	}
}

func (e *limitEncoder) AppendString(v string) {
	if e.fits(quotedLen(v)) {
		e.enc.AppendString(v)
	}
}

func (e *limitEncoder) AppendUint(v uint) {
	if e.fits(numberLen) {
		e.enc.AppendUint(v)
	}
}

func (e *limitEncoder) AppendUint64(v uint64) {
	if e.fits(numberLen) {
		e.enc.AppendUint64(v)
	}
}

func (e *limitEncoder) AppendUint32(v uint32) {
	if e.fits(numberLen) {
		e.enc.AppendUint32(v)
	}
}

func (e *limitEncoder) AppendUint16(v uint16) {
	if e.fits(numberLen) {
		e.enc.AppendUint16(v)
	}
}

func (e *limitEncoder) AppendUint8(v uint8) {
	if e.fits(numberLen) {
		e.enc.AppendUint8(v)
	}
}

func (e *limitEncoder) AppendUintptr(v uintptr) {
	if e.fits(numberLen) {
		e.enc.AppendUintptr(v)
	}
}

func (e *limitEncoder) AppendDuration(v time.Duration) {
	if e.fits(timeLen) {
		e.enc.AppendDuration(v)
	}
}

func (e *limitEncoder) AppendTime(v time.Time) {
	if e.fits(timeLen) {
		e.enc.AppendTime(v)
	}
}

func (e *limitEncoder) AppendArray(v zapcore.ArrayMarshaler) error {
	if e.fits(jsonLen(func(o zapcore.ObjectEncoder) error { return o.AddArray("", v) })) {
		return e.enc.AppendArray(v)
	}
	return nil
}

func (e *limitEncoder) AppendObject(v zapcore.ObjectMarshaler) error {
	if e.fits(jsonLen(func(o zapcore.ObjectEncoder) error { return o.AddObject("", v) })) {
		return e.enc.AppendObject(v)
	}
	return nil
}

func (e *limitEncoder) AppendReflected(v any) error {
	if e.fits(jsonLen(func(o zapcore.ObjectEncoder) error { return o.AddReflected("", v) })) {
		return e.enc.AppendReflected(v)
	}
	return nil
}

// quotedLen is the length of s as a JSON string and a comma, at most: a
// control character, a quote or a backslash takes up to six bytes.
func quotedLen(s string) int {
	n := 3 + len(s)
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x20 || b == '"' || b == '\\' {
			n += 5
		}
	}
	return n
}

// jsonEncoder is a bare JSON encoder, for measuring: an entry's fields
// alone, in braces.
func jsonEncoder() zapcore.Encoder { return zapcore.NewJSONEncoder(zapcore.EncoderConfig{}) }

// jsonLen is the length of what add adds to an object, in JSON (with the
// braces and newline around it: a few bytes more).
func jsonLen(add func(zapcore.ObjectEncoder) error) int {
	enc := jsonEncoder()
	_ = add(enc)
	buf, err := enc.EncodeEntry(zapcore.Entry{}, nil)
	if err != nil {
		return 0
	}
	defer buf.Free()
	return buf.Len()
}

// jsonText is f's value in JSON: {"key": value} without its key.
func jsonText(f zapcore.Field) string {
	enc := jsonEncoder()
	f.Key = "v"
	f.AddTo(enc)
	buf, err := enc.EncodeEntry(zapcore.Entry{}, nil)
	if err != nil {
		return ""
	}
	defer buf.Free()
	s := strings.TrimSuffix(strings.TrimSpace(buf.String()), "}")
	return strings.TrimPrefix(s, `{"v":`)
}
