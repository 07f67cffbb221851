package model

import (
	"errors"
	"strings"
	"testing"
)

// tinySnapshot is a valid snapshot of n districts of a few bytes each.
func tinySnapshot(n int) *Snapshot {
	const day = "2026-11-20"
	s := Generate(day, 1, 1)
	s.Rankings = nil
	s.Payload.Districts = make([]DistrictStatistics, n)
	for i, id := range GeneratedDistrictIDs(n) {
		s.Payload.Districts[i] = DistrictStatistics{DistrictID: id, AsOfDate: day, data: Object{"districtId": id, "asOfDate": day}}
	}
	return s
}

// A snapshot whose manifest would not fit the root is accepted (its
// entries go to manifest pages) up to what one commit carries; beyond, the
// district count is refused, not the root.
func TestValidateManifestPages(t *testing.T) {
	s := tinySnapshot(20000)
	if err := Validate(s, "2026-11-20"); err != nil {
		t.Fatalf("20,000 districts: %v", err)
	}
	inline, paged, entries := RootEstimate(s)
	if inline <= MaxDocumentBytes || paged > MaxDocumentBytes/2 || entries != inline-paged {
		t.Errorf("20,000 districts: estimates inline %d, paged %d, entries %d", inline, paged, entries)
	}
	err := Validate(tinySnapshot(40000), "2026-11-20")
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Path != "$.payload.districts" ||
		!strings.Contains(ve.Problems[0].Message, "40000 districts need about") {
		t.Errorf("40,000 districts: %v", err)
	}
}
