package snapshot

import (
	"context"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pacing"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// smallSnapshot is a valid snapshot of n districts of a few dozen bytes
// each (model.Generate's are 2–20 KB), for tests of many districts.
func smallSnapshot(date string, n int) *model.Snapshot {
	s := model.Generate(date, 1, 1)
	s.Rankings = nil
	s.Payload.Metadata.DistrictCount = int64(n)
	s.Payload.Districts = make([]model.DistrictStatistics, n)
	for i, id := range model.GeneratedDistrictIDs(n) {
		s.Payload.Districts[i] = model.NewDistrict(model.Object{"districtId": id, "asOfDate": date, "membership": model.Object{"total": int64(i)}})
	}
	return s
}

// pageIDs lists the manifest pages stored under snapshot id.
func (e *env) pageIDs(id string) []string {
	e.t.Helper()
	docs, err := e.clean.Collection(DefaultCollection).Doc(id).Collection(layout.PagesCollection).Documents(context.Background()).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	var ids []string
	for _, d := range docs {
		ids = append(ids, d.Ref.ID)
	}
	return ids
}

// A snapshot written again with fewer districts keeps only the pages it
// needs, and none once its manifest is inline again; written paged once
// more, its pages come back. Each time get returns the input and verify
// finds it intact.
func TestStalePagesAreDeleted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	for _, step := range []struct {
		n     int
		paged bool
		pages int
	}{{60, true, 9}, {20, true, 3}, {20, false, 0}, {30, true, 5}} {
		e.paged = step.paged
		in := gen(step.n, int64(step.n))
		mustWrite(t, e.writer(), day, in)
		if got := e.pageIDs(day); len(got) != step.pages {
			t.Errorf("%d districts, paged %v: pages %v, want %d", step.n, step.paged, got, step.pages)
		}
		e.rootData(day) // checks the pages against the root
		if got := e.get(day); !model.Equal(got, in) {
			t.Errorf("%d districts: read back differs: %s", step.n, model.Diff(got, in))
		}
		rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
		if err != nil || !rep.Intact || !rep.Complete || rep.Districts != step.n {
			t.Errorf("%d districts: verify %+v, %v", step.n, rep, err)
		}
	}
}

// Verify reports manifest pages that disagree with the root: one missing
// (its entries with it), one the root does not count.
func TestVerifyPages(t *testing.T) {
	t.Parallel()
	in := gen(30, 3)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(pages *firestore.CollectionRef) error
		want   string
	}{
		{"page missing", func(pages *firestore.CollectionRef) error {
			_, err := pages.Doc(layout.PageID(2)).Delete(ctx)
			return err
		}, "manifest page 00002 is missing"},
		{"page not counted", func(pages *firestore.CollectionRef) error {
			_, err := pages.Doc(layout.PageID(9)).Set(ctx, map[string]any{layout.FieldSnapshotID: day, layout.FieldDistricts: []any{}})
			return err
		}, "manifest page 00009 is stored, but the root counts 5 pages"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			e.paged = true
			mustWrite(t, e.writer(), day, in)
			if err := tc.damage(e.clean.Collection(DefaultCollection).Doc(day).Collection(layout.PagesCollection)); err != nil {
				t.Fatal(err)
			}
			rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || p.Kind == ProblemCounts && strings.Contains(p.Detail, tc.want)
			}
			if rep.Intact || !found {
				t.Errorf("problems %+v, want a %s: %q", rep.Problems, ProblemCounts, tc.want)
			}
		})
	}
}

// A 20,000-district snapshot (four times what fits inline) is written
// paged under the writer's defaults; chunks made to fail leave it partial
// with its manifest exact, repair completes it, get returns exactly the
// input and verify finds it intact. Every commit stays under Firestore's
// 10 MiB.
func TestTwentyThousandDistricts(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	const n = 20000
	in := smallSnapshot(day, n)
	if err := model.Validate(in, day); err != nil {
		t.Fatal(err)
	}
	denied := map[string]bool{}
	for _, i := range []int{0, 999, 1000, 7777, 19999} {
		denied[in.Payload.Districts[i].DistrictID] = true
	}
	e.f.setRule(func(c *commitCall) error {
		for _, d := range c.districts {
			if denied[d] {
				return status.Error(codes.PermissionDenied, "injected")
			}
		}
		return nil
	})
	// Commits of megabytes (the root and its 20 pages) take the emulator
	// seconds on a loaded machine.
	p := fastPolicy()
	p.AttemptTimeout, p.TotalTimeout = 2*time.Minute, 5*time.Minute
	// Chunks of 500 need a budget of 5,000 writes/s: a chunk holds at
	// most a tenth of a second of it.
	w := e.writer(WithBatchSize(500), WithConcurrency(4), WithRetryPolicy(p), WithWriteBudget(budgetOf(t, pacing.Fixed(5000), 1)))
	e.paged = true // by the writer's default threshold, not withPages
	t0 := time.Now()
	res := mustPartial(t)(w.Write(ctx, day, in))
	wall := time.Since(t0)
	t.Logf("write: %s, %d chunks, %d failed, %d districts not written, %d root commits", wall, res.TotalBatches, res.FailedBatches, len(res.FailedDistricts), res.RootCommits)
	if limit := int(wall.Seconds()) + 5; res.RootCommits > limit || res.RootCommits < 2 {
		t.Errorf("%d root commits in a %s write: want the root, the finish and at most one record a second (≤ %d)", res.RootCommits, wall, limit)
	}
	if res.FailedBatches != len(denied) || len(res.FailedDistricts) != 500*len(denied) {
		t.Errorf("%d chunks failed, %d districts not written; want %d chunks of 500", res.FailedBatches, len(res.FailedDistricts), len(denied))
	}
	if written, failed := checkExact(t, e, day); written != n-500*len(denied) || failed != 500*len(denied) {
		t.Errorf("manifest %d/%d", written, failed)
	}
	rep, err := NewReader(e.clean, "").Verify(ctx, day, in)
	if err != nil || !rep.Intact || rep.Complete {
		t.Fatalf("verify of the partial write: %+v, %v", rep.Problems, err)
	}

	e.f.setRule(nil)
	t0 = time.Now()
	rres, err := w.Repair(ctx, day, in)
	if err != nil || rres.Outcome != OutcomeComplete || rres.DistrictsWritten != 500*len(denied) {
		t.Fatalf("repair: %s, %v", brief(rres), err)
	}
	t.Logf("repair: %s, %d districts written", time.Since(t0), rres.DistrictsWritten)
	if written, failed := checkExact(t, e, day); written != n || failed != 0 {
		t.Errorf("manifest after repair %d/%d", written, failed)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Errorf("read back differs: %s", model.Diff(got, in))
	}
	rep, err = NewReader(e.clean, "").Verify(ctx, day, in)
	if err != nil || !rep.Intact || !rep.Complete || rep.Districts != n || rep.Documents != n {
		t.Errorf("verify: %+v, %v", rep, err)
	}
	if s, err := NewReader(e.clean, "").Summary(ctx, day); err != nil || s.State != StateComplete || s.Districts != n {
		t.Errorf("summary: %+v, %v", s, err)
	}

	largest, pages := 0, 0
	for _, c := range e.f.commits() {
		if c.err == nil && c.bytes > largest {
			largest, pages = c.bytes, c.pages
		}
	}
	var slowest time.Duration
	for _, c := range e.f.commits() {
		slowest = max(slowest, c.end.Sub(c.start))
	}
	t.Logf("largest commit: %d bytes, %d manifest pages; slowest commit %s", largest, pages, slowest)
	if largest > 10<<20 {
		t.Errorf("a commit of %d bytes, over Firestore's 10 MiB", largest)
	}
}
