//go:build chaos

package chaos

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/model"
)

// The operator checks find what they look for: on a correct snapshot they
// report nothing, and each kind of damage is reported. (A check that cannot
// fail would let every scenario pass.)
func TestChecksDetectDamage(t *testing.T) {
	t.Parallel()
	project := emulator.ProjectID(t)
	s := &scenario{t: t, project: project, client: emu.TestClientFor(t, project), lost: -1}
	in := generated(t, day, 60, 1)
	w := startProc(procSpec{name: "write", host: emu.Host, project: project, args: []string{"write", "--input", in.path}})
	if w.wait() != 0 {
		t.Fatalf("write: %s", w.describe())
	}
	st := s.read()
	good := st // s.read returns new maps: this one stays as read
	if bad := manifestProblems(st, manifestOpts{}); len(bad) > 0 {
		t.Fatalf("a correct snapshot: %v", bad)
	}
	if n := len(notYetRecorded(st)); n != 0 || len(overClaims(st)) != 0 {
		t.Fatalf("a correct snapshot: %d not yet recorded, over-claims %v", n, overClaims(st))
	}
	if bad := fenceProblems(st, w.fence(), "the writer"); len(bad) > 0 {
		t.Fatalf("a correct snapshot: %v", bad)
	}
	if left := s.locksLeft(); len(left) > 0 {
		t.Fatalf("a correct snapshot: locks %v", left)
	}
	other := *in.snap
	other.Payload.Districts = append([]model.DistrictStatistics(nil), in.snap.Payload.Districts...)
	if n := lostDistricts(in.snap, &other); n != 0 {
		t.Fatalf("lostDistricts of the input itself = %d", n)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root := s.client.Collection("snapshots").Doc(day)
	districts := root.Collection("districts")
	expect := func(what string, bad []string, want string) {
		t.Helper()
		if !strings.Contains(strings.Join(bad, "\n"), want) {
			t.Errorf("%s: problems %q do not mention %q", what, bad, want)
		}
	}
	// A district document missing although the manifest says success.
	if _, err := districts.Doc("district_1").Delete(ctx); err != nil {
		t.Fatal(err)
	}
	// One carrying another writer's fence.
	if _, err := districts.Doc("district_2").Update(ctx, []firestore.Update{{Path: "writerFence", Value: "000000000000099"}}); err != nil {
		t.Fatal(err)
	}
	// Entries failed (document present with the root's fence) and pending.
	snap, err := root.Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mf := snap.Data()["manifest"].(map[string]any)
	for _, x := range mf["districts"].([]any) {
		e := x.(map[string]any)
		switch e["districtId"] {
		case "3":
			e["status"] = "failed"
		case "4":
			e["status"] = "pending"
		}
	}
	if _, err := root.Update(ctx, []firestore.Update{{Path: "manifest", Value: mf}}); err != nil {
		t.Fatal(err)
	}
	st = s.read()
	bad := manifestProblems(st, manifestOpts{})
	expect("deleted document", bad, "district 1: manifest says success, no document")
	expect("foreign fence", bad, "district 2: manifest says success, document carries writerFence \"000000000000099\"")
	expect("failed with a document", bad, "district 3: manifest says failed, document carries the root's writerFence")
	expect("pending", bad, "district 4: manifest status \"pending\": not the application's vocabulary")
	expect("lists", bad, "district 3: manifest \"failed\", in successfulDistricts true")
	expect("list length", bad, "successfulDistricts lists 60 districts, the manifest 58")
	if len(bad) != 7 {
		t.Errorf("%d problems, want 7: %q", len(bad), bad)
	}
	// Allowed where the scenario says so.
	bad = manifestProblems(st, manifestOpts{repairedFrom: []string{"000000000000099"}})
	if len(bad) != 6 {
		t.Errorf("with fence 99 allowed: %q, want the other 6", bad)
	}
	expect("fence", fenceProblems(st, w.fence(), "the writer"), "do not carry the writer's writerFence")
	expect("over-claim", overClaims(st), "1")
	if len(overClaims(st)) != 1 {
		t.Errorf("over-claims %v, want district 1", overClaims(st))
	}
	// keptProblems: district 2 was written again (another fence), 1 removed.
	kept := keptProblems(good, st)
	expect("removed", kept, "district 1: removed")
	expect("written again", kept, "district 2: written again")
	if len(kept) != 2 {
		t.Errorf("keptProblems %q, want 2", kept)
	}

	// While the root says writing, a district stored under its fence and
	// not recorded yet is allowed and counted; what it records must still
	// be stored; once finished, it is exact again.
	writing := clone(good)
	writing.writeState, writing.rootStatus = "writing", "partial"
	writing.entries["5"] = "failed"
	delete(writing.successful, "5")
	writing.failedList["5"] = true
	if bad := manifestProblems(writing, manifestOpts{}); len(bad) > 0 {
		t.Errorf("writing, district 5 not yet recorded: %q", bad)
	}
	if got := notYetRecorded(writing); len(got) != 1 || got[0] != "5" {
		t.Errorf("notYetRecorded = %v, want [5]", got)
	}
	over := clone(writing)
	delete(over.docs, "6")
	expect("over-claim while writing", manifestProblems(over, manifestOpts{}), "district 6: manifest says success, no document (over-claim)")
	if got := overClaims(over); len(got) != 1 || got[0] != "6" {
		t.Errorf("overClaims = %v, want [6]", got)
	}
	earlier := clone(writing)
	earlier.docs["5"] = docInfo{fence: "000000000000098"}
	if bad := manifestProblems(earlier, manifestOpts{}); len(bad) > 0 || len(notYetRecorded(earlier)) != 0 {
		t.Errorf("writing, district 5's document an earlier writer's: %q, not yet recorded %v", bad, notYetRecorded(earlier))
	}
	finished := clone(writing)
	finished.writeState = "finished"
	expect("finished", manifestProblems(finished, manifestOpts{}), "district 5: manifest says failed, document carries the root's writerFence")
	if n := len(notYetRecorded(finished)); n != 0 {
		t.Errorf("finished: %d not yet recorded, want none", n)
	}
	expect("root fence", fenceProblems(st, "000000000000099", "writer 2"), "the root carries writerFence")

	// A lock left behind.
	if _, err := s.client.Collection("locks").Doc("snapshot:"+day).Set(ctx, map[string]any{"lockId": "x"}); err != nil {
		t.Fatal(err)
	}
	if left := s.locksLeft(); len(left) != 1 {
		t.Errorf("locks left: %v, want the one set", left)
	}
	// get against another snapshot.
	changed := generated(t, day, 60, 2)
	if n := lostDistricts(in.snap, changed.snap); n == 0 {
		t.Error("lostDistricts finds no difference between two seeds")
	}
	if model.Equal(in.snap, changed.snap) {
		t.Error("two seeds give equal snapshots")
	}
	// And the root missing altogether.
	if _, err := root.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	expect("no root", manifestProblems(s.read(), manifestOpts{}), "no root document")
}

// clone copies st, its maps too.
func clone(st stored) stored {
	c := st
	c.successful, c.failedList = maps.Clone(st.successful), maps.Clone(st.failedList)
	c.entries, c.docs = maps.Clone(st.entries), maps.Clone(st.docs)
	return c
}
