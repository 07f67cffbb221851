package model

import (
	"crypto/sha256"
	"hash"
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/internal/walkcount"
)

// A district's data is checked, sized twice (as Firestore stores it, and
// as a commit request carries it) and hashed before it is written. Each of
// those was a walk of its own over the tree, and the hash a whole canonical
// JSON copy of it: valueWalk does them all in one walk, writing the
// canonical JSON into the hash as it goes. Open's streaming pass runs it on
// each district as it is read; a district held in memory runs it when it
// is validated for a write (Prepare) or asked for its Summary.

// hashFlush is how much canonical JSON a walk holds before it hashes it.
const hashFlush = 32 << 10

// valueWalk is one walk over a canonical value. It reports what Firestore
// cannot store (NaN and infinities, invalid UTF-8, arrays directly inside
// arrays, reserved or oversize field names, nesting deeper than Firestore
// allows) to add, with their paths; returns the value's FirestoreSize and
// EncodedSize; notes a double equal to an integer; and, when enc is set,
// writes the value's canonical JSON (Marshal's bytes) into h, visiting
// maps in sorted key order. Without enc it visits them in Go's order.
// Below a problem that ends the checks of a subtree (too deep, an array
// in an array) it stays silent, but still sizes and encodes.
type valueWalk struct {
	root  string
	steps []pathElem // the current path, so that nothing is allocated per value
	add   func(path, format string, args ...any)
	// wholeDouble: a double equal to an integer (IntegerValue) was seen.
	wholeDouble bool
	// foreign: a value of a type that is not canonical was seen; its
	// sizes are those of the reference functions, but nothing about its
	// encoding is (Summary then takes the reference path).
	foreign bool

	enc *canonicalEncoder // nil: no encoding
	buf []byte            // canonical JSON not hashed yet
	h   hash.Hash
	err error // the first value canonical JSON cannot hold (NaN, infinity)
}

func (w *valueWalk) report(format string, args ...any) {
	if w.add != nil {
		w.add(formatPath(w.root, w.steps), format, args...)
	}
}

// walk walks v, at depth (the root of a document's field is 1) and
// directly inside an array when inArray; quiet stops the checks. size is
// v's FirestoreSize, encoded its EncodedSize.
func (w *valueWalk) walk(v any, depth int, inArray, quiet bool) (size, encoded int) {
	if !quiet && depth > maxDepth {
		w.report("nested more than %d levels deep, Firestore's limit", maxDepth)
		quiet = true
	}
	hashing := w.enc != nil
	switch x := v.(type) {
	case nil:
		if hashing {
			w.buf = append(w.buf, "null"...)
		}
		return 1, 12
	case bool:
		if hashing {
			w.buf = strconv.AppendBool(w.buf, x)
		}
		return 1, 12
	case string:
		if !quiet && !utf8.ValidString(x) {
			w.report("string is not valid UTF-8")
		}
		if hashing {
			w.buf = appendJSONString(w.buf, x)
			w.flush()
		}
		return len(x) + 1, len(x) + 8
	case int64:
		if hashing {
			w.buf = strconv.AppendInt(w.buf, x, 10)
		}
		return 8, 12
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			if !quiet {
				w.report("%v is not a finite number", x)
			}
			if w.err == nil {
				w.err = errNonFinite(x)
			}
		} else if hashing {
			w.buf, _ = appendFloat(w.buf, x)
		}
		if !w.wholeDouble {
			_, w.wholeDouble = IntegerValue(x)
		}
		return 8, 12
	case []any:
		if !quiet && inArray {
			w.report("an array directly inside an array cannot be stored in Firestore")
			quiet = true
		}
		encoded = 8
		if hashing {
			w.buf = append(w.buf, '[')
		}
		for i, e := range x {
			if hashing && i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.steps = append(w.steps, pathElem{index: i})
			s, n := w.walk(e, depth+1, true, quiet)
			w.steps = w.steps[:len(w.steps)-1]
			size += s
			encoded += n + 4
		}
		if hashing {
			w.buf = append(w.buf, ']')
			w.flush()
		}
		return size, encoded
	case map[string]any:
		encoded = 8
		if !hashing {
			for k, e := range x {
				s, n := w.member(k, e, depth, quiet)
				size += s
				encoded += n
			}
			return size, encoded
		}
		keys, base := w.enc.sortedKeys(x)
		w.enc.depth++
		w.buf = append(w.buf, '{')
		for i, k := range keys {
			if i > 0 {
				w.buf = append(w.buf, ',')
			}
			w.buf = appendJSONString(w.buf, k)
			w.buf = append(w.buf, ':')
			s, n := w.member(k, x[k], depth, quiet)
			size += s
			encoded += n
		}
		w.enc.depth--
		w.enc.release(base)
		w.buf = append(w.buf, '}')
		w.flush()
		return size, encoded
	default:
		w.foreign = true
		if quiet {
			return FirestoreSize(v), EncodedSize(v)
		}
		w.report("a %T is not a JSON value", v)
		return 8, EncodedSize(v)
	}
}

// member walks the member k: e of a map at depth, checking its name.
func (w *valueWalk) member(k string, e any, depth int, quiet bool) (size, encoded int) {
	w.steps = append(w.steps, pathElem{key: k, isKey: true})
	if !quiet {
		switch {
		case k == "":
			w.report("empty field name cannot be stored in Firestore")
		case len(k) > maxFieldNameBytes:
			w.report("field name is %d bytes, over Firestore's %d", len(k), maxFieldNameBytes)
		case len(k) >= 4 && strings.HasPrefix(k, "__") && strings.HasSuffix(k, "__"):
			w.report("field name %q is reserved by Firestore (__name__ form)", k)
		case !utf8.ValidString(k):
			w.report("field name is not valid UTF-8")
		}
	}
	s, n := w.walk(e, depth+1, false, quiet)
	w.steps = w.steps[:len(w.steps)-1]
	return len(k) + 1 + s, len(k) + n + 12
}

// flush hashes the canonical JSON held once there is enough of it.
func (w *valueWalk) flush() {
	if len(w.buf) >= hashFlush {
		w.h.Write(w.buf)
		w.buf = w.buf[:0]
	}
}

// summaryScratch is the space one summarizing goroutine reuses from
// district to district.
type summaryScratch struct {
	raw   []byte // a district's input bytes (Open)
	buf   []byte // canonical JSON not hashed yet
	enc   canonicalEncoder
	h     hash.Hash
	steps []pathElem
	// digest receives h's sum: summed into a result of its own, which
	// h.Sum cannot see through, it would be allocated at every call.
	digest [sha256.Size]byte
}

var scratchPool = sync.Pool{New: func() any { return new(summaryScratch) }}

// A Summarizer gives values' DataSummary, each from one walk (valueWalk)
// that hashes its canonical JSON and sizes it both ways, reusing its space
// from one value to the next: for a caller that summarizes many small
// values, such as a writer the envelopes of its district documents. Its
// zero value is ready to use; it is not safe for concurrent use.
type Summarizer struct {
	sc summaryScratch
}

// Summarize returns o's DataSummary, as DistrictStatistics.Summary gives
// it of a district's data o. An error means that o has no canonical JSON
// (NaN, infinity), or holds a type Marshal cannot write.
func (z *Summarizer) Summarize(o Object) (DataSummary, error) {
	sum, _, err := summarizeData(o, "", nil, &z.sc)
	return sum, err
}

// summarizeData walks district data o once (valueWalk): its problems go
// to add (nil: not reported), with paths below root; its summary is
// returned, and checked is the size the checks found (FirestoreSize,
// which Validate holds against the document limit). An error means that
// o has no canonical JSON (NaN, infinity), or a type Marshal cannot write.
func summarizeData(o Object, root string, add func(path, format string, args ...any), sc *summaryScratch) (sum DataSummary, checked int, err error) {
	walkcount.Add(walkcount.Walk)
	if sc.h == nil {
		sc.h = sha256.New()
	}
	sc.h.Reset()
	w := valueWalk{root: root, steps: sc.steps[:0], add: add, enc: &sc.enc, buf: sc.buf[:0], h: sc.h}
	// The data is a field of its document: depth 1, as Validate checks it.
	checked, encoded := w.walk(o, 1, false, false)
	sc.steps, sc.enc.depth = w.steps[:0], 0
	if w.foreign {
		// A library caller's own types: the reference functions, as
		// Marshal writes them (encoding/json), on the whole value.
		sc.buf = w.buf[:0]
		sum, err := referenceSummary(o)
		return sum, checked, err
	}
	sc.h.Write(w.buf)
	sc.buf = w.buf[:0]
	if w.err != nil {
		return DataSummary{}, checked, w.err
	}
	sum = DataSummary{FirestoreSize: checked, EncodedSize: encoded, NoWholeDoubles: !w.wholeDouble}
	copy(sum.Digest[:], sc.h.Sum(sc.digest[:0]))
	return sum, checked, nil
}

// referenceSummary is the summary of data holding values of foreign
// types, from the reference functions: Marshal (encoding/json for those
// types), FirestoreSize, EncodedSize and holdsWholeDouble.
func referenceSummary(o Object) (DataSummary, error) {
	b, err := Marshal(o)
	if err != nil {
		return DataSummary{}, err
	}
	return DataSummary{Digest: sha256.Sum256(b), FirestoreSize: FirestoreSize(o), EncodedSize: EncodedSize(o),
		NoWholeDoubles: !holdsWholeDouble(o)}, nil
}
