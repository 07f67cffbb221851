package readercontract

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// pagedDistricts is more districts than a root with their manifest
// entries inline can hold: snapwriter keeps the entries in manifest pages.
const pagedDistricts = 6000

// smallInput writes an input of n districts of a few dozen bytes each
// (model.Generate's are 2–20 KB) for date into the test's temp dir.
func smallInput(t *testing.T, date string, n int) (string, *model.Snapshot) {
	t.Helper()
	s := model.Generate(date, 1, 1)
	s.Rankings = nil
	s.Payload.Metadata.DistrictCount = int64(n)
	s.Payload.Districts = make([]model.DistrictStatistics, n)
	for i, id := range model.GeneratedDistrictIDs(n) {
		s.Payload.Districts[i] = model.NewDistrict(model.Object{"districtId": id, "asOfDate": date, "membership": model.Object{"total": int64(i)}})
	}
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), date+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, s
}

// A snapshot whose manifest entries live in manifest pages, as the
// application's readers see it. They read no pages, so snapwriter leaves
// manifest.districts out of such a root rather than give them an empty
// one: the list shows the snapshot with its true district count
// (len(metadata.successfulDistricts)) and status; getSnapshot, which reads
// the districts through manifest.districts, fails on it instead of
// returning a successful snapshot without districts. snapwriter's own
// readers return and verify it whole.
func TestPagedManifestToTheApplication(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date = "2026-11-22"
	path, in := smallInput(t, date, pagedDistricts)
	mustRun(t, exitComplete, emu.Host, c.project, "write", "--input", path, "--date", date, "--batch-size", "500")
	ctx := context.Background()

	doc, err := c.client.Collection(collection).Doc(date).Get(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mf, _ := doc.Data()["manifest"].(map[string]any)
	if _, ok := mf["districts"]; ok || mf["entriesIn"] != "pages" || mf["pages"] != int64(6) || mf["totalDistricts"] != int64(pagedDistricts) {
		t.Errorf("manifest without its entries: districts present %v, entriesIn %v, pages %v, totalDistricts %v",
			ok, mf["entriesIn"], mf["pages"], mf["totalDistricts"])
	}

	list, err := appList(ctx, c.client)
	if err != nil || len(list) != 1 {
		t.Fatalf("application list: %v, %v", list, err)
	}
	if e := list[0]; e.SnapshotID != date || e.Status != "success" || e.DistrictCount != pagedDistricts || !e.WriteComplete {
		t.Errorf("application list shows %+v, want %s success with %d districts, complete", e, date, pagedDistricts)
	}
	if id, err := appLatestSuccessful(ctx, c.client); err != nil || id != date {
		t.Errorf("application newest successful: %q, %v; want %s", id, err, date)
	}
	s, err := appGetSnapshot(ctx, c.client, date)
	if err == nil || !strings.Contains(err.Error(), "manifest.districts is <nil>, not an array") {
		n := -1
		if s != nil {
			n = len(s.Districts)
		}
		t.Errorf("application getSnapshot: %d districts, %v; want it to fail on the absent manifest.districts", n, err)
	}

	getEquals(t, c.project, date, in)
	mustRun(t, exitComplete, emu.Host, c.project, "verify", "--date", date, "--input", path)
}
