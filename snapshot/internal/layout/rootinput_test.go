package layout

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/model"
)

// TestSummariesGolden pins the hashes and sizes a write records for a
// generated snapshot, read from memory and from a file, against the
// figures snapwriter computed before summaries were made in parallel and
// canonical JSON was written without encoding/json (commit f737ccb):
// stored content hashes may never change.
func TestSummariesGolden(t *testing.T) {
	want := []DistrictSummary{
		{hash: "ymyAtJAUVycK7RMiKuB3_Q", dataHash: "aKXv7oiMcqULZgVkGHkR1A", size: 6689, bytes: 12595},
		{hash: "qx-ziybpUBiFyUMVIV0pbw", dataHash: "M9Up5Zx4J_97rncEqdi1Tg", size: 8768, bytes: 16443},
		{hash: "gfi1kE4Cl_-YD5amJW7hwg", dataHash: "f6du1-KjKv3VghvxZ92UOA", size: 5539, bytes: 10446},
	}
	const wantPayload = "7BhJK2FF6fUIWFKnzH8U6w"
	mem := model.Generate(day, 3, 7)
	file := lazyCopy(t, mem)
	for name, s := range map[string]*model.Snapshot{"memory": mem, "file": file} {
		data, err := model.Prepare(s, day)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		got, err := SummarizeDistricts(s, data, "000000000000007")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: district %d: summary %+v, want %+v", name, i, got[i], want[i])
			}
		}
		if h, err := PayloadHash(s); err != nil || h != wantPayload {
			t.Errorf("%s: payloadHash = %q, %v; want %q", name, h, err, wantPayload)
		}
	}
}

// A failed entry's errorMessage is cut to model.MaxEntryMessageBytes, on
// a character boundary, and says it was cut; a short one is kept whole.
func TestEntryMessage(t *testing.T) {
	t.Parallel()
	short := "rpc error: code = PermissionDenied desc = no"
	if got := entryMessage(short); got != short {
		t.Errorf("short message changed: %q", got)
	}
	long := "not written (rpc error: code = Unavailable desc = connection reset: " + strings.Repeat("é", 40) + ")"
	got := entryMessage(long)
	if len(got) > model.MaxEntryMessageBytes || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") ||
		!strings.HasPrefix(long, strings.TrimSuffix(got, "…")) {
		t.Errorf("entryMessage(%q) = %q (%d bytes)", long, got, len(got))
	}
}

// A district's hash and sizes, from its data's summary, are those of its
// whole document, for a district in memory and one left in its file.
func TestSummarizeDistrictIsTheDocument(t *testing.T) {
	t.Parallel()
	mem := model.Generate(day, 30, 4)
	memData(mem.Payload.Districts[2])["odd"] = model.Object{"f": 2.0, "s": "<é>", "l": []any{nil, true, int64(-3)}}
	mem.Payload.Districts = append(mem.Payload.Districts, model.DistrictStatistics{DistrictID: "77"}) // no data at all
	lazy := lazyCopy(t, mem)
	const fence = "000000000000042"
	for i, d := range mem.Payload.Districts {
		doc := DistrictDoc(mem, d, memData(d), fence)
		h, dh, err := DistrictHashes(doc)
		if err != nil {
			t.Fatal(err)
		}
		want := DistrictSummary{hash: h, dataHash: dh, size: model.FirestoreSize(doc), bytes: model.EncodedSize(doc)}
		for _, s := range []*model.Snapshot{mem, lazy} {
			if memData(d) == nil && s == lazy {
				continue // read from the file, it has the minimal data
			}
			sum, err := s.Payload.Districts[i].Summary()
			if err != nil {
				t.Fatal(err)
			}
			got, err := new(docHasher).summarizeDistrict(s, s.Payload.Districts[i], sum, fence)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("district %s (lazy %v): %+v, want %+v", d.DistrictID, s == lazy, got, want)
			}
		}
	}
	if n := lazy.DataLoads(); n != 0 {
		t.Errorf("summaries read %d districts back from the file", n)
	}
}
