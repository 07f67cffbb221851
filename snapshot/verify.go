package snapshot

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
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
	// Complete: the write finished with every district written (whatever
	// the input's own status). An intact incomplete snapshot is what
	// Repair completes.
	Complete bool `json:"complete"`
	// State is the listing state (complete, partial, writing,
	// interrupted…), as List and Summary give it: a root that says
	// "writing" is settled against the Reader's lock backends.
	State     State `json:"state"`
	Districts int   `json:"districts"` // manifest entries
	Written   int   `json:"written"`   // entries with status success
	// FailedDistricts are the districts the manifest records as failed:
	// every entry not written but, while the root says "writing", the
	// pending ones.
	FailedDistricts []string `json:"failedDistricts"`
	// PendingDistricts are, of a root that says "writing", the districts
	// its writer has not reached (entries "not written yet"), as
	// Summary.PendingDistricts; empty for every other root.
	PendingDistricts []string `json:"pendingDistricts"`
	Documents        int      `json:"documents"` // district documents stored
	// NotYetRecorded counts the districts written by the writer the root
	// names whose record that writer has not committed yet: while it is at
	// work the root lags its documents by up to a record interval, and a
	// writer killed leaves them for Repair (or a rerun) to record without
	// writing them again. They are not problems, and the root does not
	// count them as written until then.
	NotYetRecorded int `json:"notYetRecorded"`
	// Hashed: the manifest recorded content hashes, so documents were
	// checked against them (roots written by the TypeScript application,
	// or before hashes, have none).
	Hashed   bool      `json:"hashed"`
	Problems []Problem `json:"problems"`
	// Provenance is the publication gate's record of a snapshot it let
	// through only by the month-end closing rule, and the deltas it
	// allowed; nil for any other (Reader.Provenance).
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Verify audits snapshot id without writing anything: every district the
// manifest records as written has its document, and the document matches
// the content hash recorded for it; no document is stored that the
// manifest lacks or records as not written; the manifest's counts and the
// metadata's lists agree with its entries; the root's payload matches its
// recorded hash. With input, the stored districts and payload must also
// equal the input's. A snapshot that does not exist is ErrNotFound. It
// reads the snapshot as it was at one moment, as Get does.
func (r *Reader) Verify(ctx context.Context, id string, input *model.Snapshot) (*Report, error) {
	ref := r.names(id).Root
	doc, v, err := r.openRoot(ctx, ref)
	if status.Code(err) == codes.NotFound {
		return nil, fmt.Errorf("%s: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", id, err)
	}
	inData, err := verifyInput(input)
	if err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", id, err)
	}
	// Everything after the root is read as it was when the root was (see
	// view): a writer at work cannot make the documents disagree with it.
	stored, err := readStoredDistricts(clientDocs(v.collection(ref, layout.DistrictsCollection).Documents(ctx)), inData)
	if err != nil {
		return nil, fmt.Errorf("reading districts of %s: %w", id, err)
	}
	root := layout.ReadRoot(doc)
	// Pages are read whatever the form: an inline root must have none.
	pages, err := v.collection(ref, layout.PagesCollection).Documents(ctx).GetAll()
	if err != nil {
		return nil, fmt.Errorf("reading the manifest pages of %s: %w", id, err)
	}
	root.ExpandPages(layout.SnapshotPages(pages))
	md, mf := root.Meta(), &root.Manifest
	// The state as List says it: a root that says "writing" is settled
	// against its lock backend, when the Reader has it. The report is of
	// the root as read: when settle found it finished (or taken over)
	// since, its writer was at work then.
	sum := summaryOf(id, root)
	if err := r.settle(ctx, &sum); err != nil {
		return nil, err
	}
	if md.Writing() && sum.State != StateInterrupted && sum.State != StateUnknown {
		sum.State = StateWriting
	}
	rep := &Report{SnapshotID: id, Complete: md.WrittenWhole(), State: sum.State,
		FailedDistricts: []string{}, PendingDistricts: []string{}, Documents: len(stored), Problems: []Problem{}}
	add := func(kind, district, format string, args ...any) {
		rep.Problems = append(rep.Problems, Problem{Kind: kind, DistrictID: district, Detail: fmt.Sprintf(format, args...)})
	}
	// The root never records a district whose document is not stored, at
	// any moment. While a write is at work (or was interrupted) it may not
	// record yet what its writer stored last (NotYetRecorded), and roots of
	// earlier snapwriter versions, whose manifest was written at the end,
	// none of it: that is incomplete, not inconsistent.
	current := md.CurrentForm()
	inProgress := md.Writing()
	finished := current || !inProgress

	entries := mf.Districts
	listed := make(map[string]bool, len(entries))
	var failed []string
	for _, e := range entries {
		d := e.DistrictID
		listed[d] = true
		rep.Hashed = rep.Hashed || e.ContentHash != ""
		s, present := stored[d]
		switch {
		case e.Status == layout.EntrySuccess && !present:
			rep.Written++
			add(ProblemMissing, d, "the manifest says it was written; no document is stored")
		case e.Status == layout.EntrySuccess:
			rep.Written++
			if e.ContentHash != "" && s.hash != e.ContentHash {
				add(ProblemAltered, d, "the document no longer matches the content hash recorded when it was written")
			}
		default:
			failed = append(failed, d)
			if inProgress && e.Pending() {
				rep.PendingDistricts = append(rep.PendingDistricts, d)
			} else {
				rep.FailedDistricts = append(rep.FailedDistricts, d)
			}
			switch {
			case !present:
			case md.Unrecorded(s.fence):
				// This write's, not recorded yet (see NotYetRecorded).
				rep.NotYetRecorded++
			case !inProgress:
				// While a write is at work, a document of an earlier
				// write may still be there; once it is over, nothing.
				add(ProblemUnrecorded, d, "the manifest says %q, yet a document is stored", e.Status)
			}
		}
	}
	rep.Districts = len(entries)
	for _, p := range root.PageProblems(id, pages) {
		add(ProblemCounts, "", "%s", p)
	}
	for _, d := range sortedKeys(stored) {
		if !listed[d] {
			add(ProblemUnlisted, d, "a document is stored that the manifest has no entry for")
		}
	}
	if finished {
		checkCounts(md, mf, len(entries), rep.Written, failed, !inProgress, add)
	}
	if current {
		checkLists(id, md, mf, add)
	}
	if md.PayloadHash != "" {
		same, err := layout.StoredPayloadMatches(root)
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", id, err)
		}
		if !same {
			add(ProblemPayload, "", "the root's metadata or rankings no longer match the hash recorded when they were written")
		}
	}
	if input != nil {
		if err := compareInput(root, stored, inData, add); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", id, err)
		}
	}
	rep.Intact = len(rep.Problems) == 0
	if rep.Provenance, err = provenanceIn(ctx, v, r.names(id), root); err != nil {
		return nil, err
	}
	return rep, nil
}

// checkCounts compares the manifest's counts and the metadata's failure
// list, and once the write is over (over) its completeness flag, with the
// entries. (A write at work says writeComplete false until its finish,
// even once every district is stored.)
func checkCounts(md *layout.Metadata, mf *layout.Manifest, total, written int, failed []string, over bool, add func(kind, district, format string, args ...any)) {
	for _, c := range []struct {
		field string
		got   *int64
		want  int
	}{{layout.FieldTotalDistricts, mf.TotalDistricts, total}, {layout.FieldSuccessfulDistricts, mf.SuccessfulDistricts, written},
		{layout.FieldFailedDistricts, mf.FailedDistricts, len(failed)}} {
		if c.got == nil {
			add(ProblemCounts, "", "manifest.%s is %v; the entries say %d", c.field, nil, c.want)
		} else if int(*c.got) != c.want {
			add(ProblemCounts, "", "manifest.%s is %v; the entries say %d", c.field, *c.got, c.want)
		}
	}
	if md.WriteFailedDistricts != nil {
		got := slices.Clone(md.WriteFailedDistricts)
		want := slices.Clone(failed)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			add(ProblemCounts, "", "metadata.writeFailedDistricts lists %s; the manifest records %d as not written", plural.N(len(got), "district"), len(want))
		}
	}
	if wc := md.WriteComplete; wc != nil && over && *wc != (len(failed) == 0) {
		add(ProblemCounts, "", "metadata.writeComplete is %v with %s not written", *wc, plural.N(len(failed), "district"))
	}
}

// checkLists compares what the application's readers read of a root in
// the current form with its manifest entries: snapshotId is the date, and
// successfulDistricts names exactly the districts recorded as written,
// failedDistricts every other one of them.
func checkLists(id string, md *layout.Metadata, mf *layout.Manifest, add func(kind, district, format string, args ...any)) {
	if md.SnapshotID != id || mf.SnapshotID != id {
		add(ProblemCounts, "", "metadata.snapshotId is %v and manifest.snapshotId %v; both must be the date %s", md.SnapshotID, mf.SnapshotID, id)
	}
	written := map[string]bool{}
	var notWritten []string
	for _, e := range mf.Districts {
		if e.Status == layout.EntrySuccess {
			written[e.DistrictID] = true
		} else {
			notWritten = append(notWritten, e.DistrictID)
		}
	}
	successful := stringSet(md.SuccessfulDistricts)
	if len(successful) != len(written) || !containsAll(successful, sortedKeys(written)) {
		add(ProblemCounts, "", "metadata.successfulDistricts lists %s; the manifest records %d as written, and the sets differ", plural.N(len(successful), "district"), len(written))
	}
	failed := stringSet(md.FailedDistricts)
	if !containsAll(failed, notWritten) {
		add(ProblemCounts, "", "metadata.failedDistricts does not list every district the manifest records as not written")
	}
	for d := range failed {
		if written[d] {
			add(ProblemCounts, d, "metadata.failedDistricts lists a district the manifest records as written")
		}
	}
}

func stringSet(list []string) map[string]bool {
	set := make(map[string]bool, len(list))
	for _, s := range list {
		set[s] = true
	}
	return set
}

func containsAll(set map[string]bool, ids []string) bool {
	for _, id := range ids {
		if !set[id] {
			return false
		}
	}
	return true
}

// verifyInput is what Verify compares stored data with: input's districts,
// equal to stored data as Firestore compares values. nil without input.
func verifyInput(input *model.Snapshot) (*inputData, error) {
	if input == nil {
		return nil, nil
	}
	exact := make(map[string]string, len(input.Payload.Districts))
	for _, d := range input.Payload.Districts {
		h, err := layout.DataHash(d)
		if err != nil {
			return nil, fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
		exact[d.DistrictID] = h
	}
	return newInputData(input, exact, true), nil
}

// compareInput reports where the stored snapshot differs from the input
// inData holds: the district set, each stored district's data, and the root
// payload, numbers compared as Firestore compares them.
func compareInput(root *layout.Root, stored map[string]storedDistrict, inData *inputData, add func(kind, district, format string, args ...any)) error {
	input := inData.snap
	inManifest := make(map[string]bool, len(root.Manifest.Districts))
	for _, e := range root.Manifest.Districts {
		inManifest[e.DistrictID] = true
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
		same, err := inData.same(d.DistrictID, s)
		if err != nil {
			return fmt.Errorf("district %s: %w", d.DistrictID, err)
		}
		if !same {
			add(ProblemInput, d.DistrictID, "the stored data differs from the input's")
		}
	}
	for _, d := range sortedKeys(inManifest) {
		if !given[d] {
			add(ProblemInput, d, "in the stored snapshot, not in the input")
		}
	}
	md := root.Meta()
	same := true
	if md.PayloadHash != "" || md.PayloadMetadata != nil {
		// Written by snapwriter (before content hashes, the payload was
		// stored verbatim all the same). A root the TypeScript
		// application wrote keeps too little of it to compare.
		var err error
		if same, err = samePayload(root, input); err != nil {
			return err
		}
	}
	if !same {
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
