//go:build walkcount

package snapshot

import (
	"testing"

	"github.com/snapwriter/snapwriter/internal/walkcount"
	"github.com/snapwriter/snapwriter/model"
)

// TestWalksPerDistrict counts what inputPath walks and estimates
// (walkcount): per district, from the difference between two sizes of
// snapshot, and per snapshot, what is left. Run it with
// go test -tags walkcount -run WalksPerDistrict ./snapshot/.
func TestWalksPerDistrict(t *testing.T) {
	const small, large = 100, 200
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
		}
	}
}
