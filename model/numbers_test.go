package model

import (
	"math"
	"os"
	"path/filepath"
	"testing"
)

// IntegerValue converts exactly, or not at all.
func TestIntegerValue(t *testing.T) {
	t.Parallel()
	const two53, two63 = 1 << 53, 1 << 63
	for _, c := range []struct {
		f    float64
		want int64
		ok   bool
	}{
		{39, 39, true}, {-7, -7, true}, {math.Copysign(0, -1), 0, true}, {float64(two53), two53, true},
		{float64(two53 + 2), two53 + 2, true}, {float64(-two63), math.MinInt64, true},
		{float64(two63), 0, false}, {39.5, 0, false}, {-0.5, 0, false}, {1e300, 0, false},
		{math.NaN(), 0, false}, {math.Inf(1), 0, false}, {math.Inf(-1), 0, false},
	} {
		if got, ok := IntegerValue(c.f); got != c.want || ok != c.ok {
			t.Errorf("IntegerValue(%v) = %d, %v; want %d, %v", c.f, got, ok, c.want, c.ok)
		}
	}
}

// A district's summary says whether its data holds a double equal to an
// integer, anywhere in it: the same left in its file and in memory.
func TestSummaryNoWholeDoubles(t *testing.T) {
	t.Parallel()
	const head = `{"snapshot_id":"1","created_at":"2026-11-21T07:00:00.000Z","schema_version":"1","calculation_version":"1","status":"success","errors":[],"payload":{"metadata":{"source":"s","fetchedAt":"2026-11-21T06:00:00.000Z","dataAsOfDate":"2026-11-20","districtCount":1,"processingDurationMs":1},"districts":[{"districtId":"1","asOfDate":"2026-11-20",`
	for _, c := range []struct {
		data string
		want bool
	}{
		{`"n":39,"f":39.5,"big":1e300,"s":"39.0"`, true},
		{`"n":39.0`, false},
		{`"deep":{"a":[1,{"b":-0.0}]}`, false},
		{`"deep":{"a":[1,{"b":9007199254740992.0}]}`, false},
		{`"beyond":9223372036854775808.0`, true},
	} {
		path := filepath.Join(t.TempDir(), "in.json")
		if err := os.WriteFile(path, []byte(head+c.data+`}]}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		if err != nil {
			t.Fatalf("%s: %v", c.data, err)
		}
		d := s.Payload.Districts[0]
		sum, err := d.Summary()
		if !d.Lazy() || err != nil || sum.NoWholeDoubles != c.want {
			t.Errorf("%s: lazy %v, NoWholeDoubles %v, %v; want %v", c.data, d.Lazy(), sum.NoWholeDoubles, err, c.want)
		}
		data, err := d.Data()
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
		mem := DistrictStatistics{DistrictID: "1", AsOfDate: "2026-11-20", data: data}
		if sum, err := mem.Summary(); err != nil || sum.NoWholeDoubles != c.want {
			t.Errorf("%s: in memory NoWholeDoubles %v, %v; want %v", c.data, sum.NoWholeDoubles, err, c.want)
		}
	}
}
