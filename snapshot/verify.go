package snapshot

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
)

// Kinds of Problem that Verify reports.
const (
	// ProblemMissing: the manifest says the district was written; its
	// document is not there.
	ProblemMissing = "missing"
	// ProblemAltered: the district's document no longer matches the
	// content hash the manifest recorded when it was written.
	ProblemAltered = "altered"
	// ProblemUnlisted: a district document the manifest has no entry for.
	ProblemUnlisted = "unlisted"
	// ProblemUnrecorded: the manifest says the district was not written,
	// yet a document is stored (and `get` returns it).
	ProblemUnrecorded = "unrecorded"
	// ProblemCounts: the manifest's counts, or the metadata's lists and
	// flags, disagree with the manifest's entries.
	ProblemCounts = "count-mismatch"
	// ProblemPayload: the root's payload (metadata, rankings, …) no longer
	// matches the hash recorded when it was written.
	ProblemPayload = "payload-altered"
	// ProblemInput: the stored snapshot differs from the input it was
	// checked against.
	ProblemInput = "differs-from-input"
)

// Problem is one way a stored snapshot contradicts its manifest, its
// content hashes or an input.
type Problem struct {
	Kind       string `json:"kind"`
	DistrictID string `json:"districtId,omitempty"`
	Detail     string `json:"detail"`
}

// Report is what Verify found.
type Report struct {
	SnapshotID string `json:"snapshotId"`
	// Intact: no problem found; what is stored is what the manifest says.
	Intact bool `json:"intact"`
	// Complete: every district was written (status "success" and the write
	// complete). An intact incomplete snapshot is what Repair completes.
	Complete bool `json:"complete"`
	// State is the listing state (complete, partial, writing, interrupted…).
	State     string `json:"state"`
	Districts int    `json:"districts"` // manifest entries
	Written   int    `json:"written"`   // entries with status success
	Documents int    `json:"documents"` // district documents stored
	// Hashed: the manifest recorded content hashes, so documents were
	// checked against them (roots written by the TypeScript application,
	// or before hashes, have none).
	Hashed   bool      `json:"hashed"`
	Problems []Problem `json:"problems"`
}

// Verify audits snapshot id without writing anything: every district the
// manifest records as written has its document, and the document matches
// the content hash recorded for it; no document is stored that the
// manifest lacks or records as not written; the manifest's counts and the
// metadata's lists agree with its entries; the root's payload matches its
// recorded hash. With input, the stored districts and payload must also
// equal the input's. A snapshot that does not exist is ErrNotFound.
func (r *Reader) Verify(ctx context.Context, id string, input *model.Snapshot) (*Report, error) {
	ref := r.client.Collection(r.collection).Doc(id)
	doc, err := ref.Get(ctx)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	stored, err := readStoredDistricts(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	root := doc.Data()
	md, mf := asMap(root["metadata"]), asMap(root["manifest"])
	rep := &Report{SnapshotID: id, Complete: isComplete(root), State: summarize(doc).State,
		Documents: len(stored), Problems: []Problem{}}
	add := func(kind, district, format string, args ...any) {
		rep.Problems = append(rep.Problems, Problem{Kind: kind, DistrictID: district, Detail: fmt.Sprintf(format, args...)})
	}
	// A write still in progress (or interrupted) has stored documents its
	// manifest does not record yet: that is incomplete, not inconsistent.
	finished := md["status"] != statusWriting

	entries, _ := mf["districts"].([]any)
	listed := make(map[string]bool, len(entries))
	var failed []string
	for _, e := range entries {
		em := asMap(e)
		d, _ := em["districtId"].(string)
		listed[d] = true
		st, _ := em["status"].(string)
		recorded, _ := em["contentHash"].(string)
		rep.Hashed = rep.Hashed || recorded != ""
		s, present := stored[d]
		switch {
		case st == entrySuccess && !present:
			rep.Written++
			add(ProblemMissing, d, "the manifest says it was written; no document is stored")
		case st == entrySuccess:
			rep.Written++
			if recorded != "" && s.hash != recorded {
				add(ProblemAltered, d, "the document no longer matches the content hash recorded when it was written")
			}
		default:
			failed = append(failed, d)
			if present && finished {
				add(ProblemUnrecorded, d, "the manifest says %q, yet a document is stored", st)
			}
		}
	}
	rep.Districts = len(entries)
	for _, d := range sortedKeys(stored) {
		if !listed[d] {
			add(ProblemUnlisted, d, "a document is stored that the manifest has no entry for")
		}
	}
	if finished {
		checkCounts(md, mf, len(entries), rep.Written, failed, add)
	}
	if recorded, _ := md["payloadHash"].(string); recorded != "" {
		h, err := storedPayloadHash(root)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", id, err)
		}
		if h != recorded {
			add(ProblemPayload, "", "the root's metadata or rankings no longer match the hash recorded when they were written")
		}
	}
	if input != nil {
		if err := compareInput(root, entries, stored, input, add); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", id, err)
		}
	}
	rep.Intact = len(rep.Problems) == 0
	return rep, nil
}

// checkCounts compares the manifest's counts and the metadata's failure
// list and completeness flag with the entries of a finished write.
func checkCounts(md, mf map[string]any, total, written int, failed []string, add func(kind, district, format string, args ...any)) {
	for _, c := range []struct {
		field string
		want  int
	}{{"totalDistricts", total}, {"successfulDistricts", written}, {"failedDistricts", len(failed)}} {
		if n, ok := mf[c.field].(int64); !ok || int(n) != c.want {
			add(ProblemCounts, "", "manifest.%s is %v; the entries say %d", c.field, mf[c.field], c.want)
		}
	}
	if wf, ok := md["writeFailedDistricts"].([]any); ok {
		got := make([]string, 0, len(wf))
		for _, x := range wf {
			s, _ := x.(string)
			got = append(got, s)
		}
		want := slices.Clone(failed)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			add(ProblemCounts, "", "metadata.writeFailedDistricts lists %d districts; the manifest records %d as not written", len(got), len(want))
		}
	}
	if wc, ok := md["writeComplete"].(bool); ok && wc != (len(failed) == 0) {
		add(ProblemCounts, "", "metadata.writeComplete is %v with %d districts not written", wc, len(failed))
	}
}

// compareInput reports where the stored snapshot differs from input: the
// district set, each stored district's data, and the root payload.
func compareInput(root map[string]any, entries []any, stored map[string]storedDistrict, input *model.Snapshot, add func(kind, district, format string, args ...any)) error {
	inManifest := make(map[string]bool, len(entries))
	for _, e := range entries {
		d, _ := asMap(e)["districtId"].(string)
		inManifest[d] = true
	}
	given := make(map[string]bool, len(input.Payload.Districts))
	for _, d := range input.Payload.Districts {
		given[d.DistrictID] = true
		if !inManifest[d.DistrictID] {
			add(ProblemInput, d.DistrictID, "in the input, not in the stored snapshot")
			continue
		}
		s, ok := stored[d.DistrictID]
		if !ok {
			continue // missing or not written: reported above, or incomplete
		}
		h, err := contentHash(d.Data)
		if err != nil {
			return err
		}
		if h != s.dataHash {
			add(ProblemInput, d.DistrictID, "the stored data differs from the input's")
		}
	}
	for _, d := range sortedKeys(inManifest) {
		if !given[d] {
			add(ProblemInput, d, "in the stored snapshot, not in the input")
		}
	}
	md := asMap(root["metadata"])
	got, _ := md["payloadHash"].(string)
	if _, ours := md["payloadMetadata"]; got == "" && ours {
		// Written by snapwriter before content hashes: the payload is
		// stored verbatim and can be hashed now. (A root the TypeScript
		// application wrote keeps too little of it to compare.)
		var err error
		if got, err = storedPayloadHash(root); err != nil {
			return err
		}
	}
	want, err := payloadHash(input)
	if err != nil {
		return err
	}
	if got != "" && got != want {
		add(ProblemInput, "", "the root payload (metadata, rankings, …) differs from the input's")
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
