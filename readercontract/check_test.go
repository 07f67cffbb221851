package readercontract

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
)

// want is what a case expects the readers to report for its snapshot.
type want struct {
	// status is the expected metadata.status; writeComplete the expected
	// metadata.writeComplete (absent counts as true).
	status        string
	writeComplete bool
	// newestSuccessful: the application's newest-successful query returns
	// this snapshot (it is the newest in its project), or must not.
	newestSuccessful bool
	// districts, if ≥ 0, is the exact number of district documents.
	districts int
	// input, if set, is the snapshot that was written: the manifest names
	// exactly its districts, and every district the application reads
	// holds that district's statistics.
	input *model.Snapshot
	// unwrittenMessage, if set, is the errorMessage every manifest entry
	// of a district without a document must carry.
	unwrittenMessage string
	// Ours (the new layout), checked when set: metadata.writeState and
	// metadata.inputSnapshotId.
	writeState      string
	inputSnapshotID string
}

// view is what inspect found, for a case's own further assertions.
type view struct {
	present map[string]bool // district ids with a document
	// unrecorded: districts with a document carrying the root's
	// writerFence that the root, which says writing, does not record yet.
	unrecorded map[string]bool
	metadata   map[string]any
}

// checkView reads snapshot date as the application's readers do and
// reports every broken invariant and every difference from w as a test
// error.
//
// A commit a killed writer sent just before it died may still be applied
// while the readers run: a chunk's district documents (not recorded, so
// allowed while the root says writing) or a progress record in the root;
// an inspection during which the root changed is done again, on the new
// state (for at most stableWithin).
func checkView(t *testing.T, c *firestore.Client, date string, w want) view {
	t.Helper()
	deadline := time.Now().Add(stableWithin)
	for {
		v, problems, moved := inspect(context.Background(), c, date, w)
		if moved && time.Now().Before(deadline) {
			t.Logf("snapshot %s changed while it was read; reading it again", date)
			continue
		}
		if moved {
			t.Errorf("snapshot %s: the root kept changing for %s after the writer ended", date, stableWithin)
		}
		for _, p := range problems {
			t.Errorf("snapshot %s: %s", date, p)
		}
		return v
	}
}

// stableWithin bounds how long checkView waits for a snapshot to stop
// changing.
const stableWithin = 30 * time.Second

// inspect is checkView's work: it returns the problems instead of failing
// a test, so that TestChecksDetectDamage can show that each is found.
//
// The documents the root accounts for ("counted" below) are, once the
// root says finished (or has no writeState, as the application's roots),
// every district document: the root is exact. While metadata.writeState
// is "writing" (a write at work, or its writer killed before its finish)
// the root may lag its writer: documents it does not record yet (their
// manifest entry "failed" / "not written yet", listed in neither
// successfulDistricts) are allowed, and left out of the count, only if
// they carry the root's metadata.writerFence — its writer stored them and
// had not committed their record. Any other document the root does not
// record is a stray, reported; a district the root records must have its
// document, at every moment (the application's getSnapshot fails
// otherwise: an over-claim). With that, for every snapshot whatever its
// state:
//  1. metadata.snapshotId and manifest.snapshotId are the date (the
//     document id);
//  2. metadata.status and every manifest entry's status are in the
//     application's vocabulary;
//  3. len(metadata.successfulDistricts) (the application's district count)
//     is the number of counted district documents;
//  4. the manifest's success entries, the counted district documents and
//     metadata.successfulDistricts name the same districts;
//     metadata.failedDistricts names every district of the manifest
//     not counted and none counted; metadata.writeFailedDistricts names
//     exactly the manifest's districts not counted; the manifest's counts
//     are its entries' counts;
//  5. a manifest entry of a district not counted is "failed" with a
//     non-empty errorMessage;
//
// and the application's list (district count), getSnapshot (the districts
// it returns) and newest-successful query report the snapshot as w says,
// and as the root records it (6). moved reports that the root changed
// while it was inspected: the problems may then mix two states.
func inspect(ctx context.Context, c *firestore.Client, date string, w want) (_ view, _ []string, moved bool) {
	var probs []string
	bad := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	ref := c.Collection(collection).Doc(date)

	// The root and the district documents are read in one read-only
	// transaction: one consistent state, even if a commit of a killed
	// writer's last moments is still landing.
	var root map[string]any
	var docs []*firestore.DocumentSnapshot
	var updated time.Time
	err := c.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
		d, err := tx.Get(ref)
		if err != nil {
			return err
		}
		root, updated = d.Data(), d.UpdateTime
		// The data is read (and checked) by the application's getSnapshot
		// below; here only which documents exist, and their envelope.
		docs, err = tx.Documents(ref.Collection("districts").Select("districtId", "status", "writerFence")).GetAll()
		return err
	}, firestore.ReadOnly)
	if err != nil {
		return view{}, []string{fmt.Sprintf("reading the root and its districts: %v", err)}, false
	}
	defer func() {
		d, err := ref.Get(ctx)
		moved = err == nil && !d.UpdateTime.Equal(updated)
	}()

	v := view{present: map[string]bool{}, unrecorded: map[string]bool{}}
	fences := map[string]string{} // district → the writerFence its document carries
	for _, d := range docs {
		id, ok := strings.CutPrefix(d.Ref.ID, "district_")
		if !ok {
			bad("district document %q is not named district_{id}", d.Ref.ID)
			continue
		}
		v.present[id] = true
		m := d.Data()
		fences[id], _ = m["writerFence"].(string)
		if m["districtId"] != id {
			bad("district document %s: districtId %v", d.Ref.ID, m["districtId"])
		}
		if m["status"] != "success" {
			bad("district document %s: status %v, want success", d.Ref.ID, m["status"])
		}
	}

	md, _ := root["metadata"].(map[string]any)
	mf, _ := root["manifest"].(map[string]any)
	v.metadata = md
	if md == nil || mf == nil {
		return v, append(probs, fmt.Sprintf("root has no metadata or manifest map (metadata %T, manifest %T)", root["metadata"], root["manifest"])), false
	}

	// 1. Ids.
	if md["snapshotId"] != date {
		bad("metadata.snapshotId = %v, want the date %s", md["snapshotId"], date)
	}
	if mf["snapshotId"] != date {
		bad("manifest.snapshotId = %v, want the date %s", mf["snapshotId"], date)
	}

	// 2. Vocabulary.
	st, _ := md["status"].(string)
	if !snapshotStatuses[st] {
		bad("metadata.status = %v: not success, partial or failed", md["status"])
	}
	entries, err := appManifest(date, root)
	if err != nil {
		return v, append(probs, err.Error()), false
	}
	successful, err := stringList(md["successfulDistricts"])
	if err != nil {
		bad("metadata.successfulDistricts: %v", err)
	}
	listed := setOf(successful)

	// What the root accounts for: every document, less those written but
	// not yet recorded while it says writing.
	writing := md["writeState"] == "writing"
	rootFence, _ := md["writerFence"].(string)
	recordedOK := map[string]bool{}
	for _, e := range entries {
		if e.Status == "success" {
			recordedOK[e.DistrictID] = true
		}
	}
	counted := map[string]bool{}
	var strays []string
	for id := range v.present {
		if recordedOK[id] || listed[id] {
			counted[id] = true
			continue
		}
		switch {
		case writing && rootFence != "" && fences[id] == rootFence:
			v.unrecorded[id] = true
		case writing:
			strays = append(strays, fmt.Sprintf("%s (writerFence %q)", id, fences[id]))
			counted[id] = true
		default:
			counted[id] = true
		}
	}
	if len(strays) > 0 {
		bad("while writeState is writing, district documents the root does not record that do not carry its writerFence %q: %s", rootFence, firstFew(strays))
	}
	var badStatus []string
	manifestIDs := map[string]bool{}
	success := map[string]bool{}
	nSuccess, nFailed := 0, 0
	for _, e := range entries {
		if !entryStatuses[e.Status] {
			badStatus = append(badStatus, e.DistrictID+"="+e.Status)
		}
		if manifestIDs[e.DistrictID] {
			bad("manifest names district %s twice", e.DistrictID)
		}
		manifestIDs[e.DistrictID] = true
		switch e.Status {
		case "success":
			success[e.DistrictID] = true
			nSuccess++
		case "failed":
			nFailed++
		}
	}
	if len(badStatus) > 0 {
		bad("manifest entries with a status other than success or failed: %s", firstFew(badStatus))
	}

	// 3. The application's district count.
	if len(successful) != len(counted) {
		bad("district count len(metadata.successfulDistricts) = %d, but %d district documents are stored (%d of them written but not yet recorded)",
			len(successful), len(counted), len(v.unrecorded))
	}
	var missing []string
	for id := range listed {
		if !v.present[id] {
			missing = append(missing, id)
		}
	}
	for id := range success {
		if !v.present[id] && !listed[id] {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		bad("over-claim: districts the root records as written without a document: %s", firstFew(missing))
	}

	// 4. Lists, documents and manifest agree.
	if len(listed) != len(successful) {
		bad("metadata.successfulDistricts names a district twice")
	}
	if d := setDiff("manifest success entries", success, "district documents", counted); d != "" {
		bad("%s", d)
	}
	if d := setDiff("metadata.successfulDistricts", listed, "district documents", counted); d != "" {
		bad("%s", d)
	}
	failedList, err := stringList(md["failedDistricts"])
	if err != nil {
		bad("metadata.failedDistricts: %v", err)
	}
	failed := setOf(failedList)
	notStored := map[string]bool{}
	var unnamed, storedButFailed []string
	for id := range manifestIDs {
		if !counted[id] {
			notStored[id] = true
			if !failed[id] {
				unnamed = append(unnamed, id)
			}
		}
	}
	for id := range failed {
		if counted[id] {
			storedButFailed = append(storedButFailed, id)
		}
	}
	if len(unnamed) > 0 {
		bad("districts without a document that metadata.failedDistricts does not name: %s", firstFew(unnamed))
	}
	if len(storedButFailed) > 0 {
		bad("metadata.failedDistricts names districts whose document is stored: %s", firstFew(storedButFailed))
	}
	writeFailed, err := stringList(md["writeFailedDistricts"])
	if err != nil {
		bad("metadata.writeFailedDistricts: %v", err)
	} else if d := setDiff("metadata.writeFailedDistricts", setOf(writeFailed), "manifest districts without a document", notStored); d != "" {
		bad("%s", d)
	}
	for _, k := range []struct {
		field string
		want  int
	}{{"successfulDistricts", nSuccess}, {"failedDistricts", nFailed}, {"totalDistricts", len(entries)}} {
		if n, ok := mf[k.field].(int64); !ok || int(n) != k.want {
			bad("manifest.%s = %v (%T), want %d (the entries' count)", k.field, mf[k.field], mf[k.field], k.want)
		}
	}

	// 5. Districts not written (or not recorded yet): failed, with a
	// reason.
	var notFailed, noReason, otherReason []string
	otherMsg := ""
	for _, e := range entries {
		if counted[e.DistrictID] {
			continue
		}
		switch {
		case e.Status != "failed":
			notFailed = append(notFailed, e.DistrictID+"="+e.Status)
		case e.ErrorMessage == "":
			noReason = append(noReason, e.DistrictID)
		case w.unwrittenMessage != "" && e.ErrorMessage != w.unwrittenMessage:
			otherReason = append(otherReason, e.DistrictID)
			otherMsg = e.ErrorMessage
		}
	}
	if len(notFailed) > 0 {
		bad("districts without a document whose manifest entry is not failed: %s", firstFew(notFailed))
	}
	if len(noReason) > 0 {
		bad("manifest entries of districts without a document, failed without an errorMessage: %s", firstFew(noReason))
	}
	if len(otherReason) > 0 {
		bad("manifest entries of districts not written with an errorMessage other than %q (e.g. %q): %s", w.unwrittenMessage, otherMsg, firstFew(otherReason))
	}

	// 6. What the application's readers report.
	if st != w.status {
		bad("metadata.status = %q, want %q", st, w.status)
	}
	meta, err := appMeta(date, root)
	if err != nil {
		bad("%v", err)
	} else if meta.WriteComplete != w.writeComplete {
		bad("metadata.writeComplete = %v (absent: true), want %v", md["writeComplete"], w.writeComplete)
	}
	if w.districts >= 0 && len(v.present) != w.districts {
		bad("%d district documents, want %d", len(v.present), w.districts)
	}
	if w.input != nil {
		inputIDs := map[string]bool{}
		for _, d := range w.input.Payload.Districts {
			inputIDs[d.DistrictID] = true
		}
		if d := setDiff("manifest districts", manifestIDs, "input districts", inputIDs); d != "" {
			bad("%s", d)
		}
	}
	if w.writeState != "" && md["writeState"] != w.writeState {
		bad("metadata.writeState = %v, want %q", md["writeState"], w.writeState)
	}
	if w.inputSnapshotID != "" && md["inputSnapshotId"] != w.inputSnapshotID {
		bad("metadata.inputSnapshotId = %v, want the input's snapshot_id %q", md["inputSnapshotId"], w.inputSnapshotID)
	}

	// The application's list.
	list, err := appList(ctx, c)
	if err != nil {
		bad("application list: %v", err)
	}
	found := false
	for _, e := range list {
		if e.DocID != date {
			continue
		}
		found = true
		if e.SnapshotID != date || e.Status != st || e.DistrictCount != len(counted) || e.WriteComplete != w.writeComplete {
			bad("application list shows {snapshotId %q, status %q, districts %d, writeComplete %v}, want {%q, %q, %d, %v}",
				e.SnapshotID, e.Status, e.DistrictCount, e.WriteComplete, date, w.status, len(counted), w.writeComplete)
		}
	}
	if !found && err == nil {
		bad("application list does not show it")
	}

	// The application's getSnapshot.
	snap, err := appGetSnapshot(ctx, c, date)
	switch {
	case err != nil:
		bad("application getSnapshot: %v", err)
	case snap == nil:
		bad("application getSnapshot: not found")
	default:
		got := map[string]bool{}
		for _, d := range snap.Districts {
			got[d.ID] = true
		}
		if d := setDiff("application getSnapshot districts", got, "district documents", counted); d != "" {
			bad("%s", d)
		}
		if w.input != nil {
			byID := map[string]model.Object{}
			for _, d := range w.input.Payload.Districts {
				byID[d.DistrictID] = memData(d)
			}
			var differ []string
			for _, d := range snap.Districts {
				if !sameJSON(d.Data, byID[d.ID]) {
					differ = append(differ, d.ID)
				}
			}
			if len(differ) > 0 {
				bad("application getSnapshot: data of districts %s differs from the input", firstFew(differ))
			}
		}
	}

	// The application's newest successful snapshot.
	newest, err := appLatestSuccessful(ctx, c)
	switch {
	case err != nil:
		bad("%v", err)
	case w.newestSuccessful && newest != date:
		bad("application newest-successful query returns %q, want it", newest)
	case !w.newestSuccessful && newest == date:
		bad("application newest-successful query returns it (status %q, writeComplete %v), it must not", st, md["writeComplete"])
	}
	return v, probs, false
}

// sameJSON reports whether a and b have the same canonical JSON (the
// same values, of the same types; an integer is not a float).
func sameJSON(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	x, err1 := model.Marshal(a)
	y, err2 := model.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func setOf(ss []string) map[string]bool {
	m := make(map[string]bool, len(ss))
	for _, s := range ss {
		m[s] = true
	}
	return m
}

// setDiff describes how sets a and b differ, "" when equal.
func setDiff(aName string, a map[string]bool, bName string, b map[string]bool) string {
	var onlyA, onlyB []string
	for k := range a {
		if !b[k] {
			onlyA = append(onlyA, k)
		}
	}
	for k := range b {
		if !a[k] {
			onlyB = append(onlyB, k)
		}
	}
	if len(onlyA) == 0 && len(onlyB) == 0 {
		return ""
	}
	return fmt.Sprintf("%s (%d) ≠ %s (%d): only in the first %s; only in the second %s",
		aName, len(a), bName, len(b), firstFew(onlyA), firstFew(onlyB))
}

// firstFew lists ids sorted, at most ten of them.
func firstFew(ids []string) string {
	if len(ids) == 0 {
		return "[]"
	}
	s := append([]string(nil), ids...)
	sort.Strings(s)
	if len(s) > 10 {
		return fmt.Sprintf("%v … (%d in all)", s[:10], len(s))
	}
	return fmt.Sprint(s)
}
