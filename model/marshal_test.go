package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// Marshal's bytes are hashed into every stored snapshot (content hashes of
// districts and payloads), so they may never change: these are the bytes
// snapwriter has always written, whatever encodes them.

// htmlish is a type Marshal does not know, so encoding/json encodes it the
// way json.Marshal does (HTML escaped, a whole float without ".0").
type htmlish struct {
	A string
	F float64
	M map[string]any
}

func TestMarshalGolden(t *testing.T) {
	tru := true
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"whole float", 234.0,
			`234.0`},
		{"negative zero", math.Copysign(0, -1),
			`-0.0`},
		{"zero", 0.0,
			`0.0`},
		{"1e21", 1e21,
			`1e+21`},
		{"just below 1e21", 999999999999999900000.0,
			`999999999999999900000.0`},
		{"1e20", 1e20,
			`100000000000000000000.0`},
		{"1e-7", 1e-7,
			`1e-7`},
		{"1e-6", 1e-6,
			`0.000001`},
		{"smallest subnormal", 5e-324,
			`5e-324`},
		{"largest double", math.MaxFloat64,
			`1.7976931348623157e+308`},
		{"negative exponent float", -1.5e-10,
			`-1.5e-10`},
		{"2^53+1 as float", 9007199254740993.0,
			`9007199254740992.0`},
		{"fraction", 0.1,
			`0.1`},
		{"-1e-7", -1e-7,
			`-1e-7`},
		{"-1e-6", -1e-6,
			`-0.000001`},
		{"small with digits", 1.234e-8,
			`1.234e-8`},
		{"1e100", 1e100,
			`1e+100`},
		{"-1e21", -1e21,
			`-1e+21`},
		{"exact binary fraction", 123456789.125,
			`123456789.125`},
		{"float in a list", []any{0.5, 2.0, int64(2), -3.0},
			`[0.5,2.0,2,-3.0]`},
		{"max int64", int64(math.MaxInt64),
			`9223372036854775807`},
		{"min int64", int64(math.MinInt64),
			`-9223372036854775808`},
		{"int", 42,
			`42`},
		{"negative int", -7,
			`-7`},
		{"unicode", "Zürich – 東京 🎉",
			`"Zürich – 東京 🎉"`},
		{"control chars", "a\x00b\x01\x1f\t\n\r\"\\\x7f",
			"\"a\\u0000b\\u0001\\u001f\\t\\n\\r\\\"\\\\\x7f\""},
		{"html", "<a href=\"x\">&amp;</a>",
			`"<a href=\"x\">&amp;</a>"`},
		{"line separators", "a\u2028b\u2029c",
			`"a\u2028b\u2029c"`},
		{"invalid utf-8", "a\xffb\xc3",
			`"a\ufffdb\ufffd"`},
		{"encoded surrogate", "\xed\xa0\x80",
			`"\ufffd\ufffd\ufffd"`},
		{"replacement char", "\ufffd",
			`"�"`},
		{"empty string", "",
			`""`},
		{"null", nil,
			`null`},
		{"bools", []any{true, false},
			`[true,false]`},
		{"nested empties", map[string]any{"a": []any{}, "o": map[string]any{}, "n": []any{map[string]any{}, []any{}}},
			`{"a":[],"n":[{},[]],"o":{}}`},
		{"nil containers", map[string]any{"a": []any(nil), "o": map[string]any(nil), "s": []string(nil)},
			`{"a":[],"o":{},"s":[]}`},
		{"top-level nil array", []any(nil),
			`[]`},
		{"top-level nil object", map[string]any(nil),
			`{}`},
		{"strings", []string{"x", "<&>", ""},
			`["x","<&>",""]`},
		{"key order", map[string]any{"b": 1.0, "a": int64(1), "B": "x", "": nil, "aa": true, "é": 1, "Z": 2.5, "10": 0, "9": 0, "<": "&"},
			`{"":null,"10":0,"9":0,"<":"&","B":"x","Z":2.5,"a":1,"aa":true,"b":1.0,"é":1}`},
		{"keys escaped", map[string]any{"a\"b": 1, "\x00": 2, "\u2028": 3, "<tag>": 4},
			`{"\u0000":2,"<tag>":4,"a\"b":1,"\u2028":3}`},
		{"deep", map[string]any{"a": map[string]any{"b": []any{map[string]any{"c": []any{1.0, int64(2), "3", nil, false}}}}},
			`{"a":{"b":[{"c":[1.0,2,"3",null,false]}]}}`},
		{"number-like string", "1.0",
			`"1.0"`},
		{"PayloadMetadata", PayloadMetadata{Source: "s<&>", DistrictCount: 3, ConfiguredDistricts: []string{"1"}, IsClosingPeriodData: &tru, Extra: Object{"x": 1.0}},
			`{"configuredDistricts":["1"],"dataAsOfDate":"","districtCount":3,"fetchedAt":"","isClosingPeriodData":true,"processingDurationMs":0,"source":"s<&>","x":1.0}`},
		{"*PayloadMetadata", &PayloadMetadata{Source: "s", DistrictErrors: []any{map[string]any{"e": 2.0}}},
			`{"dataAsOfDate":"","districtCount":0,"districtErrors":[{"e":2.0}],"fetchedAt":"","processingDurationMs":0,"source":"s"}`},
		{"Snapshot", Snapshot{SnapshotID: "1", Status: "success", Errors: []string{"<e>"}, Rankings: Object{"r": 1.0}, Extra: Object{"x": []any{}}},
			`{"calculation_version":"","created_at":"","errors":["<e>"],"payload":{"districts":[],"metadata":{"dataAsOfDate":"","districtCount":0,"fetchedAt":"","processingDurationMs":0,"source":""}},"rankings":{"r":1.0},"schema_version":"","snapshot_id":"1","status":"success","x":[]}`},
		{"*Snapshot", &Snapshot{SnapshotID: "2", Payload: Payload{Districts: []DistrictStatistics{{DistrictID: "9", AsOfDate: "d"}, {data: Object{"districtId": "8", "f": 8.0}}}, Extra: Object{"p": "q"}}},
			`{"calculation_version":"","created_at":"","errors":[],"payload":{"districts":[{"asOfDate":"d","districtId":"9"},{"districtId":"8","f":8.0}],"metadata":{"dataAsOfDate":"","districtCount":0,"fetchedAt":"","processingDurationMs":0,"source":""},"p":"q"},"schema_version":"","snapshot_id":"2","status":""}`},
		{"other type: map[string]string", map[string]string{"b": "<", "a": "&"},
			`{"a":"\u0026","b":"\u003c"}`},
		{"other type nested", map[string]any{"m": map[string]string{"k": "<>"}, "l": []map[string]any{{"f": 234.0, "s": "<"}}},
			`{"l":[{"f":234,"s":"\u003c"}],"m":{"k":"\u003c\u003e"}}`},
		{"other type: struct", htmlish{A: "<&>", F: 234.0, M: map[string]any{"f": 1.0, "g": 1e21}},
			`{"A":"\u003c\u0026\u003e","F":234,"M":{"f":1,"g":1e+21}}`},
		{"other type: float32", float32(234),
			`234`},
		{"other type: float32 fraction", float32(0.1),
			`0.1`},
		{"other type: int32", int32(-5),
			`-5`},
		{"other type: uint64", uint64(math.MaxUint64),
			`18446744073709551615`},
		{"other type: json.Number", map[string]any{"n": json.Number("1.50")},
			`{"n":1.50}`},
		{"other type: time", time.Date(2026, 11, 20, 6, 0, 0, 5, time.UTC),
			`"2026-11-20T06:00:00.000000005Z"`},
		{"other type: []byte", []byte("hi"),
			`"aGk="`},
		{"other type: pointer to string", new(string),
			`""`},
		{"other type: nested Snapshot", map[string]any{"s": &Snapshot{SnapshotID: "<"}},
			`{"s":{"calculation_version":"","created_at":"","errors":[],"payload":{"districts":[],"metadata":{"dataAsOfDate":"","districtCount":0,"fetchedAt":"","processingDurationMs":0,"source":""}},"schema_version":"","snapshot_id":"<","status":""}}`},
		{"other type: struct with PayloadMetadata", struct{ M PayloadMetadata }{PayloadMetadata{Source: "<"}},
			`{"M":{"dataAsOfDate":"","districtCount":0,"fetchedAt":"","processingDurationMs":0,"source":"\u003c"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Marshal(c.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("Marshal(%#v)\n got %s\nwant %s", c.v, got, c.want)
			}
		})
	}
}

func TestMarshalRefuses(t *testing.T) {
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"NaN", math.NaN(), "model: NaN cannot be encoded as JSON"},
		{"+Inf", math.Inf(1), "model: +Inf cannot be encoded as JSON"},
		{"-Inf inside", map[string]any{"x": []any{math.Inf(-1)}}, "model: -Inf cannot be encoded as JSON"},
		{"channel", map[string]any{"c": make(chan int)}, "json: unsupported type: chan int"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := Marshal(c.v)
			if err == nil || err.Error() != c.want {
				t.Errorf("Marshal = %s, %v; want error %q", b, err, c.want)
			}
		})
	}
}

// Whole generated snapshots, and their payloads as payload hashes see them
// (no districts, no status), by the SHA-256 of their encoding.
func TestMarshalGoldenGenerated(t *testing.T) {
	cases := []struct {
		districts      int
		seed           int64
		size           int
		whole, payload string
	}{
		// Computed by Marshal through encoding/json, before
		// canonicalEncoder (commit f737ccb).
		{1, 1, 8287, "96d022f62bcd30e1d0c302d540675769cafaebffd488dbb09daeffdeb41e863a", "465057ea2cc0bc0e5180e6540abc2355f4ac1452d441b394eb1d7cab3cdc8011"},
		{3, 7, 22146, "dc8595110feb36a6eba85df4125b4bf75554aa5a54df98d22d1c8338fe939252", "4250416c1eac3562e85f6186c5f8c115c9c409aab237c880e5fcd59a14f090d8"},
		{40, 42, 475834, "8551ef2907269cb6dbefe4862a7064a8fba783345663ef74619bcc97b1f40650", "40aade94df6b7d202cad74deba71e82e7fb6ffd8390002f983a6fa21ba996357"},
		{132, 1, 1539700, "c39b64aa2efefdd079c4e5d931309f36601060d3dbf0e6087f2479de62929215", "367414f980345b80fd6b4b6488675c168d845ff5f32c89d7ee448138f6b68db2"},
	}
	for _, c := range cases {
		s := Generate("2026-11-20", c.districts, c.seed)
		b, err := Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); len(b) != c.size || hex.EncodeToString(sum[:]) != c.whole {
			t.Errorf("%d districts, seed %d: %d bytes, sha256 %x; want %d bytes, %s", c.districts, c.seed, len(b), sum, c.size, c.whole)
		}
		p := *s
		p.Payload.Districts, p.Status = nil, ""
		if b, err = Marshal(p); err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != c.payload {
			t.Errorf("%d districts, seed %d: payload sha256 %x, want %s", c.districts, c.seed, sum, c.payload)
		}
	}
}

// BenchmarkMarshal encodes a 132-district snapshot, as a write hashes every
// district and the payload.
func BenchmarkMarshal(b *testing.B) {
	s := Generate("2026-11-20", 132, 1)
	data, err := Marshal(s)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(s); err != nil {
			b.Fatal(err)
		}
	}
}
