package snapshot

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"

	"github.com/snapwriter/snapwriter/model"
)

// TestSummariesGolden pins the hashes and sizes a write records for a
// generated snapshot, read from memory and from a file, against the
// figures snapwriter computed before summaries were made in parallel and
// canonical JSON was written without encoding/json (commit f737ccb):
// stored content hashes may never change.
func TestSummariesGolden(t *testing.T) {
	want := []layout.DistrictSummary{
		{Hash: "ymyAtJAUVycK7RMiKuB3_Q", DataHash: "aKXv7oiMcqULZgVkGHkR1A", Size: 6689, Bytes: 12595},
		{Hash: "qx-ziybpUBiFyUMVIV0pbw", DataHash: "M9Up5Zx4J_97rncEqdi1Tg", Size: 8768, Bytes: 16443},
		{Hash: "gfi1kE4Cl_-YD5amJW7hwg", DataHash: "f6du1-KjKv3VghvxZ92UOA", Size: 5539, Bytes: 10446},
	}
	const wantPayload = "7BhJK2FF6fUIWFKnzH8U6w"
	mem := model.Generate(day, 3, 7)
	file := lazyCopy(t, mem)
	for name, s := range map[string]*model.Snapshot{"memory": mem, "file": file} {
		data, err := model.Prepare(s, day)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := layout.SummarizeDistricts(s, data, "000000000000007")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: district %d: summary %+v, want %+v", name, i, got[i], want[i])
			}
		}
		if h, err := layout.PayloadHash(s); err != nil || h != wantPayload {
			t.Errorf("%s: payloadHash = %q, %v; want %q", name, h, err, wantPayload)
		}
	}
}

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
