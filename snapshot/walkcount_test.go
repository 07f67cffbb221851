//go:build walkcount

package snapshot

import (
	"testing"

	"github.com/snapwriter/snapwriter/internal/walkcount"
	"github.com/snapwriter/snapwriter/model"
)

// TestWalksPerDistrict counts what inputPath walks and estimates
// (walkcount): per district, from the difference between two sizes of
// snapshot, and per snapshot, what is left. Per district: one walk of its
// data, when it is validated (a district held in memory) or read (one
// left in its file: Open's, not counted here), and one of its envelope,
// which hashes and sizes it; nothing sized again. Per snapshot: one
// estimate of the root. Run it with
// go test -tags walkcount -run WalksPerDistrict ./snapshot/.
func TestWalksPerDistrict(t *testing.T) {
	const small, large = 100, 200
	want := map[string]map[walkcount.Kind]int64{
		"memory": {walkcount.Walk: 2},
		"file":   {walkcount.Walk: 1},
	}
	for _, from := range []string{"memory", "file"} {
		counts := map[int]map[walkcount.Kind]int64{}
		for _, n := range []int{small, large} {
			s := model.Generate(day, n, 1)
			if from == "file" {
				s = lazyCopy(t, s) // its walks when it is read are Open's
			}
			walkcount.Reset()
			if _, err := inputPath(inputWriter(), s); err != nil {
				t.Fatal(err)
			}
			counts[n] = map[walkcount.Kind]int64{}
			for _, k := range walkcount.Kinds() {
				counts[n][k] = walkcount.Count(k)
			}
		}
		for _, k := range walkcount.Kinds() {
			perDistrict := float64(counts[large][k]-counts[small][k]) / (large - small)
			perSnapshot := float64(counts[small][k]) - perDistrict*small
			t.Logf("%s: %s: %.2f per district, %.0f per snapshot", from, k, perDistrict, perSnapshot)
			if perDistrict != float64(want[from][k]) {
				t.Errorf("%s: %s %.2f times per district, want %d", from, k, perDistrict, want[from][k])
			}
			if k == walkcount.RootEstimate && perSnapshot != 1 {
				t.Errorf("%s: the root estimated %.0f times, want once", from, perSnapshot)
			}
		}
	}
}
