package gate_test

import (
	"fmt"
	"os"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/model"
)

func row(total, active int64, rank int64) *gate.Row {
	return &gate.Row{
		Data: model.Object{
			"districtId": "7",
			"membership": model.Object{"total": total},
			"clubPerformance": []any{
				model.Object{"Club Number": "00001234", "Active Members": active, "Mem. Base": int64(20)},
			},
			"calculatedAt": "ignored: volatile",
		},
		Ranking: model.Object{"districtId": "7", "clubsRank": rank},
	}
}

// A rewrite of a stored date outside the closing period: the changed
// district holds, the removed one always does, the added one passes.
func ExampleReport_WriteText() {
	c := gate.NewCheck("2026-11-30", gate.Options{})
	c.Stored("2026-11-30")
	c.District("7", row(1000, 20, 3), row(1061, 22, 3))
	c.District("42", row(500, 10, 1), nil)
	c.District("133", nil, row(10, 1, 9))
	c.District("8", row(700, 9, 2), row(700, 9, 2))
	_ = c.Report().WriteText(os.Stdout)
	// Output:
	// snapshot 2026-11-30: 3 districts in the input; 1 added, 1 removed, 1 changed, 1 unchanged; compared with stored 2026-11-30
	// + district 133 (added)
	// - district 42 (removed)
	// ~ district 7
	//     data.clubPerformance[00001234]["Active Members"]: 20 → 22  (counter; holds: value changed)
	//     data.membership.total: 1000 → 1061  (counter; holds: value changed)
	// held: removed: the input drops 1 district that stored 2026-11-30 has
	//     districts: 42
	// held: value: 1 district changed values (2 changes); allow a deliberate re-derivation with --allow-value-changes
	//     districts: 7
	//     fields: data.clubPerformance[00001234]["Active Members"], data.membership.total
}

// The same change at month-end, judged by the closing rule: counters within
// their bounds and a recomputed rank pass, and the report keeps the deltas
// it allowed.
func ExampleReport_WriteText_closing() {
	closing := true
	c := gate.NewCheck("2026-11-30", gate.Options{Closing: gate.IsClosingPeriod("2026-11-30", &closing, "2026-12-03")})
	c.Stored("2026-11-30")
	c.District("7", row(1000, 20, 3), row(1061, 22, 5))
	r := c.Report()
	_ = r.WriteText(os.Stdout)
	for _, d := range r.Allowed() {
		fmt.Printf("allowed: district %s %s %v → %v\n", d.DistrictID, d.Field, d.Old.V, d.New.V)
	}
	// Output:
	// snapshot 2026-11-30: 1 district in the input; 0 added, 0 removed, 1 changed, 0 unchanged; compared with stored 2026-11-30; month-end closing rule applies
	// ~ district 7
	//     data.clubPerformance[00001234]["Active Members"]: 20 → 22  (counter; allowed: moved by 2, within its bound of 50)
	//     data.membership.total: 1000 → 1061  (counter; allowed: moved by 61, within its bound of 100)
	//     rankings.clubsRank: 3 → 5  (derived; ignored: derived field: follows from the others)
	// passes by the month-end closing rule (2 deltas allowed)
	// allowed: district 7 data.clubPerformance[00001234]["Active Members"] 20 → 22
	// allowed: district 7 data.membership.total 1000 → 1061
}

// A counter that moves past its bound holds the month-end snapshot.
func ExampleClosing() {
	v, reason := gate.Closing(gate.Change{Class: gate.Counter, Kind: gate.Changed, Old: int64(100), New: int64(161)})
	fmt.Println(v, reason)
	// Output: holds moved by 61, over its bound of 50
}
