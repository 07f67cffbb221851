package snapshot

import (
	"github.com/snapwriter/snapwriter/model"
)

// smallSnapshot is a valid snapshot of n districts of a few dozen bytes
// each (model.Generate's are 2–20 KB), for tests of many districts.
func smallSnapshot(date string, n int) *model.Snapshot {
	s := model.Generate(date, 1, 1)
	s.Rankings = nil
	s.Payload.Metadata.DistrictCount = int64(n)
	s.Payload.Districts = make([]model.DistrictStatistics, n)
	for i, id := range model.GeneratedDistrictIDs(n) {
		s.Payload.Districts[i] = model.DistrictStatistics{DistrictID: id, AsOfDate: date,
			Data: model.Object{"districtId": id, "asOfDate": date, "membership": model.Object{"total": int64(i)}}}
	}
	return s
}
