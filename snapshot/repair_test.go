package snapshot

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// checkExact asserts that the manifest of snapshot id says success for
// exactly the districts whose documents exist, and that the metadata's
// failed list is exactly the rest.
func checkExact(t *testing.T, e *env, id string) (written, failed int) {
	t.Helper()
	stored := map[string]bool{}
	for _, d := range e.stored(id) {
		stored[d] = true
	}
	root := e.rootData(id)
	md, mf := asMap(root["metadata"]), asMap(root["manifest"])
	fences := map[string]any{}
	docs, err := e.clean.Collection(DefaultCollection).Doc(id).Collection("districts").Select("writerFence").Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		fences[strings.TrimPrefix(d.Ref.ID, "district_")] = d.Data()["writerFence"]
	}
	failedMD := map[string]bool{}
	for _, x := range md["writeFailedDistricts"].([]any) {
		failedMD[x.(string)] = true
	}
	successful, failedAll := map[string]bool{}, map[string]bool{}
	for _, x := range md["successfulDistricts"].([]any) {
		successful[x.(string)] = true
	}
	for _, x := range md["failedDistricts"].([]any) {
		failedAll[x.(string)] = true
	}
	if md["snapshotId"] != id || mf["snapshotId"] != id {
		t.Errorf("snapshotId %v (manifest %v), want the date %s", md["snapshotId"], mf["snapshotId"], id)
	}
	if st := md["status"]; st != "success" && st != "partial" && st != "failed" {
		t.Errorf("metadata.status %v: not in the application's vocabulary", st)
	}
	seen := map[string]bool{}
	for _, x := range mf["districts"].([]any) {
		en := asMap(x)
		d := en["districtId"].(string)
		if seen[d] {
			t.Errorf("district %s has two manifest entries", d)
		}
		seen[d] = true
		if (en["status"] == layout.EntrySuccess) != successful[d] || (en["status"] == layout.EntrySuccess) == failedAll[d] {
			t.Errorf("district %s: manifest %v, in successfulDistricts %v, in failedDistricts %v", d, en["status"], successful[d], failedAll[d])
		}
		if en["status"] == layout.EntryFailed && en["errorMessage"] == nil {
			t.Errorf("district %s: failed without an errorMessage", d)
		}
		switch en["status"] {
		case layout.EntrySuccess:
			written++
			if !stored[d] || failedMD[d] {
				t.Errorf("district %s: manifest success, stored %v, in writeFailedDistricts %v", d, stored[d], failedMD[d])
			}
		case layout.EntryFailed:
			failed++
			// While the root says writing, the writer's last districts
			// may be stored and not recorded yet: never the other way.
			if stored[d] && writing(md) && fences[d] == md["writerFence"] {
				stored[d] = false
			}
			if stored[d] || !failedMD[d] {
				t.Errorf("district %s: manifest failed, stored %v, in writeFailedDistricts %v", d, stored[d], failedMD[d])
			}
		default:
			t.Errorf("district %s: manifest status %v: not in the application's vocabulary", d, en["status"])
		}
	}
	if len(successful) != written {
		t.Errorf("successfulDistricts lists %d districts, the manifest %d", len(successful), written)
	}
	if mf["successfulDistricts"] != int64(written) || mf["failedDistricts"] != int64(failed) {
		t.Errorf("manifest counts %v/%v, entries say %d/%d", mf["successfulDistricts"], mf["failedDistricts"], written, failed)
	}
	return written, failed
}

func lockDocs(t *testing.T, e *env) int {
	t.Helper()
	docs, err := e.clean.Collection("locks").Documents(context.Background()).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	return len(docs)
}

// A partial snapshot becomes complete and equal to the input; only the
// failed districts are written again.
func TestRepairCompletesPartial(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(132, 7)
		victim := layout.DistrictIDs(in)[60]
		e.deny(victim)
		res := mustPartial(t)(e.writer().Write(context.Background(), day, in))
		failed := map[string]bool{}
		for _, d := range res.FailedDistricts {
			failed[d] = true
		}
		e.f.setRule(nil)
		before := len(e.f.commits())

		rep, err := e.writer().Repair(context.Background(), day, in)
		if err != nil {
			t.Fatalf("Repair: %v", err)
		}
		checkInvariants(t, rep)
		if rep.Outcome != OutcomeComplete || rep.DistrictsWritten != len(failed) || rep.Fence <= res.Fence {
			t.Errorf("repair result = %+v (first write fence %s)", rep, res.Fence)
		}
		for _, c := range e.f.commits()[before:] {
			for _, d := range c.districts {
				if !failed[d] {
					t.Errorf("repair re-wrote district %s, which had not failed", d)
				}
			}
		}
		if w, f := checkExact(t, e, day); w != 132 || f != 0 {
			t.Errorf("after repair: %d written, %d failed", w, f)
		}
		md := asMap(e.rootData(day)["metadata"])
		if md["status"] != in.Status || md["writeComplete"] != true || md["writerFence"] != rep.Fence || md["repairedAt"] == nil {
			t.Errorf("metadata after repair: status %v complete %v fence %v repairedAt %v", md["status"], md["writeComplete"], md["writerFence"], md["repairedAt"])
		}
		if got := e.get(day); !model.Equal(in, got) {
			t.Errorf("repaired snapshot differs from the input: %s", model.Diff(in, got))
		}
		if s, err := NewReader(e.clean, "").Summary(context.Background(), day); err != nil || s.State != "complete" {
			t.Errorf("summary = %+v, %v", s, err)
		}
		if n := lockDocs(t, e); n != 0 {
			t.Errorf("%d lock documents left", n)
		}
	})
}

func TestRepairOfCompleteSnapshotIsNoop(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(20, 1)
		first := mustWrite(t, e.writer(), day, in)
		before := len(e.f.commits())
		rep, err := e.writer().Repair(context.Background(), day, in)
		if err != nil || rep.Outcome != OutcomeSkipped {
			t.Fatalf("Repair = %+v, %v; want skipped", rep, err)
		}
		if n := len(e.f.commits()) - before; n != 0 {
			t.Errorf("a no-op repair made %d commits", n)
		}
		if f := asMap(e.rootData(day)["metadata"])["writerFence"]; f != first.Fence {
			t.Errorf("writerFence %v, want %s untouched", f, first.Fence)
		}
	})
}

func TestRepairRefusesOtherInput(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	mustWrite(t, e.writer(), day, gen(20, 1))
	root := e.rootData(day)
	for name, in := range map[string]*model.Snapshot{"more districts": gen(21, 1), "other creation time": func() *model.Snapshot {
		s := gen(20, 1)
		s.CreatedAt = "2026-11-21T00:00:00.000Z"
		return s
	}()} {
		before := len(e.f.commits())
		_, err := e.writer().Repair(context.Background(), day, in)
		if !errors.Is(err, ErrMismatch) {
			t.Errorf("%s: err = %v, want ErrMismatch", name, err)
		}
		// Only changed data is a ChangedError (WithRewriteChanged lifts
		// it); other districts are not.
		var ce *ChangedError
		changed := errors.As(err, &ce)
		switch want := name == "other creation time"; {
		case changed != want:
			t.Errorf("%s: errors.As(ChangedError) = %v, want %v (%v)", name, changed, want, err)
		case changed && (!reflect.DeepEqual(ce.Changed, []string{"the root payload (metadata, rankings, …)"}) || ce.More != 0):
			t.Errorf("%s: ChangedError %+v, want the root payload alone", name, ce)
		}
		if strings.Contains(err.Error(), "--") {
			t.Errorf("%s: the library's message names a command-line flag: %v", name, err)
		}
		if n := len(e.f.commits()) - before; n != 0 {
			t.Errorf("%s: %d commits", name, n)
		}
	}
	if !reflect.DeepEqual(root, e.rootData(day)) {
		t.Error("the root changed")
	}
}

// Repair knows a snapshot by its date and its districts, not by the
// input's snapshot_id: an export of the same data numbered otherwise
// completes a partial write, and the root then keeps that input's id for
// `get`, while metadata.snapshotId stays the date.
func TestRepairIgnoresSnapshotID(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(120, 8)
		e.deny(in.Payload.Districts[70].DistrictID)
		mustPartial(t)(e.writer().Write(context.Background(), day, in))
		e.f.setRule(nil)
		other := gen(120, 8)
		other.SnapshotID = "1795244400000"
		res, err := e.writer().Repair(context.Background(), day, other)
		if err != nil || res.Outcome != OutcomeComplete {
			t.Fatalf("Repair = %+v, %v", res, err)
		}
		if w, f := checkExact(t, e, day); w != 120 || f != 0 {
			t.Errorf("manifest %d/%d", w, f)
		}
		md := asMap(e.rootData(day)["metadata"])
		if md["snapshotId"] != day || md["inputSnapshotId"] != "1795244400000" {
			t.Errorf("snapshotId %v, inputSnapshotId %v", md["snapshotId"], md["inputSnapshotId"])
		}
		if got := e.get(day); !model.Equal(got, other) {
			t.Errorf("read back differs: %s", model.Diff(got, other))
		}
	})
}

// A writer that died before its root leaves nothing stored: Repair writes
// the whole snapshot.
func TestRepairOfMissingSnapshotWritesIt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := model.Generate("2026-01-01", 60, 1)
	res, err := e.writer().Repair(context.Background(), "2026-01-01", in)
	if err != nil || res.Outcome != OutcomeComplete || res.DistrictsWritten != 60 {
		t.Fatalf("Repair = %+v, %v", res, err)
	}
	checkInvariants(t, res)
	if w, f := checkExact(t, e, "2026-01-01"); w != 60 || f != 0 {
		t.Errorf("manifest %d/%d", w, f)
	}
	if got := e.get("2026-01-01"); !model.Equal(got, in) {
		t.Errorf("read back differs: %s", model.Diff(got, in))
	}
}

// Stopping a write (SIGTERM in the CLI) lets the chunk in flight finish,
// starts no other, records exactly what was written, and releases the lock;
// Repair completes it.
func TestStopLetsChunksInFlightFinish(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(300, 3) // 6 chunks
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var chunks atomic.Int32
		e.f.setRule(func(c *commitCall) error {
			if len(c.districts) > 0 && chunks.Add(1) == 2 {
				cancel() // the stop arrives while chunk 2 is in flight: its commit is sent after it
			}
			return nil
		})
		res, err := e.writer(WithConcurrency(1), WithGracePeriod(10*time.Second)).Write(ctx, day, in)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, ErrPartial) || res == nil || res.Outcome != OutcomePartial {
			t.Fatalf("Write = %s, %v; want a partial result, ErrPartial and context.Canceled", brief(res), err)
		}
		checkInvariants(t, res)
		if res.SuccessfulBatches != 3 || res.DistrictsWritten != 100 {
			t.Errorf("root + 2 chunks should have committed: %+v", res)
		}
		for _, b := range res.BatchResults[3:] {
			if b.Success || b.RetryAttempts != 0 {
				t.Errorf("batch %d ran after the stop: %+v", b.BatchIndex, b)
			}
		}
		if w, f := checkExact(t, e, day); w != 100 || f != 200 {
			t.Errorf("manifest: %d written, %d failed; want 100/200", w, f)
		}
		if n := lockDocs(t, e); n != 0 {
			t.Errorf("%d lock documents left after the stop", n)
		}
		e.f.setRule(nil)
		rep, err := e.writer().Repair(context.Background(), day, in)
		if err != nil || rep.Outcome != OutcomeComplete || rep.DistrictsWritten != 200 {
			t.Fatalf("Repair = %+v, %v", rep, err)
		}
		if got := e.get(day); !model.Equal(in, got) {
			t.Errorf("after repair: %s", model.Diff(in, got))
		}
	})
}

// A chunk that outlasts the grace period is abandoned and recorded as
// failed; the manifest stays exact.
func TestStopAbandonsChunksAfterGracePeriod(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := gen(150, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var chunks atomic.Int32
	e.f.setRule(func(c *commitCall) error {
		if len(c.districts) > 0 && chunks.Add(1) == 2 {
			cancel()
			<-c.ctx.Done() // held past the grace period, which ends the commit's context
			return c.ctx.Err()
		}
		return nil
	})
	res, err := e.writer(WithConcurrency(1), WithGracePeriod(50*time.Millisecond)).Write(ctx, day, in)
	mustPartial(t)(res, err)
	if w, f := checkExact(t, e, day); w != 50 || f != 100 {
		t.Errorf("manifest: %d written, %d failed; want 50/100", w, f)
	}
	if n := lockDocs(t, e); n != 0 {
		t.Errorf("%d lock documents left", n)
	}
}

// WithSkipComplete leaves a complete snapshot alone and writes a partial one.
func TestSkipComplete(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(60, 2)
		first := mustWrite(t, e.writer(), day, in)
		before := len(e.f.commits())
		res, err := e.writer(WithSkipComplete(true)).Write(context.Background(), day, in)
		if err != nil || res.Outcome != OutcomeSkipped {
			t.Fatalf("Write = %+v, %v; want skipped", res, err)
		}
		if n := len(e.f.commits()) - before; n != 0 {
			t.Errorf("a skipped write made %d commits", n)
		}
		if f := asMap(e.rootData(day)["metadata"])["writerFence"]; f != first.Fence {
			t.Errorf("writerFence %v, want %s", f, first.Fence)
		}
		// A partial snapshot is written again.
		victim := layout.DistrictIDs(in)[0]
		e.deny(victim)
		mustPartial(t)(e.writer().Write(context.Background(), day, in))
		e.f.setRule(nil)
		res, err = e.writer(WithSkipComplete(true)).Write(context.Background(), day, in)
		if err != nil || res.Outcome != OutcomeComplete {
			t.Fatalf("Write over a partial snapshot = %+v, %v", res, err)
		}
	})
}

// Repair with another export of the same date and districts: refused with
// nothing written, or, WithRewriteChanged, the new export whole — never a
// mix of the two marked success.
func TestRepairWithAnotherExport(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		a, b := gen(120, 31), gen(120, 32) // same date and district ids, other data
		victim := a.Payload.Districts[60].DistrictID
		e.deny(victim)
		mustPartial(t)(e.writer().Write(context.Background(), day, a))
		e.f.setRule(nil)
		root := e.rootData(day)
		before := len(e.f.commits())
		_, err := e.writer().Repair(context.Background(), day, b)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), "root payload") || !strings.Contains(err.Error(), "write the snapshot instead") {
			t.Fatalf("repair with B: %v, want ErrMismatch naming the differences", err)
		}
		if n := len(e.f.commits()) - before; n != 0 { // the lock lives on the clean client
			t.Errorf("%d commits for a refused repair", n)
		}
		if !reflect.DeepEqual(root, e.rootData(day)) {
			t.Error("the root changed")
		}
		res, err := e.writer(WithRewriteChanged(true)).Repair(context.Background(), day, b)
		if err != nil || res.Outcome != OutcomeComplete {
			t.Fatalf("repair --rewrite-changed: %+v, %v", res, err)
		}
		if got := e.get(day); !model.Equal(got, b) {
			t.Errorf("not B after --rewrite-changed: %s", model.Diff(got, b))
		}
		if rep, err := NewReader(e.clean, "").Verify(context.Background(), day, b); err != nil || !rep.Intact || !rep.Complete {
			t.Errorf("verify after repair: %+v, %v", rep, err)
		}
	})
}

// Repair re-writes districts whose documents went missing or were altered
// after a complete write, and only those.
func TestRepairRewritesMissingAndAltered(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(60, 33)
		mustWrite(t, e.writer(), day, in)
		root := e.clean.Collection(DefaultCollection).Doc(day)
		gone, edited := in.Payload.Districts[3].DistrictID, in.Payload.Districts[40].DistrictID
		ctx := context.Background()
		if _, err := root.Collection("districts").Doc(layout.DistrictDocID(gone)).Delete(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := root.Collection("districts").Doc(layout.DistrictDocID(edited)).Update(ctx,
			[]firestore.Update{{Path: "data.membership.total", Value: int64(-1)}}); err != nil {
			t.Fatal(err)
		}
		res, err := e.writer().Repair(ctx, day, in)
		if err != nil || res.Outcome != OutcomeComplete || res.DistrictsWritten != 2 {
			t.Fatalf("Repair = %+v, %v; want the 2 damaged districts re-written", res, err)
		}
		if got := e.get(day); !model.Equal(got, in) {
			t.Errorf("read back differs: %s", model.Diff(got, in))
		}
		if rep, err := NewReader(e.clean, "").Verify(ctx, day, in); err != nil || !rep.Intact {
			t.Errorf("verify after repair: %+v, %v", rep, err)
		}
	})
}

// A complete root as earlier versions wrote it (snapshotId the input's id,
// no writeState nor inputSnapshotId, payloadHash over the snapshot_id) still
// reads, lists and verifies as it did; Repair brings it to the current form
// without writing a district.
func TestLegacyRootMigratesOnRepair(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	in := gen(60, 9)
	mustWrite(t, e.writer(), day, in)
	oldHash, err := layout.PayloadHashWithID(in, in.SnapshotID)
	if err != nil {
		t.Fatal(err)
	}
	e.setRoot(day,
		firestore.Update{Path: "metadata.snapshotId", Value: in.SnapshotID},
		firestore.Update{Path: "manifest.snapshotId", Value: in.SnapshotID},
		firestore.Update{Path: "metadata.writeState", Value: firestore.Delete},
		firestore.Update{Path: "metadata.inputSnapshotId", Value: firestore.Delete},
		firestore.Update{Path: "metadata.payloadHash", Value: oldHash})
	r := NewReader(e.clean, "")
	if rep, err := r.Verify(context.Background(), day, in); err != nil || !rep.Intact || !rep.Complete {
		t.Errorf("Verify of the legacy root = %+v, %v; want intact and complete", rep, err)
	}
	if got := e.get(day); !model.Equal(got, in) {
		t.Errorf("legacy root reads back otherwise: %s", model.Diff(got, in))
	}
	before := len(e.f.commits())
	res, err := e.writer().Repair(context.Background(), day, in)
	if err != nil || res.Outcome != OutcomeComplete || res.DistrictsWritten != 0 {
		t.Fatalf("Repair = %+v, %v; want the root rewritten, no district", res, err)
	}
	for _, c := range e.f.commits()[before:] {
		if len(c.districts) > 0 {
			t.Errorf("commit %d wrote districts %v", c.seq, c.districts)
		}
	}
	md := asMap(e.rootData(day)["metadata"])
	if md["snapshotId"] != day || md["inputSnapshotId"] != in.SnapshotID || md["writeState"] != layout.StateFinished {
		t.Errorf("after repair: snapshotId %v inputSnapshotId %v writeState %v", md["snapshotId"], md["inputSnapshotId"], md["writeState"])
	}
	if w, f := checkExact(t, e, day); w != 60 || f != 0 {
		t.Errorf("manifest %d/%d", w, f)
	}
	if rep, err := e.writer().Repair(context.Background(), day, in); err != nil || rep.Outcome != OutcomeSkipped {
		t.Errorf("second Repair = %+v, %v; want skipped", rep, err)
	}
}
