package snapshot

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// TestSummariesGolden pins the hashes and sizes a write records for a
// generated snapshot, read from memory and from a file, against the
// figures snapwriter computed before summaries were made in parallel and
// canonical JSON was written without encoding/json (commit f737ccb):
// stored content hashes may never change.
func TestSummariesGolden(t *testing.T) {
	want := []districtSummary{
		{hash: "ymyAtJAUVycK7RMiKuB3_Q", dataHash: "aKXv7oiMcqULZgVkGHkR1A", size: 6689, bytes: 12595},
		{hash: "qx-ziybpUBiFyUMVIV0pbw", dataHash: "M9Up5Zx4J_97rncEqdi1Tg", size: 8768, bytes: 16443},
		{hash: "gfi1kE4Cl_-YD5amJW7hwg", dataHash: "f6du1-KjKv3VghvxZ92UOA", size: 5539, bytes: 10446},
	}
	const wantPayload = "7BhJK2FF6fUIWFKnzH8U6w"
	mem := model.Generate(day, 3, 7)
	b, err := model.Marshal(mem)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	file, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, s := range map[string]*model.Snapshot{"memory": mem, "file": file} {
		got, err := summarizeDistricts(s, "000000000000007")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: district %d: summary %+v, want %+v", name, i, got[i], want[i])
			}
		}
		if h, err := payloadHash(s); err != nil || h != wantPayload {
			t.Errorf("%s: payloadHash = %q, %v; want %q", name, h, err, wantPayload)
		}
	}
}

// TestSummarizeDistrictsFirstError: of several districts that cannot be
// summarized, the first in input order is reported, however the
// goroutines finish.
func TestSummarizeDistrictsFirstError(t *testing.T) {
	s := model.Generate(day, 40, 3)
	for _, i := range []int{37, 11, 25} {
		s.Payload.Districts[i].Data["bad"] = func() {} // not encodable
	}
	for range 20 {
		_, err := summarizeDistricts(s, "000000000000001")
		if err == nil || !strings.Contains(err.Error(), "district "+s.Payload.Districts[11].DistrictID+":") {
			t.Fatalf("err = %v, want district %s's", err, s.Payload.Districts[11].DistrictID)
		}
	}
}
