package gate

import (
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// BenchmarkCheckDistrict measures the value check of one generated district
// (2–20 KB of data and its rankings row) against an equal copy: the gate's
// CPU cost per district of a rewrite.
func BenchmarkCheckDistrict(b *testing.B) {
	s := model.Generate("2026-11-30", 10, 1)
	data, err := s.Payload.Districts[6].Data()
	if err != nil {
		b.Fatal(err)
	}
	rank := s.Rankings["rankings"].([]any)[6].(map[string]any)
	old := Row{Data: data, Ranking: rank}
	n := Row{Data: clone(data).(map[string]any), Ranking: clone(rank).(map[string]any)}
	c := NewCheck("2026-11-30", Options{})
	b.ReportAllocs()
	for b.Loop() {
		c.District("7", &old, &n)
	}
	if r := c.Report(); r.Held {
		b.Fatalf("equal rows held: %+v", r.Holds)
	}
}
