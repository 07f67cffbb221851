package layout

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapwriter/snapwriter/model"
)

// day is the date of the tests' snapshots.
const day = "2026-11-20"

// lazyCopy is s written to a file and read back lazily (model.Open), as
// the command line reads its input.
func lazyCopy(t *testing.T, s *model.Snapshot) *model.Snapshot {
	t.Helper()
	b, err := model.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "in.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := model.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// memData is the data of district d, held in memory, for a test to read
// or change.
func memData(d model.DistrictStatistics) model.Object {
	data, err := d.Data()
	if err != nil || d.Lazy() {
		panic(fmt.Sprintf("district %s: not in memory (%v)", d.DistrictID, err))
	}
	return data
}
