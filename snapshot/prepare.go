package snapshot

import (
	"fmt"
	"runtime"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/model"
)

// summarizeDistricts is every district's districtSummary (summarizeDistrict),
// in input order, summarized on up to GOMAXPROCS goroutines: a snapshot
// built in memory (model.Generate, a library caller's Data) is encoded and
// hashed here, district by district, which is most of the work before a
// write's first commit. The error is that of the first district, in input
// order, that failed, as a sequential pass would report it.
func summarizeDistricts(s *model.Snapshot, fence string) ([]districtSummary, error) {
	ds := s.Payload.Districts
	sums := make([]districtSummary, len(ds))
	errs := make([]error, len(ds))
	var g errgroup.Group
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i := range ds {
		g.Go(func() error {
			sums[i], errs[i] = summarizeDistrict(s, ds[i], fence)
			return nil
		})
	}
	_ = g.Wait() // the districts report through errs
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("district %s: %w", ds[i].DistrictID, err)
		}
	}
	return sums, nil
}
