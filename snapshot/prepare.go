package snapshot

import (
	"fmt"

	"github.com/snapwriter/snapwriter/model"
)

// summarizeDistricts is every district's districtSummary
// (summarizeDistrict), in input order, from data, its data's summaries
// (model.Prepare): the data was checked, sized and hashed in one walk,
// when the input was read or validated, and is not encoded again here;
// only each district's small envelope is.
func summarizeDistricts(s *model.Snapshot, data []model.DataSummary, fence string) ([]districtSummary, error) {
	ds := s.Payload.Districts
	if len(data) != len(ds) {
		return nil, fmt.Errorf("%d data summaries for %d districts", len(data), len(ds))
	}
	sums := make([]districtSummary, len(ds))
	var h docHasher
	for i, d := range ds {
		var err error
		if sums[i], err = h.summarizeDistrict(s, d, data[i], fence); err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
	}
	return sums, nil
}
