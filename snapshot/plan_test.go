package snapshot

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// planned runs plan and fails the test if it committed anything or left a
// lock or fence document behind: a dry run only reads.
func (e *env) planned(plan func() (*Plan, error)) *Plan {
	e.t.Helper()
	before, locks := len(e.f.commits()), lockDocs(e.t, e)
	pl, err := plan()
	if err != nil {
		e.t.Fatalf("plan: %v", err)
	}
	if n := len(e.f.commits()); n != before {
		e.t.Errorf("the plan sent %d commits", n-before)
	}
	if n := lockDocs(e.t, e); n != locks {
		e.t.Errorf("the plan left %d lock documents, want %d", n, locks)
	}
	return pl
}

// rootSize is the stored root's size, as Plan sizes it.
func (e *env) storedRootSize(id string) int {
	e.t.Helper()
	doc, err := e.clean.Collection(DefaultCollection).Doc(id).Get(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return model.FirestoreSize(doc.Data())
}

// near reports whether a and b differ by at most a few bytes: the
// timestamps a plan cannot know (RFC 3339 drops trailing zeros).
func near(a, b int) bool { return a-b <= 16 && b-a <= 16 }

// rewritten is the set of districts res's chunks wrote.
func rewritten(res *Result) []string {
	var ids []string
	for _, b := range res.BatchResults {
		if b.BatchIndex > 0 {
			ids = append(ids, b.DistrictIDs...)
		}
	}
	sort.Strings(ids)
	return ids
}

func planIDs(pl *Plan) []string {
	ids := make([]string, 0, len(pl.Rewrite))
	for _, d := range pl.Rewrite {
		ids = append(ids, d.DistrictID)
	}
	sort.Strings(ids)
	return ids
}

// A dry run of a write plans what the write then does: its chunks, its
// manifest's form, its root's size and its lock key — and writes nothing.
func TestPlanMatchesWrite(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		in := gen(130, 5)
		w := e.writer(WithBatchSize(40))
		pl := e.planned(func() (*Plan, error) { return w.Planner().Plan(ctx, day, in) })
		if ids := e.stored(day); len(ids) != 0 {
			t.Fatal("the plan wrote districts")
		}
		if _, err := e.clean.Collection(DefaultCollection).Doc(day).Get(ctx); status.Code(err) != codes.NotFound {
			t.Fatalf("the plan wrote the root: %v", err)
		}
		wantForm, wantPages := ManifestInline, 0
		if e.paged {
			wantForm, wantPages = ManifestPages, (130+testPageSize-1)/testPageSize
		}
		if pl.Action != PlanWrite || pl.Stored != StoredNone || pl.Districts != 130 || pl.DistrictsToWrite != 130 || pl.Chunks != 4 ||
			pl.BatchSize != 40 || pl.Manifest.Form != wantForm || pl.Manifest.Pages != wantPages || pl.RootLimitBytes != 1<<20 ||
			pl.RootBytes <= pl.RootBytesComplete || len(pl.Rewrite) != 0 {
			t.Fatalf("plan = %+v", pl)
		}
		key, _ := w.scope.LockKey("firestore", day)
		if pl.Lock.Backend != "firestore" || pl.Lock.Key != key || pl.Lock.KeyHash == "" || pl.Lock.KeyHash == key {
			t.Errorf("plan lock = %+v", pl.Lock)
		}

		res := mustWrite(t, w, day, in)
		if res.Chunks != pl.Chunks {
			t.Errorf("the write committed %d chunks, the plan said %d", res.Chunks, pl.Chunks)
		}
		if got := e.storedRootSize(day); !near(got, pl.RootBytesComplete) {
			t.Errorf("stored root is %d bytes, the plan said %d", got, pl.RootBytesComplete)
		}
		md := e.rootData(day)["metadata"].(map[string]any) // checks the manifest's form too
		if md["writerLockKeyHash"] != pl.Lock.KeyHash {
			t.Errorf("the write recorded key hash %v, the plan said %s", md["writerLockKeyHash"], pl.Lock.KeyHash)
		}

		// Again: the stored snapshot is replaced, or skipped when complete.
		again := e.planned(func() (*Plan, error) { return w.Planner().Plan(ctx, day, in) })
		if again.Action != PlanWrite || again.Stored != string(StateComplete) || again.Chunks != 4 {
			t.Errorf("plan over a complete snapshot = %+v", again)
		}
		skip := e.planned(func() (*Plan, error) { return e.writer(WithSkipComplete(true)).Planner().Plan(ctx, day, in) })
		if skip.Action != PlanSkip || skip.Chunks != 0 {
			t.Errorf("plan with WithSkipComplete = %+v", skip)
		}
		// A smaller input deletes the districts it no longer has.
		fewer := gen(100, 5)
		if pl := e.planned(func() (*Plan, error) { return w.Planner().Plan(ctx, day, fewer) }); pl.StaleDeletes != 30 || pl.Chunks != 4 {
			t.Errorf("plan of a smaller input = %+v, want 30 stale deletes in 4 chunks", pl)
		}
		if res := mustWrite(t, w, day, fewer); res.StaleDeleted != 30 || res.Chunks != 4 {
			t.Errorf("write of the smaller input: %d deleted in %d chunks", res.StaleDeleted, res.Chunks)
		}
	})
}

// A dry run of a repair lists exactly the districts the repair then
// writes, each with its reason, by the decision Repair makes.
func TestPlanRepairMatchesRepair(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		in := gen(60, 33)
		ids := layout.DistrictIDs(in)
		w := e.writer(WithBatchSize(10))
		e.deny(ids[25]) // its chunk, ids[20:30], fails
		mustPartial(t)(w.Write(ctx, day, in))
		e.f.setRule(nil)
		root := e.clean.Collection(DefaultCollection).Doc(day)
		if _, err := root.Collection("districts").Doc(layout.DistrictDocID(ids[3])).Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := root.Collection("districts").Doc(layout.DistrictDocID(ids[40])).Update(ctx,
			[]firestore.Update{{Path: "data.membership.total", Value: int64(-1)}}); err != nil {
			t.Fatal(err)
		}
		pl := e.planned(func() (*Plan, error) { return w.Planner().PlanRepair(ctx, day, in) })
		want := map[string]RewriteReason{ids[3]: RewriteMissing, ids[40]: RewriteAltered}
		for _, id := range ids[20:30] {
			want[id] = RewriteFailed
		}
		got := map[string]RewriteReason{}
		for _, d := range pl.Rewrite {
			got[d.DistrictID] = d.Reason
		}
		if pl.Action != PlanRepair || pl.Stored != string(StatePartial) || pl.DistrictsToWrite != 12 || pl.DistrictsKept != 48 || pl.Chunks != 2 || !maps.Equal(got, want) {
			t.Fatalf("plan = %+v\nrewrite %v, want %v", pl, got, want)
		}
		res, err := w.Repair(ctx, day, in)
		if err != nil || res.Outcome != OutcomeComplete {
			t.Fatalf("Repair = %s, %v", brief(res), err)
		}
		if r := rewritten(res); !slices.Equal(r, planIDs(pl)) || res.Chunks != pl.Chunks || res.DistrictsKept != pl.DistrictsKept {
			t.Errorf("the repair wrote %v in %d chunks, keeping %d; the plan said %v in %d, keeping %d",
				r, res.Chunks, res.DistrictsKept, planIDs(pl), pl.Chunks, pl.DistrictsKept)
		}
		if got := e.storedRootSize(day); !near(got, pl.RootBytesComplete) {
			t.Errorf("stored root is %d bytes, the plan said %d", got, pl.RootBytesComplete)
		}
		done := e.planned(func() (*Plan, error) { return w.Planner().PlanRepair(ctx, day, in) })
		if done.Action != PlanSkip {
			t.Errorf("plan of a repair of a complete snapshot = %+v", done)
		}
	})
}

// A write whose finish never recorded its outcome leaves its failed chunk's
// districts "not written yet": the plan calls them pending, and the rest,
// stored by that writer but maybe not recorded, kept.
func TestPlanRepairPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	in := gen(30, 9)
	ids := layout.DistrictIDs(in)
	w := e.writer(WithBatchSize(10))
	e.f.setRule(func(c *commitCall) error {
		if c.has(ids[15]) || c.root && c.state == layout.StateFinished {
			return status.Error(codes.PermissionDenied, "injected")
		}
		return nil
	})
	if _, err := w.Write(ctx, day, in); !errors.Is(err, ErrManifestNotRecorded) {
		t.Fatalf("Write: %v, want ErrManifestNotRecorded", err)
	}
	e.f.setRule(nil)
	pl := e.planned(func() (*Plan, error) { return w.Planner().PlanRepair(ctx, day, in) })
	if pl.Action != PlanRepair || len(pl.Rewrite) != 10 || pl.DistrictsKept != 20 {
		t.Fatalf("plan = %+v", pl)
	}
	for _, d := range pl.Rewrite {
		if d.Reason != RewritePending {
			t.Errorf("district %s: reason %s, want pending", d.DistrictID, d.Reason)
		}
	}
	// A write of the same input resumes it the same way.
	if rp := e.planned(func() (*Plan, error) { return w.Planner().Plan(ctx, day, in) }); rp.Action != PlanResume || !slices.Equal(planIDs(rp), planIDs(pl)) {
		t.Errorf("write plan = %+v", rp)
	}
	res, err := w.Repair(ctx, day, in)
	if err != nil || !slices.Equal(rewritten(res), planIDs(pl)) {
		t.Errorf("Repair wrote %v (%v), the plan said %v", rewritten(res), err, planIDs(pl))
	}
}

// What Repair refuses, its plan refuses alike; an invalid input is
// refused before any read.
func TestPlanRefuses(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.writer()
	mustWrite(t, w, day, gen(20, 1))
	if _, err := w.Planner().PlanRepair(ctx, day, gen(20, 2)); !errors.Is(err, ErrMismatch) {
		t.Errorf("PlanRepair of another export: %v, want ErrMismatch", err)
	}
	if pl, err := e.writer(WithRewriteChanged(true)).Planner().PlanRepair(ctx, day, gen(21, 2)); !errors.Is(err, ErrMismatch) {
		t.Errorf("PlanRepair of other districts: %+v, %v, want ErrMismatch", pl, err)
	}
	bad := gen(3, 1)
	bad.Payload.Districts[1].DistrictID = bad.Payload.Districts[0].DistrictID
	before := len(e.f.commits())
	if _, err := w.Planner().Plan(ctx, day, bad); !errors.Is(err, model.ErrInvalid) {
		t.Errorf("Plan of an invalid input: %v, want model.ErrInvalid", err)
	}
	if len(e.f.commits()) != before {
		t.Error("the plan of an invalid input committed")
	}
}

// The text form names the manifest's pages, skips what a skip does not
// do, and lists at most maxTextIDs districts per reason.
func TestPlanWriteText(t *testing.T) {
	t.Parallel()
	pl := &Plan{SnapshotID: day, Op: "repair", Action: PlanRepair, Why: "w", Stored: "partial", Districts: 40, DistrictsToWrite: 40,
		BatchSize: 50, Chunks: 1, Manifest: PlanManifest{Form: ManifestPages, Pages: 3, PageSize: 1000}, RootBytes: 524288,
		RootLimitBytes: 1 << 20, Lock: PlanLock{Backend: "firestore", Key: "k", KeyHash: "h"}}
	for i := range 40 {
		pl.Rewrite = append(pl.Rewrite, PlannedDistrict{DistrictID: fmt.Sprint(i), Reason: RewriteFailed})
	}
	pl.Rewrite[39].Reason = RewriteAltered
	var b strings.Builder
	if err := pl.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"dry run of repair " + day, "pages (3 pages of up to 1000 entries)", "50.0% of the 1048576-byte limit",
		"failed (39): 0 1 2", "… and 9 more", "altered (1): 39", "key k (key hash h)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	skip := &Plan{SnapshotID: day, Op: "write", Action: PlanSkip}
	if err := skip.WriteText(&b); err != nil || strings.Contains(b.String(), "chunks:") || !strings.Contains(b.String(), "nothing would be written") {
		t.Errorf("skip text (%v):\n%s", err, b.String())
	}
}
