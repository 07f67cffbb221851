package readercontract

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapwriter/snapwriter/internal/jsclient"
	"github.com/snapwriter/snapwriter/model"
)

// Issue #25, point 3, through the binary: a partial snapshot the
// application wrote from an input with whole doubles (39.0, -0.0), which
// its client stored as integers, is repaired with that very input — exit
// 0, the districts the application stored kept as they are, only the
// failed ones written — and `verify --input` then finds it intact. Before,
// repair exited 2: "the input differs from what is stored in district 1, …".
func TestApplicationWholeNumbersRepair(t *testing.T) {
	t.Parallel()
	c := newProject(t)
	const date = "2026-11-20"
	_, in := genInput(t, date, 40, 7)
	for _, d := range in.Payload.Districts {
		memData(d)["membership"].(map[string]any)["changePercent"] = 39.0
		memData(d)["clubPerformance"].([]any)[0].(map[string]any)["% Club Growth"] = math.Copysign(0, -1)
	}
	b, err := model.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), date+".json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range in.Payload.Districts {
		ids = append(ids, d.DistrictID)
	}
	written := ids[:30]
	root, docs := appFixture(date, in, written, "success", false)
	for _, doc := range docs {
		doc["data"] = jsclient.Numbers(doc["data"])
	}
	putFixture(t, c.client, date, root, docs)

	o := mustRun(t, exitComplete, emu.Host, c.project, "repair", "--date", date, "--input", path, "--json")
	var res struct {
		Complete         bool `json:"complete"`
		DistrictsWritten int  `json:"districtsWritten"`
		DistrictsKept    int  `json:"districtsKept"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
		t.Fatalf("repair --json: %v\n%s", err, o.stdout)
	}
	if !res.Complete || res.DistrictsKept != len(written) || res.DistrictsWritten != len(ids)-len(written) {
		t.Errorf("repair: %+v; want complete, %d kept, %d written", res, len(written), len(ids)-len(written))
	}
	checkView(t, c.client, date, want{status: "success", writeComplete: true, newestSuccessful: true,
		districts: len(ids), writeState: "finished", inputSnapshotID: in.SnapshotID})
	// Kept as the application stored them, not written again.
	doc, err := c.client.Collection(collection).Doc(date).Collection("districts").Doc("district_" + written[0]).Get(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.Data()["data"].(map[string]any)["membership"].(map[string]any)["changePercent"]; got != int64(39) {
		t.Errorf("kept district %s: changePercent %T(%v), want the application's integer 39", written[0], got, got)
	}
	mustRun(t, exitComplete, emu.Host, c.project, "verify", "--date", date, "--input", path)
}
