package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

func TestVerifyCommand(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 60)
	if code, _, errs := c.run(in, "write", "--input", "-"); code != exitOK {
		t.Fatalf("write: %d\n%s", code, errs)
	}
	code, out, errs := c.run(in, "verify", "--date", day, "--input", "-")
	if code != exitOK || !strings.Contains(out, "intact") || !strings.Contains(out, "content hashes checked") {
		t.Fatalf("verify of an intact snapshot: exit %d\n%s\n%s", code, out, errs)
	}
	snap, _ := model.Decode(strings.NewReader(in))
	victim := snap.Payload.Districts[5].DistrictID
	if _, err := c.client().Collection("snapshots").Doc(day).Collection("districts").Doc("district_" + victim).Delete(context.Background()); err != nil {
		t.Fatal(err)
	}
	code, out, errs = c.run("", "verify", "--date", day)
	if code != exitNotIntact || !strings.Contains(out, "NOT INTACT") || !strings.Contains(out, "missing") || !strings.Contains(out, "district "+victim) {
		t.Fatalf("verify after a deletion: exit %d, want 6\n%s\n%s", code, out, errs)
	}
	other := genJSONSeed(t, day, 60, 2)
	code, out, _ = c.run(other, "verify", "--date", day, "--input", "-", "--json")
	var rep snapshot.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != exitNotIntact || rep.Intact {
		t.Fatalf("verify against another export: exit %d, %v\n%s", code, err, out)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || p.Kind == snapshot.ProblemInput
	}
	if !found {
		t.Errorf("no %s problem: %+v", snapshot.ProblemInput, rep.Problems)
	}
	if code, _, errs := c.run("", "verify", "--date", "2026-01-01"); code != exitError || !strings.Contains(errs, "not found") {
		t.Errorf("verify of a missing snapshot: exit %d\n%s", code, errs)
	}
	if code, _, _ := c.run("", "verify", "--date", "2026-13-01"); code != exitUsage {
		t.Errorf("bad date: exit %d", code)
	}
}

// get and verify of a partial snapshot: the districts written on stdout,
// a warning on stderr, exit 3.
func TestGetAndVerifyIncompleteExit3(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePartial(genJSON(t, day, 60))
	code, out, errs := c.run("", "get", "--date", day)
	got, err := model.Decode(strings.NewReader(out))
	if code != exitPartial || err != nil || len(got.Payload.Districts) != 10 || !strings.Contains(errs, "is partial") {
		t.Fatalf("get of a partial snapshot: exit %d, %v\n%s", code, err, errs)
	}
	if code, out, _ := c.run("", "verify", "--date", day); code != exitPartial || !strings.Contains(out, "intact") {
		t.Errorf("verify of an intact partial snapshot: exit %d\n%s", code, out)
	}
}

// repair with another export of the same date: exit 2 and nothing written;
// with --rewrite-changed the stored snapshot becomes the new export.
func TestRepairWithAnotherExportCLI(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.writePartial(genJSON(t, day, 60))
	b := genJSONSeed(t, day, 60, 2)
	before := snapshotDocs(t, c.project)
	code, out, errs := c.run(b, "repair", "--date", day, "--input", "-")
	if code != exitUsage || !strings.Contains(errs, "differs from what is stored") || !strings.Contains(errs, "--rewrite-changed") {
		t.Fatalf("repair with another export: exit %d, want 2\n%s", code, errs)
	}
	// Refused before any district: nothing written, not partial.
	if !strings.Contains(out, "NOT WRITTEN — 0 districts written") || strings.Contains(out, "PARTIAL") {
		t.Errorf("the refused repair's result:\n%s", out)
	}
	if snapshotDocs(t, c.project) != before {
		t.Error("a refused repair changed stored documents")
	}
	// Other districts: --rewrite-changed cannot help, and is not offered.
	more := genJSON(t, day, 61)
	if code, _, errs := c.run(more, "repair", "--date", day, "--input", "-"); code != exitUsage ||
		!strings.Contains(errs, "the sets differ; write the snapshot instead") || strings.Contains(errs, "--rewrite-changed") {
		t.Errorf("repair with other districts: exit %d, want 2 without the --rewrite-changed hint\n%s", code, errs)
	}
	if code, _, errs := c.run(b, "repair", "--date", day, "--input", "-", "--rewrite-changed"); code != exitOK {
		t.Fatalf("repair --rewrite-changed: exit %d\n%s", code, errs)
	}
	checkRoundTrip(t, c, b)
}

// genJSONSeed is genJSON with another seed: another export of the same
// date and district ids.
func genJSONSeed(t *testing.T, date string, n int, seed int64) string {
	t.Helper()
	b, err := json.Marshal(model.Generate(date, n, seed))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
