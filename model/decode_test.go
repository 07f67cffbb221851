package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// decodeProblem decodes in and returns its single problem, failing the test
// when it decodes or fails otherwise.
func decodeProblem(t *testing.T, in string) Problem {
	t.Helper()
	_, err := Decode(strings.NewReader(in))
	var ve *ValidationError
	if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("Decode(%.80q) = %v, want a ValidationError", in, err)
	}
	if len(ve.Problems) != 1 {
		t.Fatalf("want one problem, got %v", err)
	}
	return ve.Problems[0]
}

// A key given twice in one object is refused at any depth, naming the key,
// its path and where the second one is, instead of keeping the last value.
func TestDecodeRefusesDuplicateKeys(t *testing.T) {
	district := `{"districtId":"1","asOfDate":"2026-11-20","membership":{"total":5,"byClub":[{"club":"a","n":1,"n":2}]}}`
	cases := []struct {
		name, in, path, want string
	}{
		{"district id", `{"districtId":"1","districtId":"99"}`, "$.districtId", `duplicate key "districtId" at line 1, column 19`},
		{"top level", `{"payload":{},"status":"success","payload":{}}`, "$.payload", `duplicate key "payload"`},
		{"in district data", `{"payload":{"metadata":{},"districts":[` + district + `]}}`,
			"$.payload.districts[0].membership.byClub[0].n", `duplicate key "n"`},
		{"in rankings", `{"rankings":{"rankings":[{"districtId":"1","score":1,` + "\n" + `  "score":2}]}}`,
			"$.rankings.rankings[0].score", `duplicate key "score" at line 2, column 3`},
		{"spelled differently", `{"payload":{"metadata":{"source":"a","\u0073ource":"b"}}}`, "$.payload.metadata.source", `duplicate key "source"`},
		{"odd key", `{"x":{"% Club Growth":1,"% Club Growth":1}}`, `$.x["% Club Growth"]`, `duplicate key "% Club Growth"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := decodeProblem(t, c.in)
			if p.Path != c.path || !strings.Contains(p.Message, c.want) {
				t.Errorf("got %s\nwant %s: …%s…", p, c.path, c.want)
			}
		})
	}
	// Equal keys in different objects are no duplicates.
	if _, err := DecodeObject(strings.NewReader(`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`)); err != nil {
		t.Error(err)
	}
}

// A UTF-16 surrogate escape that is not half of a pair is refused with its
// path, instead of becoming U+FFFD; a proper pair decodes to its character.
func TestDecodeRefusesLoneSurrogates(t *testing.T) {
	cases := []struct {
		name, in, path, want string
	}{
		{"lone high", `{"a":"\ud800"}`, "$.a", `invalid surrogate \ud800 in a string at line 1, column 7: a high surrogate`},
		{"high then not low", `{"a":"x\uD800\u0041"}`, "$.a", `invalid surrogate \uD800 in a string at line 1, column 8: a high surrogate`},
		{"high then high", `{"a":"\ud800\ud800"}`, "$.a", `invalid surrogate \ud800`},
		{"lone low", `{"a":"\udc00"}`, "$.a", `invalid surrogate \udc00 in a string at line 1, column 7: a low surrogate`},
		{"pair reversed", `{"a":["ok","\ude00\ud83d"]}`, "$.a[1]", `invalid surrogate \ude00`},
		{"in a key", `{"payload":{"m\udfff":1}}`, "$.payload", `invalid surrogate \udfff in a key`},
		{"in district data", `{"payload":{"districts":[{"districtId":"1","name":"\ud83d"}]}}`, "$.payload.districts[0].name", `invalid surrogate \ud83d`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := decodeProblem(t, c.in)
			if p.Path != c.path || !strings.Contains(p.Message, c.want) {
				t.Errorf("got %s\nwant %s: …%s…", p, c.path, c.want)
			}
		})
	}
	o, err := DecodeObject(strings.NewReader(`{"a":"\ud83d\ude00 \u00e9"}`))
	if err != nil || o["a"] != "😀 é" {
		t.Errorf("a surrogate pair: %q, %v", o["a"], err)
	}
}

// A byte-order mark is named as such, for stdin, a file and a file of a
// snapshot directory, not reported as an invalid character.
func TestDecodeRefusesByteOrderMarks(t *testing.T) {
	for _, c := range []struct{ name, bom, want string }{
		{"UTF-8", "\xEF\xBB\xBF", "(UTF-8, EF BB BF)"},
		{"UTF-16LE", "\xFF\xFE", "(UTF-16 little-endian, FF FE)"},
		{"UTF-16BE", "\xFE\xFF", "(UTF-16 big-endian, FE FF)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.bom + minimal
			if c.name != "UTF-8" {
				in = c.bom + "{\x00}\x00" // what a UTF-16 editor writes
			}
			const msg = "file starts with a byte-order mark "
			if p := decodeProblem(t, in); p.Path != "$" || !strings.Contains(p.Message, msg+c.want) {
				t.Errorf("stdin: %s", p)
			}
			dir := t.TempDir()
			file := filepath.Join(dir, "snap.json")
			if err := os.WriteFile(file, []byte(in), 0o600); err != nil {
				t.Fatal(err)
			}
			// metadata.json of a snapshot directory.
			if err := os.Rename(file, filepath.Join(dir, "metadata.json")); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDir(dir)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "metadata.json: $: "+msg) {
				t.Errorf("LoadDir: %v", err)
			}
		})
	}
	// U+FEFF inside a string is a character like any other.
	if o, err := DecodeObject(strings.NewReader("{\"a\":\"\xEF\xBB\xBF\"}")); err != nil || o["a"] != "\uFEFF" {
		t.Errorf("U+FEFF in a string: %v", err)
	}
}

// A duplicate key in a district file of a snapshot directory is reported
// with the file's name.
func TestLoadDirDuplicateKey(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"metadata.json":   `{"snapshotId":"s","dataAsOfDate":"2026-11-20"}`,
		"district_1.json": `{"districtId":"1","asOfDate":"2026-11-20","clubs":{"total":1,"total":2}}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, err := LoadDir(dir)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `district_1.json: $.clubs.total: duplicate key "total"`) {
		t.Errorf("LoadDir: %v", err)
	}
}

// The guarantees the decoder had before it became strict still hold.
func TestDecodeKeepsItsLimits(t *testing.T) {
	cases := []struct{ name, in, path, want string }{
		{"empty", "", "$", "the input is empty"},
		{"blank", " \n\t", "$", "the input is empty"},
		{"truncated", `{"payload":{"districts":[{"districtId":"1"`, "$.payload.districts[0]", "the input ends before the value is complete"},
		{"binary", "\x89PNG\r\n\x1a\n", "$", "line 1, column 1: byte 0x89 is not valid UTF-8"},
		{"invalid UTF-8 in a string", "{\"a\":\"caf\xe9\"}", "$.a", "line 1, column 10: byte 0xe9 is not valid UTF-8"},
		{"syntax", "{\n  \"a\": tru\n}", "$.a", "invalid JSON at line 2, column 11"},
		{"trailing data", `{"a":1} {"b":2}`, "$", "unexpected data after the top-level value at line 1, column 9"},
		{"1e400", `{"a":[1e400]}`, "$.a[0]", "number 1e400 is outside the range of a double"},
		{"2^63", `{"a":{"b":9223372036854775808}}`, "$.a.b", "integer 9223372036854775808 is outside the 64-bit range"},
		{"100k deep", strings.Repeat("[", 100000), "$" + strings.Repeat("[0]", maxInputDepth), "nested more than 64 levels deep"},
		{"65 deep objects", strings.Repeat(`{"a":`, 65) + "1" + strings.Repeat("}", 65), "$" + strings.Repeat(".a", 64), "nested more than 64 levels deep"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := decodeProblem(t, c.in)
			if p.Path != c.path || !strings.Contains(p.Message, c.want) {
				t.Errorf("got %s\nwant %s: …%s…", p, c.path, c.want)
			}
		})
	}
	// 64 levels decode (Validate then names what Firestore cannot store).
	if _, err := decodeValue(strings.NewReader(strings.Repeat("[", 64) + strings.Repeat("]", 64))); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	o, err := DecodeObject(strings.NewReader(`{"i":-9223372036854775808,"z":-0,"f":1.0,"e":1e2,"s":"a\u0000b","n":null,"a":[],"o":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Object{"i": int64(-9223372036854775808), "z": int64(0), "f": 1.0, "e": 100.0, "s": "a\x00b", "n": nil, "a": []any{}, "o": Object{}}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("decoded %#v\nwant %#v", o, want)
	}
}

// Property: on valid input without duplicate keys, the decoder agrees with
// encoding/json (numbers read as json.Number, then canonicalised), however
// the text is spaced.
func TestPropertyDecodeAgreesWithEncodingJSON(t *testing.T) {
	check := func(t interface{ Fatalf(string, ...any) }, b []byte) {
		got, err := decodeValue(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("decodeValue: %v\n%s", err, b)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("encoding/json: %v", err)
		}
		want, err := fromUseNumber(v)
		if err != nil {
			t.Fatalf("canonicalising encoding/json's value: %v", err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoders disagree on\n%s", b)
		}
	}
	b, err := Marshal(Generate("2026-11-20", 30, 3))
	if err != nil {
		t.Fatal(err)
	}
	check(t, b)
	var indented bytes.Buffer
	if err := json.Indent(&indented, b, "", "\t"); err != nil {
		t.Fatal(err)
	}
	check(t, indented.Bytes())
	rapid.Check(t, func(rt *rapid.T) {
		b, err := Marshal(value(4).Draw(rt, "v"))
		if err != nil {
			rt.Fatal(err)
		}
		if rapid.Bool().Draw(rt, "indent") {
			var buf bytes.Buffer
			_ = json.Indent(&buf, b, " ", "  ")
			b = buf.Bytes()
		}
		check(rt, b)
	})
}

// fromUseNumber converts what encoding/json decodes with UseNumber into
// canonical form: a number with a fraction or exponent is a float64, the
// rest int64.
func fromUseNumber(v any) (any, error) {
	switch x := v.(type) {
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return x.Float64()
		}
		return x.Int64()
	case []any:
		for i, e := range x {
			c, err := fromUseNumber(e)
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
	case map[string]any:
		for k, e := range x {
			c, err := fromUseNumber(e)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
	}
	return v, nil
}

// An oversize root names its largest fields, so that a single unknown
// top-level field is blamed rather than "metadata, manifest, rankings".
func TestValidateNamesRootCulprit(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(s *Snapshot)
		first string
	}{
		{"unknown top-level field", func(s *Snapshot) { s.Extra = Object{"blob": strings.Repeat("x", 2<<20), "small": int64(1)} },
			"inputExtra.snapshot.blob (from $.blob) 2097158 bytes"},
		{"unknown payload field", func(s *Snapshot) { s.Payload.Extra = Object{"% big": strings.Repeat("x", 2<<20)} },
			`inputExtra.payload["% big"] (from $.payload["% big"]) 2097159 bytes`},
		{"rankings", func(s *Snapshot) { s.Rankings["blob"] = strings.Repeat("r", 2<<20) }, "rankings (from $.rankings) "},
		{"metadata", func(s *Snapshot) { s.Errors = []string{strings.Repeat("e", 2<<20)} }, "metadata (from $.payload.metadata and $.errors) "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Generate("2026-11-20", 5, 1)
			c.edit(s)
			err := Validate(s, "2026-11-20")
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("err = %v", err)
			}
			for _, p := range ve.Problems {
				if p.Path == "$" && strings.Contains(p.Message, "root document") {
					if !strings.Contains(p.Message, "its largest fields: "+c.first) {
						t.Errorf("largest field is not %q first:\n%s", c.first, p.Message)
					}
					return
				}
			}
			t.Errorf("no root problem in %v", err)
		})
	}
}
