package model

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

func mustDecode(t *testing.T, s string) *Snapshot {
	t.Helper()
	snap, err := Decode(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const minimal = `{"snapshot_id":"1","created_at":"c","schema_version":"1","calculation_version":"2","status":"success","errors":[],
 "payload":{"districts":[{"districtId":"42","asOfDate":"2026-11-20","n":3,"f":3.0,"g":0.5,"big":9007199254740993,
   "rows":[{"Mem. Base":20,"% Club Growth":null}],"newField":{"x":[1,"a",true]}}],
  "metadata":{"source":"s","fetchedAt":"t","dataAsOfDate":"2026-11-20","districtCount":1,"processingDurationMs":5,"futureField":1.5}},
 "rankings":{"metadata":{"rankingVersion":"v"}},"topLevelExtra":[1,2]}`

func TestDecodeKeepsTypesAndUnknownFields(t *testing.T) {
	s := mustDecode(t, minimal)
	d := s.Payload.Districts[0].data
	if v, ok := d["n"].(int64); !ok || v != 3 {
		t.Errorf("n = %T %v, want int64 3", d["n"], d["n"])
	}
	if v, ok := d["f"].(float64); !ok || v != 3 {
		t.Errorf("f = %T %v, want float64 3", d["f"], d["f"])
	}
	if v, ok := d["big"].(int64); !ok || v != 9007199254740993 {
		t.Errorf("big = %T %v: integers beyond 2^53 must stay exact", d["big"], d["big"])
	}
	if s.Payload.Metadata.Extra["futureField"] != 1.5 || s.Extra["topLevelExtra"] == nil {
		t.Errorf("unknown fields dropped: %v %v", s.Payload.Metadata.Extra, s.Extra)
	}
	if s.Payload.Districts[0].DistrictID != "42" || s.Payload.Districts[0].AsOfDate != "2026-11-20" {
		t.Errorf("district = %+v", s.Payload.Districts[0])
	}
	// Encoding and decoding again changes nothing, a whole float included.
	b := mustMarshal(t, s)
	if !bytes.Contains(b, []byte(`"f":3.0`)) {
		t.Errorf("whole float lost its fraction: %s", b)
	}
	back := mustDecode(t, string(b))
	if !Equal(s, back) {
		t.Errorf("round trip differs: %s", Diff(s, back))
	}
	// Python-style comparison of the raw JSON trees: same values.
	var a, c any
	_ = json.Unmarshal([]byte(minimal), &a)
	_ = json.Unmarshal(b, &c)
	if !jsonEqual(a, c) {
		t.Errorf("re-encoded JSON differs from the input:\n%s", b)
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestEqualIsTypeStrict(t *testing.T) {
	a := mustDecode(t, minimal)
	b := mustDecode(t, minimal)
	b.Payload.Districts[0].data["n"] = float64(3)
	if Equal(a, b) {
		t.Error("int64 3 and float64 3 compare equal")
	}
	if d := Diff(a, b); !strings.Contains(d, "$.payload.districts[0].n") {
		t.Errorf("diff does not name the path: %q", d)
	}
	b = mustDecode(t, minimal)
	delete(b.Payload.Districts[0].data, "newField")
	if Equal(a, b) || !strings.Contains(Diff(a, b), "newField") {
		t.Errorf("missing key not reported: %q", Diff(a, b))
	}
}

func TestDecodeErrors(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"malformed", `{"snapshot_id": "x",`, "JSON"},
		{"syntax position", "{\n  \"a\": tru\n}", "line 2"},
		{"trailing garbage", minimal + "}", "after the top-level value"},
		{"not an object", `[1]`, "want a JSON object"},
		{"districts not an array", `{"payload":{"districts":{},"metadata":{}}}`, "$.payload.districts: want an array"},
		{"district not an object", `{"payload":{"districts":[1],"metadata":{}}}`, "$.payload.districts[0]: want a district object"},
		{"districtId a number", `{"payload":{"districts":[{"districtId":7}],"metadata":{}}}`, "$.payload.districts[0].districtId: want a string"},
		{"count a float", `{"payload":{"districts":[],"metadata":{"districtCount":1.5}}}`, "districtCount: want an integer, got the number 1.5"},
		{"no payload", `{"snapshot_id":"x"}`, "$.payload: missing"},
		{"integer overflow", `{"payload":{"districts":[{"districtId":"1","n":99999999999999999999}],"metadata":{}}}`, "$.payload.districts[0].n: integer 99999999999999999999"},
		{"empty", ``, "JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(strings.NewReader(c.in))
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %q, want it to mention %q", err, c.want)
			}
		})
	}
	// Several type problems are reported together.
	_, err := Decode(strings.NewReader(`{"status":1,"payload":{"districts":[{"districtId":1},{"districtId":true}],"metadata":{}}}`))
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 3 {
		t.Errorf("want 3 problems, got %v", err)
	}
}

func TestValidate(t *testing.T) {
	const day = "2026-11-20"
	cases := []struct {
		name string
		id   string
		edit func(s *Snapshot)
		path string
		want string
	}{
		{"unreal id", "2026-02-30", nil, "snapshot id", "2026-02-30"},
		{"id format", "20261120", nil, "snapshot id", "20261120"},
		{"no id", "", func(s *Snapshot) { s.Payload.Metadata.DataAsOfDate = "" }, "$.payload.metadata.dataAsOfDate", "missing"},
		{"unreal dataAsOfDate", day, func(s *Snapshot) { s.Payload.Metadata.DataAsOfDate = "2026-13-01" }, "$.payload.metadata.dataAsOfDate", "2026-13-01"},
		{"bad district id", day, func(s *Snapshot) { setID(s, 2, "4/2") }, "$.payload.districts[2].districtId", "4/2"},
		{"empty district id", day, func(s *Snapshot) { setID(s, 1, "") }, "$.payload.districts[1].districtId", "missing"},
		{"long district id", day, func(s *Snapshot) { setID(s, 1, strings.Repeat("9", 65)) }, "$.payload.districts[1].districtId", "not a district id"},
		{"duplicate", day, func(s *Snapshot) { setID(s, 3, "2") }, "$.payload.districts[3].districtId", "duplicate district id \"2\" (also at districts[1])"},
		{"no districts", day, func(s *Snapshot) { s.Payload.Districts = nil }, "$.payload.districts", "no districts"},
		{"oversize", day, func(s *Snapshot) { s.Payload.Districts[0].data["blob"] = strings.Repeat("x", 1<<20) }, "$.payload.districts[0]", "1 MiB"},
		{"NaN", day, func(s *Snapshot) { s.Payload.Districts[0].data["membership"].(Object)["changePercent"] = math.NaN() }, "$.payload.districts[0].membership.changePercent", "finite"},
		{"Inf in rankings", day, func(s *Snapshot) { s.Rankings["x"] = math.Inf(1) }, "$.rankings.x", "finite"},
		{"nested array", day, func(s *Snapshot) { s.Payload.Districts[0].data["m"] = []any{[]any{int64(1)}} }, "$.payload.districts[0].m[0]", "array directly inside an array"},
		{"reserved key", day, func(s *Snapshot) { s.Extra = Object{"__name__": int64(1)} }, "$.__name__", "reserved"},
		{"empty key", day, func(s *Snapshot) { s.Payload.Metadata.Extra = Object{"": int64(1)} }, `$.payload.metadata[""]`, "empty field name"},
		{"bad utf8", day, func(s *Snapshot) { s.Payload.Districts[0].data["s"] = "\xff" }, "$.payload.districts[0].s", "UTF-8"},
		{"id mismatch", day, func(s *Snapshot) { s.Payload.Districts[0].DistrictID = "999" }, "$.payload.districts[0].districtId", "disagrees"},
		{"bad status", day, func(s *Snapshot) { s.Status = "done" }, "$.status", "done"},
		{"root too large", day, func(s *Snapshot) { s.Rankings["blob"] = strings.Repeat("r", 1<<20) }, "$", "root document"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Generate(day, 5, 1)
			if c.edit != nil {
				c.edit(s)
			}
			err := Validate(s, c.id)
			var ve *ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("err = %v, want a ValidationError", err)
			}
			for _, p := range ve.Problems {
				if p.Path == c.path && strings.Contains(p.Message, c.want) {
					return
				}
			}
			t.Errorf("no problem at %s mentioning %q in:\n%v", c.path, c.want, err)
		})
	}
	t.Run("all problems at once", func(t *testing.T) {
		s := Generate(day, 5, 1)
		setID(s, 0, "a-b")
		setID(s, 4, "2")
		s.Payload.Metadata.DataAsOfDate = "2026-02-29"
		var ve *ValidationError
		if err := Validate(s, "2026-02-29"); !errors.As(err, &ve) || len(ve.Problems) != 4 {
			t.Errorf("want 4 problems (id, date, district id, duplicate), got %v", err)
		}
	})
}

func setID(s *Snapshot, i int, id string) {
	s.Payload.Districts[i].DistrictID = id
	s.Payload.Districts[i].data["districtId"] = id
}

func TestValidDate(t *testing.T) {
	for s, want := range map[string]bool{"2026-11-20": true, "2024-02-29": true, "2026-02-29": false,
		"2026-13-01": false, "2026-1-01": false, "20261120": false, "": false, "2026-11-20T00:00:00Z": false} {
		if ValidDate(s) != want {
			t.Errorf("ValidDate(%q) = %v", s, !want)
		}
	}
}

func TestGenerate(t *testing.T) {
	for _, n := range []int{1, 132, 200, 5000} {
		s := Generate("2026-11-20", n, 7)
		if err := Validate(s, "2026-11-20"); err != nil {
			t.Fatalf("n=%d: generated snapshot invalid: %v", n, err)
		}
		if len(s.Payload.Districts) != n || s.Payload.Metadata.DistrictCount != int64(n) {
			t.Fatalf("n=%d: %d districts", n, len(s.Payload.Districts))
		}
		for _, d := range s.Payload.Districts {
			b := mustMarshal(t, d.data)
			if len(b) < 2000 || len(b) > 20000 {
				t.Errorf("district %s is %d bytes, want 2–20 KB", d.DistrictID, len(b))
			}
		}
	}
	ids := GeneratedDistrictIDs(134)
	if ids[0] != "1" || ids[129] != "130" || ids[130] != "F" || ids[131] != "U" || ids[132] != "131" {
		t.Errorf("ids = %v…", ids[125:])
	}
	a, b := Generate("2026-11-20", 20, 3), Generate("2026-11-20", 20, 3)
	if !Equal(a, b) {
		t.Error("same seed, different snapshots")
	}
	if Equal(a, Generate("2026-11-20", 20, 4)) {
		t.Error("different seeds, same snapshot")
	}
	// Generated snapshots survive the JSON round trip.
	back := mustDecode(t, string(mustMarshal(t, a)))
	if !Equal(a, back) {
		t.Errorf("round trip: %s", Diff(a, back))
	}
}

func TestFirestoreSize(t *testing.T) {
	v := map[string]any{"ab": "xyz", "n": int64(1), "f": 1.5, "b": true, "z": nil, "l": []any{"a", int64(2)}}
	// keys: 3+2+2+2+2+2 = 13; values: 4+8+8+1+1+(2+8)
	if got, want := FirestoreSize(v), 13+4+8+8+1+1+10; got != want {
		t.Errorf("FirestoreSize = %d, want %d", got, want)
	}
}

// A per-district directory as the application stores it reads back as the
// same snapshot: envelope or bare district files, manifest order, failed
// districts skipped, rankings optional.
func TestLoadDir(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, v any) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), mustMarshal(t, v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src := Generate("2026-11-20", 3, 1)
	write("metadata.json", Object{
		"snapshotId": src.SnapshotID, "createdAt": src.CreatedAt, "schemaVersion": "1.0.0",
		"calculationVersion": "2.1.0", "status": "partial", "errors": []any{"district 9 failed"},
		"configuredDistricts": []any{"3", "1", "2", "9"}, "successfulDistricts": []any{"3", "1", "2"},
		"failedDistricts": []any{"9"}, "processingDuration": int64(1234), "source": "dashboard",
		"dataAsOfDate": "2026-11-20",
	})
	write("manifest.json", Object{"districts": []any{
		Object{"districtId": "3", "fileName": "district_3.json", "status": "success"},
		Object{"districtId": "1", "fileName": "district_1.json", "status": "success"},
		Object{"districtId": "9", "fileName": "district_9.json", "status": "failed"},
		Object{"districtId": "2", "fileName": "district_2.json", "status": "success"},
	}})
	ds := src.Payload.Districts
	write("district_1.json", Object{"districtId": "1", "districtName": "District 1", "status": "success", "data": ds[0].data})
	write("district_2.json", ds[1].data)
	write("district_3.json", Object{"districtId": "3", "districtName": "District 3", "status": "success", "data": ds[2].data})
	write("all-districts-rankings.json", src.Rankings)

	s, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(s, s.Payload.Metadata.DataAsOfDate); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range s.Payload.Districts {
		got = append(got, d.DistrictID)
	}
	if strings.Join(got, ",") != "3,1,2" || s.Status != "partial" || s.Payload.Metadata.ProcessingDurationMs != 1234 ||
		len(s.Payload.Metadata.FailedDistricts) != 1 || s.Rankings == nil || s.Payload.Metadata.DataAsOfDate != "2026-11-20" {
		t.Errorf("loaded %v status %s md %+v", got, s.Status, s.Payload.Metadata)
	}
	if Diff(&Snapshot{Payload: Payload{Districts: ds[:1]}}, &Snapshot{Payload: Payload{Districts: s.Payload.Districts[1:2]}}) != "" {
		t.Error("district 1's data changed on the way through the directory")
	}

	// A district the manifest lists as written but whose file is missing.
	_ = os.Remove(filepath.Join(dir, "district_2.json"))
	if _, err := LoadDir(dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "district_2.json") {
		t.Errorf("missing district file: %v", err)
	}
	_ = os.Remove(filepath.Join(dir, "metadata.json"))
	if _, err := LoadDir(dir); !errors.Is(err, ErrInvalid) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing metadata.json: %v", err)
	}
}

// Property: any canonical value tree survives Marshal → DecodeObject with
// every type intact.
func TestPropertyCanonicalRoundTrip(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		o := Object{}
		for i, n := 0, rapid.IntRange(0, 6).Draw(rt, "n"); i < n; i++ {
			o[rapid.String().Draw(rt, "k")] = value(4).Draw(rt, "v")
		}
		b, err := Marshal(o)
		if err != nil {
			rt.Fatal(err)
		}
		back, err := DecodeObject(bytes.NewReader(b))
		if err != nil {
			rt.Fatalf("%v\n%s", err, b)
		}
		var diffs []string
		diffValue("$", o, back, &diffs)
		if len(diffs) > 0 {
			rt.Fatalf("%v\n%s", diffs, b)
		}
	})
}

func value(depth int) *rapid.Generator[any] {
	return rapid.Custom(func(t *rapid.T) any {
		kinds := 5
		if depth > 0 {
			kinds = 7
		}
		switch rapid.IntRange(0, kinds-1).Draw(t, "kind") {
		case 0:
			return nil
		case 1:
			return rapid.Bool().Draw(t, "b")
		case 2:
			return rapid.String().Draw(t, "s")
		case 3:
			return rapid.Int64().Draw(t, "i")
		case 4:
			f := rapid.Float64().Draw(t, "f")
			if math.IsNaN(f) || math.IsInf(f, 0) {
				return 0.0
			}
			return f
		case 5:
			return rapid.SliceOfN(value(depth-1), 0, 4).Draw(t, "a")
		default:
			return rapid.MapOfN(rapid.String(), value(depth-1), 0, 4).Draw(t, "m")
		}
	})
}

// The one-walk size Validate uses is FirestoreSize.
func TestCheckValueSizeIsFirestoreSize(t *testing.T) {
	for _, d := range Generate("2026-11-20", 20, 5).Payload.Districts {
		got := checkValue(d.data, "$", 1, false, func(string, string, ...any) {})
		if want := FirestoreSize(d.data); got != want {
			t.Errorf("district %s: walk size %d, FirestoreSize %d", d.DistrictID, got, want)
		}
	}
}

// encoding/json reaches the model's own decoding, so a Snapshot or its
// metadata read with json.Unmarshal keeps the application's keys and types,
// and is refused the same way.
func TestUnmarshalJSONUsesTheModel(t *testing.T) {
	var s Snapshot
	if err := json.Unmarshal([]byte(minimal), &s); err != nil {
		t.Fatal(err)
	}
	if want := mustDecode(t, minimal); !Equal(&s, want) {
		t.Errorf("json.Unmarshal differs from Decode: %s", Diff(&s, want))
	}
	var m PayloadMetadata
	if err := json.Unmarshal([]byte(`{"source":"s","districtCount":2,"x":1.0}`), &m); err != nil || m.Source != "s" || m.DistrictCount != 2 || m.Extra["x"] != 1.0 {
		t.Errorf("metadata %+v, %v", m, err)
	}
	if err := json.Unmarshal([]byte(`{"districtCount":1.5}`), &m); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "$.districtCount") {
		t.Errorf("a fractional count: %v; want ErrInvalid naming the path", err)
	}
}

// A local folder whose manifest says writeComplete: false is an upload in
// progress; without the field (exports made before it existed) it reads.
func TestLoadDirWriteComplete(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "2026-11-20")
	if err := WriteFolder(Generate("2026-11-20", 3, 1), dir); err != nil {
		t.Fatal(err)
	}
	orig, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	manifest := func(v string) {
		s := strings.Replace(string(orig), `"writeComplete":true`, v, 1)
		if err := os.WriteFile(filepath.Join(dir, "manifest.json"), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if s, err := LoadDir(dir); err != nil || len(s.Payload.Districts) != 3 {
		t.Fatalf("complete: %v", err)
	}
	manifest(`"writeComplete":false`)
	if _, err := LoadDir(dir); !errors.Is(err, ErrNotReady) || errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), dir) {
		t.Errorf("writeComplete false: %v; want ErrNotReady naming the folder", err)
	}
	manifest(`"writeComplete":"yes"`)
	if _, err := LoadDir(dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "$.writeComplete") {
		t.Errorf("writeComplete \"yes\": %v", err)
	}
	manifest(`"legacy":true`)
	if s, err := LoadDir(dir); err != nil || len(s.Payload.Districts) != 3 {
		t.Errorf("without writeComplete: %v", err)
	}
}
