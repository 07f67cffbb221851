package snapshot

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// errStopAfterMark stops a prune once its root is marked, as a kill there
// would (but the lock is released).
var errStopAfterMark = errors.New("test: stopped after the mark")

// leftOf lists every document of snapshot id that is still stored: the
// root, and every document below it (districts, pages, the fence
// document), by path below the collection.
func (e *env) leftOf(id string) []string {
	e.t.Helper()
	ctx := context.Background()
	ref := e.clean.Collection(DefaultCollection).Doc(id)
	var left []string
	if _, err := ref.Get(ctx); err == nil {
		left = append(left, id)
	} else if status.Code(err) != codes.NotFound {
		e.t.Fatal(err)
	}
	colls, err := ref.Collections(ctx).GetAll()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, c := range colls {
		refs, err := c.DocumentRefs(ctx).GetAll()
		if err != nil {
			e.t.Fatal(err)
		}
		for _, r := range refs {
			left = append(left, id+"/"+c.ID+"/"+r.ID)
		}
	}
	return left
}

// lockLeft reports whether snapshot id's lock document is still stored.
func (e *env) lockLeft(id string) bool {
	e.t.Helper()
	_, err := e.clean.Collection("locks").Doc(e.lockKey(id)).Get(context.Background())
	if err != nil && status.Code(err) != codes.NotFound {
		e.t.Fatal(err)
	}
	return err == nil
}

// writeDates writes a complete snapshot of n districts on each date.
func (e *env) writeDates(w *Writer, n int, dates ...string) map[string]*model.Snapshot {
	e.t.Helper()
	out := map[string]*model.Snapshot{}
	for i, d := range dates {
		out[d] = model.Generate(d, n, int64(i+1))
		mustWrite(e.t, w, d, out[d])
	}
	return out
}

// A prune deletes the whole snapshot (root, districts, manifest pages,
// fence document) in fenced chunks, releases its lock, and leaves the
// other dates alone.
func TestPruneDeletesWholeSnapshot(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		w := e.writer(WithBatchSize(7))
		ins := e.writeDates(w, 30, "2026-11-18", "2026-11-19", "2026-11-20")
		res, err := w.Prune(ctx, "2026-11-18")
		if err != nil {
			t.Fatalf("Prune: %v", err)
		}
		if !res.Found || !res.RootDeleted || res.DistrictsDeleted != 30 || res.Chunks < 5 {
			t.Errorf("result %+v: want found, root deleted, 30 districts in at least 5 chunks of 7", res)
		}
		if e.paged && res.PagesDeleted == 0 {
			t.Errorf("paged: no manifest page deleted (%+v)", res)
		}
		if left := e.leftOf("2026-11-18"); len(left) != 0 {
			t.Errorf("documents left of the pruned snapshot: %v", left)
		}
		if e.lockLeft("2026-11-18") {
			t.Error("the prune's lock is still held")
		}
		for _, d := range []string{"2026-11-19", "2026-11-20"} {
			if back := e.get(d); !model.Equal(back, ins[d]) {
				t.Errorf("%s damaged by the prune of another date: %s", d, model.Diff(back, ins[d]))
			}
		}
		// Again: nothing left to do.
		res, err = w.Prune(ctx, "2026-11-18")
		if err != nil || res.Found {
			t.Errorf("second Prune: %+v, %v; want not found, no error", res, err)
		}
	})
}

// The newest complete snapshot is never pruned, even when asked by id and
// newer snapshots exist that are not complete; then every other one can
// be pruned.
func TestPruneNeverNewestComplete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.writer()
	e.writeDates(w, 5, "2026-11-18", "2026-11-19")
	partial := model.Generate("2026-11-20", 60, 1)
	e.deny(partial.Payload.Districts[55].DistrictID)
	mustPartial(t)(w.Write(ctx, "2026-11-20", partial))
	e.f.setRule(nil)

	before := e.leftOf("2026-11-19")
	if _, err := w.Prune(ctx, "2026-11-19"); !errors.Is(err, ErrNewestComplete) {
		t.Fatalf("Prune of the newest complete: %v, want ErrNewestComplete", err)
	}
	if after := e.leftOf("2026-11-19"); len(after) != len(before) {
		t.Errorf("refused prune deleted documents: %d left of %d", len(after), len(before))
	}
	if got := e.get("2026-11-19"); got == nil {
		t.Fatal("newest complete unreadable")
	}
	list, err := NewReader(e.clean, "").List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The states a retention policy selects from (package retention):
	// 2026-11-19 is the newest complete, 2026-11-20 newer but partial.
	states := map[string]State{}
	for _, s := range list {
		states[s.SnapshotID] = s.State
	}
	if fmt.Sprint(states) != "map[2026-11-18:complete 2026-11-19:complete 2026-11-20:partial]" {
		t.Errorf("List states %v", states)
	}
	// Every other snapshot can go.
	for _, id := range []string{"2026-11-18", "2026-11-20"} {
		if _, err := w.Prune(ctx, id); err != nil {
			t.Errorf("Prune %s: %v", id, err)
		}
	}
	if id, err := NewReader(e.clean, "").Latest(ctx); err != nil || id != "2026-11-19" {
		t.Errorf("Latest after pruning the rest = %q, %v; want 2026-11-19", id, err)
	}
}

// A prune stopped once its root is marked leaves a snapshot every reader
// skips and List shows deleting (which package retention selects whatever
// the policy), and a rerun finishes it.
func TestPruneStoppedAfterMarkIsFinishedByARerun(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		w := e.writer()
		e.writeDates(w, 20, "2026-11-18", "2026-11-19", "2026-11-20")
		// Prune the newest: a newer complete must exist for it, so write one.
		res, err := w.prune(ctx, "2026-11-19", func(context.Context) error { return errStopAfterMark })
		if !errors.Is(err, errStopAfterMark) || res == nil || !res.Marked {
			t.Fatalf("prune stopped after the mark: %+v, %v", res, err)
		}
		if n := len(e.stored("2026-11-19")); n != 20 {
			t.Fatalf("%d districts stored after the mark, want all 20 (nothing deleted yet)", n)
		}
		r := NewReader(e.clean, "", WithLockBackends(e.locker()))
		list, err := r.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		states := map[string]State{}
		for _, s := range list {
			states[s.SnapshotID] = s.State
		}
		if states["2026-11-19"] != StateDeleting {
			t.Errorf("List state %q, want deleting", states["2026-11-19"])
		}
		// Readers: snapwriter's Get-latest and the application's
		// newest-successful query skip it; the application's view of it
		// lists no district as stored.
		rootDoc, err := e.clean.Collection(DefaultCollection).Doc("2026-11-19").Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		md := asMap(rootDoc.Data()[layout.FieldMetadata])
		if sd, _ := md[layout.FieldSuccessfulDistricts].([]any); md[layout.FieldStatus] != layout.StatusFailed || md[layout.FieldWriteComplete] != false || sd == nil || len(sd) != 0 {
			t.Errorf("marked root: status %v writeComplete %v successful %v", md[layout.FieldStatus], md[layout.FieldWriteComplete], md[layout.FieldSuccessfulDistricts])
		}
		entries, _ := asMap(rootDoc.Data()[layout.FieldManifest])[layout.FieldDistricts].([]any)
		if !e.paged && len(entries) != 20 {
			t.Errorf("inline manifest of the marked root has %d entries, want 20", len(entries))
		}
		for _, en := range entries {
			if asMap(en)[layout.FieldStatus] != layout.EntryFailed {
				t.Fatalf("manifest entry %v not failed on a marked root", en)
			}
		}
		// snapwriter's own Get returns no district of it (paged too).
		if back, err := r.Get(ctx, "2026-11-19"); err != nil {
			t.Errorf("Get of a snapshot being deleted: %v", err)
		} else if n := len(back.Payload.Districts); n != 0 {
			t.Errorf("Get of a snapshot being deleted returns %d districts, want none", n)
		}
		// Latest (status success, complete) must not be 2026-11-19 even
		// once 2026-11-20 is gone from the candidates: prune that too.
		if _, err := w.Prune(ctx, "2026-11-18"); err != nil {
			t.Fatal(err)
		}
		docs, err := e.clean.Collection(DefaultCollection).Where("metadata.status", "==", "success").Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			if d.Ref.ID == "2026-11-19" {
				t.Error("the application's newest-successful query can return the snapshot being deleted")
			}
		}
		if id, err := r.Latest(ctx); err != nil || id != "2026-11-20" {
			t.Errorf("Latest = %q, %v; want 2026-11-20", id, err)
		}
		// A writer of the same input does not resume a deleting root: it
		// is rewritten whole (checked in TestPruneRacingWrite); here the
		// rerun of the prune finishes it.
		res, err = w.Prune(ctx, "2026-11-19")
		if err != nil || !res.RootDeleted || res.DistrictsDeleted != 20 {
			t.Fatalf("rerun: %+v, %v", res, err)
		}
		if left := e.leftOf("2026-11-19"); len(left) != 0 {
			t.Errorf("left after the rerun: %v", left)
		}
		if e.lockLeft("2026-11-19") {
			t.Error("lock left after the rerun")
		}
	})
}

// pruneHeldAfterMark starts a prune of id by w that stops once its root
// is marked until resume is closed. It returns when the mark is made,
// with the channel the prune's error will come on.
func pruneHeldAfterMark(ctx context.Context, w *Writer, id string, resume <-chan struct{}) <-chan error {
	marked := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := w.prune(ctx, id, func(context.Context) error { close(marked); <-resume; return nil })
		done <- err
	}()
	<-marked
	return done
}

// A prune racing a write of the same date: the write wins (the prune,
// stalled after its mark and its lock lost, is fenced out and deletes
// nothing of the writer's), or the prune holds the lock and the write
// waits for it, then writes whole. Never a mix.
func TestPruneRacingWrite(t *testing.T) {
	t.Parallel()
	t.Run("write wins", func(t *testing.T) {
		t.Parallel()
		eachForm(t, func(t *testing.T, e *env) {
			ctx := context.Background()
			w := e.writer(WithLockTTL(time.Minute), WithBatchSize(5))
			e.writeDates(w, 30, "2026-11-19", "2026-11-20")
			resume := make(chan struct{})
			done := pruneHeldAfterMark(ctx, w, "2026-11-19", resume)
			// The prune's lock "expires" behind its back; a writer takes
			// the date over and writes it whole.
			if _, err := e.clean.Collection("locks").Doc(e.lockKey("2026-11-19")).Delete(ctx); err != nil {
				t.Fatal(err)
			}
			in := model.Generate("2026-11-19", 40, 9)
			mustWrite(t, e.writer(), "2026-11-19", in)
			close(resume)
			if err := <-done; !errors.Is(err, ErrFencedOut) {
				t.Fatalf("prune: %v, want ErrFencedOut", err)
			}
			if back := e.get("2026-11-19"); !model.Equal(back, in) {
				t.Errorf("the writer's snapshot was damaged by the prune: %s", model.Diff(back, in))
			}
			s, err := NewReader(e.clean, "").Summary(ctx, "2026-11-19")
			if err != nil || s.State != StateComplete {
				t.Errorf("state after the race: %+v, %v; want complete", s, err)
			}
		})
	})
	t.Run("prune first", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ctx := context.Background()
		w := e.writer(WithBatchSize(5))
		e.writeDates(w, 30, "2026-11-19", "2026-11-20")
		resume := make(chan struct{})
		done := pruneHeldAfterMark(ctx, w, "2026-11-19", resume)
		// The writer meets the prune's lock and waits for it.
		in := model.Generate("2026-11-19", 40, 9)
		wrote := make(chan error, 1)
		go func() {
			res, err := e.writer(WithLockWait(30*time.Second)).Write(ctx, "2026-11-19", in)
			if err == nil && res.Outcome != OutcomeComplete {
				err = fmt.Errorf("outcome %v", res.Outcome)
			}
			wrote <- err
		}()
		time.Sleep(300 * time.Millisecond)
		close(resume)
		if err := <-done; err != nil {
			t.Fatalf("prune: %v", err)
		}
		if err := <-wrote; err != nil {
			t.Fatalf("write after the prune: %v", err)
		}
		if back := e.get("2026-11-19"); !model.Equal(back, in) {
			t.Errorf("the write after the prune is not whole: %s", model.Diff(back, in))
		}
	})
	t.Run("writer at work", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t)
		ctx := context.Background()
		e.writeDates(e.writer(), 5, "2026-11-20")
		in := model.Generate("2026-11-19", 30, 3)
		rootDone, resume := make(chan struct{}), make(chan struct{})
		wrote := make(chan error, 1)
		go func() {
			_, err := e.writer(withBeforeChunks(func(context.Context) { close(rootDone); <-resume })).Write(ctx, "2026-11-19", in)
			wrote <- err
		}()
		<-rootDone
		if _, err := e.writer().Prune(ctx, "2026-11-19"); !errors.Is(err, ErrLockHeld) {
			t.Errorf("prune while a writer holds the lock: %v, want ErrLockHeld", err)
		}
		close(resume)
		if err := <-wrote; err != nil {
			t.Fatal(err)
		}
		if back := e.get("2026-11-19"); !model.Equal(back, in) {
			t.Errorf("write damaged: %s", model.Diff(back, in))
		}
	})
}

// A write of the same input over a root a prune left deleting rewrites it
// whole: it does not resume (keep) districts the prune may have deleted.
func TestWriteOverDeletingRootIsWhole(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.writer(WithBatchSize(5))
	ins := e.writeDates(w, 30, "2026-11-19", "2026-11-20")
	if _, err := w.prune(ctx, "2026-11-19", func(context.Context) error { return errStopAfterMark }); !errors.Is(err, errStopAfterMark) {
		t.Fatal(err)
	}
	// Half the districts go, as a prune killed midway leaves them.
	for _, id := range sortedIDs(ins["2026-11-19"])[:15] {
		if _, err := e.clean.Collection(DefaultCollection).Doc("2026-11-19").Collection(layout.DistrictsCollection).Doc(layout.DistrictDocID(id)).Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
	res := mustWrite(t, w, "2026-11-19", ins["2026-11-19"])
	if res.DistrictsWritten != 30 {
		t.Errorf("districts written %d, want all 30", res.DistrictsWritten)
	}
	if back := e.get("2026-11-19"); !model.Equal(back, ins["2026-11-19"]) {
		t.Errorf("not whole: %s", model.Diff(back, ins["2026-11-19"]))
	}
}

// A prune refuses a root written under a newer fence (forged), as a
// write does, and deletes nothing.
func TestPruneRefusesNewerFence(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	w := e.writer()
	e.writeDates(w, 5, "2026-11-19", "2026-11-20")
	if _, err := e.clean.Collection(DefaultCollection).Doc("2026-11-19").Update(ctx,
		[]firestore.Update{{Path: "metadata.writerFence", Value: "900000000000000"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Prune(ctx, "2026-11-19"); !errors.Is(err, ErrFencedOut) {
		t.Fatalf("err = %v, want ErrFencedOut", err)
	}
	if n := len(e.stored("2026-11-19")); n != 5 {
		t.Errorf("%d districts left, want 5", n)
	}
}

// The mark's failed list keeps the stored failed districts as they are,
// then adds the successful ones it lacks, once each, in their order; ids
// that were not strings (read as "") are dropped, and nothing is null.
func TestMarkedFailed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		failed, successful, want []string
	}{
		{nil, nil, []string{}},
		{[]string{"3", "1"}, []string{"2", "1", "4", "2"}, []string{"3", "1", "2", "4"}},
		{[]string{"", "5"}, []string{"", "6"}, []string{"5", "6"}},
		{[]string{"7", "7"}, nil, []string{"7", "7"}}, // the stored list, as it is
	}
	for _, c := range cases {
		got := markedFailed(c.failed, c.successful)
		if got == nil || fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("markedFailed(%q, %q) = %#v, want %q", c.failed, c.successful, got, c.want)
		}
	}
}
