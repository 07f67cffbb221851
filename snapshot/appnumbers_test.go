package snapshot

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/internal/jsclient"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// Powers of two around the edges of exact conversion.
const (
	two53 = 1 << 53 // the first integer past which doubles skip integers
	two63 = 1 << 63 // one past int64's range
)

// withWholeNumbers gives every district of s whole doubles (and -0.0)
// at the top of its data, in its maps and in arrays of maps: what the
// application's client stores as integers.
func withWholeNumbers(s *model.Snapshot) *model.Snapshot {
	for i, d := range s.Payload.Districts {
		data := memData(d)
		asMap(data["membership"])["changePercent"] = 39.0
		asMap(data["ranking"])["aggregateScore"] = float64(100 + i)
		row := asMap(data["clubPerformance"].([]any)[0])
		row["% Club Growth"] = math.Copysign(0, -1)
		data["history"] = []any{1.0, 2.5, map[string]any{"peak": 7.0, "trough": math.Copysign(0, -1)}, float64(1<<53 + 2)}
	}
	return s
}

// putAppSnapshot stores in under id as the TypeScript application writes
// it (DESIGN.md §3; readercontract's appFixture is the reference): a root
// with none of snapwriter's fields — no content hashes, no payloadHash —
// and a document for each district of written, its data as the
// application's client stores numbers (jsNumbers), then changed by
// alter when it is set. writeComplete false with status "success" is how
// the application's writer leaves a write that failed districts.
func putAppSnapshot(t *testing.T, e *env, id string, in *model.Snapshot, written []string, alter func(districtID string, data map[string]any)) {
	t.Helper()
	ctx := context.Background()
	pm := in.Payload.Metadata
	modified := time.Date(2026, 11, 21, 7, 12, 0, 0, time.UTC).Format(time.RFC3339Nano)
	ref := e.clean.Collection(DefaultCollection).Doc(id)
	all, ok, failed := []any{}, []any{}, []any{}
	entries := []any{}
	for _, d := range in.Payload.Districts {
		all = append(all, d.DistrictID)
		entry := map[string]any{"districtId": d.DistrictID, "fileName": "district_" + d.DistrictID,
			"fileSize": int64(1000), "lastModified": modified, "status": "success"}
		if !slices.Contains(written, d.DistrictID) {
			failed = append(failed, d.DistrictID)
			entry["status"] = "failed"
			entry["errorMessage"] = "Batch write failed after 3 retries: 4 DEADLINE_EXCEEDED: Deadline exceeded"
			entries = append(entries, entry)
			continue
		}
		ok = append(ok, d.DistrictID)
		entries = append(entries, entry)
		data := jsclient.Numbers(memData(d)).(map[string]any)
		if alter != nil {
			alter(d.DistrictID, data)
		}
		if _, err := ref.Collection("districts").Doc("district_"+d.DistrictID).Set(ctx, map[string]any{
			"districtId": d.DistrictID, "districtName": "District " + d.DistrictID,
			"collectedAt": pm.FetchedAt, "status": "success", "data": data,
		}); err != nil {
			t.Fatal(err)
		}
	}
	root := map[string]any{
		"metadata": map[string]any{
			"snapshotId": id, "createdAt": in.CreatedAt, "schemaVersion": in.SchemaVersion,
			"calculationVersion": in.CalculationVersion, "status": "success",
			"configuredDistricts": all, "successfulDistricts": ok, "failedDistricts": failed, "errors": []any{},
			"processingDuration": pm.ProcessingDurationMs, "source": pm.Source, "dataAsOfDate": pm.DataAsOfDate,
			"writeComplete": len(failed) == 0, "writeFailedDistricts": failed,
		},
		"manifest": map[string]any{
			"snapshotId": id, "createdAt": in.CreatedAt, "districts": entries, "totalDistricts": int64(len(entries)),
			"successfulDistricts": int64(len(ok)), "failedDistricts": int64(len(failed)),
		},
		"rankings": jsclient.Numbers(map[string]any(in.Rankings)),
	}
	if _, err := ref.Set(ctx, root); err != nil {
		t.Fatal(err)
	}
}

// storedData reads district id's data as stored under snapshot day.
func (e *env) storedData(id string) map[string]any {
	e.t.Helper()
	doc, err := e.clean.Collection(DefaultCollection).Doc(day).Collection("districts").Doc(layout.DistrictDocID(id)).Get(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return asMap(doc.Data()["data"])
}

// Issue #25, point 3: a partial snapshot the application wrote, its whole
// doubles stored as integers and -0 as 0, is repaired with the very input
// it was written from: the districts it stored are kept as they are (not
// one is committed again), only the failed ones are written, and the
// snapshot then verifies intact against that input.
func TestRepairKeepsApplicationWholeNumbers(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	in := withWholeNumbers(gen(60, 41))
	ids := layout.DistrictIDs(in)
	written, failed := ids[:50], ids[50:]
	putAppSnapshot(t, e, day, in, written, nil)
	probe := written[7]
	if got := asMap(e.storedData(probe)["membership"])["changePercent"]; got != int64(39) {
		t.Fatalf("the fixture stores changePercent as %T(%v), want the integer 39 the application's client stores", got, got)
	}

	before := len(e.f.commits())
	res, err := e.writer().Repair(ctx, day, in)
	if err != nil {
		t.Fatalf("Repair: %v", err)
	}
	checkInvariants(t, res)
	if res.Outcome != OutcomeComplete || res.DistrictsKept != len(written) || res.DistrictsWritten != len(failed) {
		t.Errorf("Repair = %s, kept %d; want complete, %d kept and %d written", brief(res), res.DistrictsKept, len(written), len(failed))
	}
	var committed []string
	for _, c := range e.f.commits()[before:] {
		committed = append(committed, c.districts...)
	}
	slices.Sort(committed)
	if want := slices.Sorted(slices.Values(failed)); !slices.Equal(committed, want) {
		t.Errorf("districts committed %v, want only the %d the application failed: %v", committed, len(want), want)
	}
	// Kept as the application stored them: integers.
	if got := asMap(e.storedData(probe)["membership"])["changePercent"]; got != int64(39) {
		t.Errorf("kept district %s: changePercent %T(%v), want the application's integer 39", probe, got, got)
	}
	if w, f := checkExact(t, e, day); w != len(ids) || f != 0 {
		t.Errorf("after repair: %d written, %d failed", w, f)
	}
	r := NewReader(e.clean, "")
	for _, with := range []*model.Snapshot{nil, in} {
		rep, err := r.Verify(ctx, day, with)
		if err != nil || !rep.Intact || !rep.Complete {
			t.Errorf("Verify (input %v) = %+v, %v; want intact and complete", with != nil, rep, err)
		}
	}
	if res, err := e.writer().Repair(ctx, day, in); err != nil || res.Outcome != OutcomeSkipped {
		t.Errorf("second Repair = %+v, %v; want skipped", res, err)
	}
}

// A complete snapshot the application wrote, whole doubles stored as
// integers: Repair with its input finds nothing to do (before, it refused
// the input as differing), and Verify finds the input stored.
func TestRepairSkipsCompleteApplicationSnapshot(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	in := withWholeNumbers(gen(20, 42))
	putAppSnapshot(t, e, day, in, layout.DistrictIDs(in), nil)
	before := len(e.f.commits())
	res, err := e.writer().Repair(ctx, day, in)
	if err != nil || res.Outcome != OutcomeSkipped {
		t.Fatalf("Repair = %+v, %v; want skipped", res, err)
	}
	if n := len(e.f.commits()) - before; n != 0 {
		t.Errorf("a skipped repair made %d commits", n)
	}
	rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
	if err != nil || !rep.Intact {
		t.Errorf("Verify against the input = %+v, %v; want intact", rep, err)
	}
}

// The converse: data that differs as Firestore compares it is still
// refused by Repair (naming the district, writing nothing) and reported by
// Verify, whoever wrote it — down to integers past 2^53, which a double
// cannot tell apart once converted.
func TestRepairStillRefusesRealNumberDifferences(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name          string
		input, stored any // membership.changePercent in the input, and as stored
	}{
		{"39.5 given, 39 stored", 39.5, int64(39)},
		{"39 given, 39.5 stored", int64(39), 39.5},
		{`39 given, "39" stored`, int64(39), "39"},
		{`39.0 given, "39" stored`, 39.0, "39"},
		{"2^53 given, 2^53+1 stored", float64(two53), int64(two53 + 1)},
		{"2^53+1 given, 2^53 stored (a double)", int64(two53 + 1), float64(two53)},
		{"2^63 given, max int64 stored", float64(two63), int64(math.MaxInt64)},
		{"0 given, null stored", int64(0), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			ctx := context.Background()
			in := withWholeNumbers(gen(3, 43))
			victim := in.Payload.Districts[1].DistrictID
			asMap(memData(in.Payload.Districts[1])["membership"])["changePercent"] = c.input
			putAppSnapshot(t, e, day, in, layout.DistrictIDs(in)[:2], func(id string, data map[string]any) {
				if id == victim {
					asMap(data["membership"])["changePercent"] = c.stored
				}
			})
			before := len(e.f.commits())
			_, err := e.writer().Repair(ctx, day, in)
			if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "differs from what is stored in district "+victim+";") {
				t.Errorf("Repair: %v; want ErrMismatch naming district %s alone", err, victim)
			}
			for _, cm := range e.f.commits()[before:] {
				if cm.root || len(cm.districts) > 0 {
					t.Errorf("a refused repair committed (root %v, districts %v)", cm.root, cm.districts)
				}
			}
			rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
			if err != nil {
				t.Fatal(err)
			}
			var differ []string
			for _, p := range rep.Problems {
				if p.Kind == ProblemInput {
					differ = append(differ, p.DistrictID)
				}
			}
			if !slices.Equal(differ, []string{victim}) {
				t.Errorf("Verify: districts differing from the input %v, want [%s]; problems %+v", differ, victim, rep.Problems)
			}
		})
	}
}

// The root payload counts too: a partial snapshot snapwriter wrote from
// an input whose rankings hold a whole double is repaired with an export
// that has the integer there (as the application's client would write
// it), and still refused with one whose number differs.
func TestRepairComparesPayloadNumbersAsFirestore(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	setScore := func(s *model.Snapshot, v any) *model.Snapshot {
		asMap(s.Rankings["rankings"].([]any)[0])["clubGrowthPercent"] = v
		return s
	}
	a := setScore(gen(120, 44), 12.0)
	e.deny(a.Payload.Districts[60].DistrictID)
	first := mustPartial(t)(e.writer().Write(ctx, day, a))
	failed := len(first.FailedDistricts)
	e.f.setRule(nil)

	other := setScore(gen(120, 44), 12.5)
	if _, err := e.writer().Repair(ctx, day, other); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "root payload") {
		t.Errorf("Repair with rankings 12.5 for 12.0: %v; want ErrMismatch naming the root payload", err)
	}
	r := NewReader(e.clean, "")
	if rep, err := r.Verify(ctx, day, other); err != nil || rep.Intact {
		t.Errorf("Verify against rankings 12.5 = %+v, %v; want the payload reported", rep, err)
	}

	b := setScore(gen(120, 44), int64(12))
	if rep, err := r.Verify(ctx, day, b); err != nil || !rep.Intact {
		t.Errorf("Verify of the partial snapshot against rankings 12 = %+v, %v; want intact", rep, err)
	}
	res, err := e.writer().Repair(ctx, day, b)
	if err != nil || res.Outcome != OutcomeComplete || res.DistrictsWritten != failed || res.DistrictsKept != 120-failed {
		t.Fatalf("Repair with rankings 12 for 12.0 = %s, %v; want the failed chunk written, the rest kept", brief(res), err)
	}
	if rep, err := r.Verify(ctx, day, b); err != nil || !rep.Intact || !rep.Complete {
		t.Errorf("Verify after repair = %+v, %v; want intact and complete", rep, err)
	}
}

// A Write that finds its own unfinished write of the same payload stored
// keeps the districts stored only where they are what it would write, to
// the byte: a district stored as 39.0 is written again for an input that
// has 39, so that the snapshot written is the input, types and all.
// (Firestore-equal data counts as the same for Repair and Verify only.)
func TestWriteResumeKeepsOnlyExactData(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	a := withWholeNumbers(gen(120, 45))
	e.deny(a.Payload.Districts[100].DistrictID)
	first := mustPartial(t)(e.writer().Write(ctx, day, a))
	e.f.setRule(nil)
	b := withWholeNumbers(gen(120, 45))
	changed := b.Payload.Districts[0].DistrictID
	asMap(memData(b.Payload.Districts[0])["membership"])["changePercent"] = int64(39)

	before := len(e.f.commits())
	res, err := e.writer().Write(ctx, day, b)
	if err != nil || res.Outcome != OutcomeComplete {
		t.Fatalf("Write = %s, %v", brief(res), err)
	}
	if want := len(first.FailedDistricts) + 1; res.DistrictsWritten != want || res.DistrictsKept != 120-want {
		t.Errorf("Write resumed with %d written, %d kept; want %d written (the failed and district %s), the rest kept",
			res.DistrictsWritten, res.DistrictsKept, want, changed)
	}
	rewritten := false
	for _, c := range e.f.commits()[before:] {
		rewritten = rewritten || slices.Contains(c.districts, changed)
	}
	if !rewritten {
		t.Errorf("district %s (39.0 stored, 39 given) was not written again", changed)
	}
	if got := e.get(day); !model.Equal(got, b) {
		t.Errorf("read back differs from the input: %s", model.Diff(got, b))
	}
}

// The content hashes snapwriter records stay hashes of the bytes it wrote:
// a district of its own write whose 39.0 was later stored as 39 (by the
// application's client, say) is reported altered, though it still equals
// the input as Firestore compares it, and Repair writes it again with the
// input's types.
func TestRecordedHashesStayExact(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	in := withWholeNumbers(gen(20, 46))
	mustWrite(t, e.writer(), day, in)
	edited := in.Payload.Districts[4].DistrictID
	if _, err := e.clean.Collection(DefaultCollection).Doc(day).Collection("districts").Doc(layout.DistrictDocID(edited)).Update(ctx,
		[]firestore.Update{{Path: "data.membership.changePercent", Value: int64(39)}}); err != nil {
		t.Fatal(err)
	}
	rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].Kind != ProblemAltered || rep.Problems[0].DistrictID != edited {
		t.Errorf("Verify: %+v; want district %s altered, and nothing differing from the input", rep.Problems, edited)
	}
	res, err := e.writer().Repair(ctx, day, in)
	if err != nil || res.DistrictsWritten != 1 {
		t.Fatalf("Repair = %s, %v; want district %s written again", brief(res), err, edited)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Errorf("after repair: %s", model.Diff(got, in))
	}
}

// jsExport is s as the application would export it: every whole double an
// integer (jsNumbers), in its districts and its rankings. (A whole double
// past 2^53 would stay a double, and still be read back to be compared.)
func jsExport(s *model.Snapshot) *model.Snapshot {
	for i := range s.Payload.Districts {
		s.Payload.Districts[i] = model.NewDistrict(jsclient.Numbers(memData(s.Payload.Districts[i])).(map[string]any))
	}
	s.Rankings = jsclient.Numbers(s.Rankings).(map[string]any)
	return s
}

// A lazily read input is read back from its file only where a number's
// type could be all that differs: data holding no double equal to an
// integer is compared by its hashes alone. A partial snapshot snapwriter
// wrote with 39.0 is repaired from the application's export, which has
// 39, reading back only the districts it writes; and an export whose
// district really differs is refused unread.
func TestRepairLazyInputReadsBackOnlyWhatItMust(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	// Whole doubles of JavaScript's safe range only: the export has none.
	safe := func() *model.Snapshot {
		s := withWholeNumbers(gen(120, 48))
		for _, d := range s.Payload.Districts {
			delete(memData(d), "history")
		}
		return s
	}
	a := safe()
	e.deny(a.Payload.Districts[60].DistrictID)
	first := mustPartial(t)(e.writer().Write(ctx, day, a))
	e.f.setRule(nil)

	other := jsExport(safe())
	victim := other.Payload.Districts[2].DistrictID
	asMap(memData(other.Payload.Districts[2])["membership"])["changePercent"] = 39.5
	lo := lazyCopy(t, other)
	if _, err := e.writer().Repair(ctx, day, lo); !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "stored in district "+victim+";") {
		t.Errorf("Repair with district %s's changePercent 39.5: %v; want ErrMismatch naming it alone", victim, err)
	}
	if n := lo.DataLoads(); n != 0 {
		t.Errorf("a refused repair read %d districts back", n)
	}

	lazy := lazyCopy(t, jsExport(safe()))
	res, err := e.writer().Repair(ctx, day, lazy)
	failed := len(first.FailedDistricts)
	if err != nil || res.Outcome != OutcomeComplete || res.DistrictsWritten != failed || res.DistrictsKept != 120-failed {
		t.Fatalf("Repair from the application's export = %s, %v; want %d written, the rest kept", brief(res), err, failed)
	}
	if n := lazy.DataLoads(); n != int64(failed) {
		t.Errorf("repair read %d districts back, want only the %d it wrote", n, failed)
	}
}
