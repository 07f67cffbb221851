package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// TestPrepareFirstProblem: of several districts whose data cannot be
// stored, the first in input order is reported first, however the
// goroutines that walk them finish.
func TestPrepareFirstProblem(t *testing.T) {
	s := model.Generate(day, 40, 3)
	for _, i := range []int{37, 11, 25} {
		memData(s.Payload.Districts[i])["bad"] = func() {} // not encodable
	}
	for range 20 {
		_, err := model.Prepare(s, day)
		var ve *model.ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 3 || !strings.HasPrefix(ve.Problems[0].Path, "$.payload.districts[11]") {
			t.Fatalf("err = %v, want district 11's problem first", err)
		}
	}
}

// memData is the data of district d, held in memory, for a test to read
// or change.
func memData(d model.DistrictStatistics) model.Object {
	data, err := d.Data()
	if err != nil || d.Lazy() {
		panic(fmt.Sprintf("district %s: not in memory (%v)", d.DistrictID, err))
	}
	return data
}
