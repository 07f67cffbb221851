package snapshot

import (
	"encoding/json"
	"reflect"
	"testing"
)

// A Result's JSON has its Outcome and, as before it, complete, skipped,
// manifestRecorded and lockLost; it reads back as it was, and the JSON of
// earlier versions reads as the outcome its booleans say.
func TestResultJSON(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		res    Result
		legacy map[string]any // the booleans' values; absent: not in the JSON
	}{
		{"complete", Result{Outcome: OutcomeComplete}, map[string]any{"complete": true, "manifestRecorded": true}},
		{"complete, lock lost after", Result{Outcome: OutcomeComplete, LockRenewals: LockRenewals{Lost: true}},
			map[string]any{"complete": true, "manifestRecorded": true, "lockLost": true}},
		{"skipped", Result{Outcome: OutcomeSkipped}, map[string]any{"complete": true, "skipped": true, "manifestRecorded": true}},
		{"partial", Result{Outcome: OutcomePartial}, map[string]any{"complete": false, "manifestRecorded": true}},
		{"partial, lock lost", Result{Outcome: OutcomePartial, LockRenewals: LockRenewals{Lost: true}},
			map[string]any{"complete": false, "manifestRecorded": true, "lockLost": true}},
		{"not recorded, every batch committed", Result{Outcome: OutcomeNotRecorded}, map[string]any{"complete": true, "manifestRecorded": false}},
		{"not recorded, a batch failed", Result{Outcome: OutcomeNotRecorded, FailedBatches: 1}, map[string]any{"complete": false, "manifestRecorded": false}},
		{"fenced out", Result{Outcome: OutcomeFencedOut, FailedBatches: 1}, map[string]any{"complete": false, "manifestRecorded": false}},
		{"not written", Result{Outcome: OutcomeNotWritten, FailedBatches: 1}, map[string]any{"complete": false, "manifestRecorded": false}},
		{"not written, no batch", Result{Outcome: OutcomeNotWritten}, map[string]any{"complete": false, "manifestRecorded": false}},
	}
	for _, tc := range cases {
		tc.res.SnapshotID, tc.res.FailedDistricts = day, []string{}
		if tc.name != "not written, no batch" && tc.res.Outcome != OutcomeSkipped {
			tc.res.TotalBatches = 3
			tc.res.SuccessfulBatches = 3 - tc.res.FailedBatches
		}
		b, err := json.Marshal(tc.res)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if m["outcome"] != tc.res.Outcome.String() || m["snapshotId"] != day {
			t.Errorf("%s: outcome %v in %s", tc.name, m["outcome"], b)
		}
		for _, k := range []string{"complete", "skipped", "manifestRecorded", "lockLost"} {
			if got, want := m[k], tc.legacy[k]; got != want {
				t.Errorf("%s: %q is %v, want %v, in %s", tc.name, k, got, want, b)
			}
		}
		if _, ok := m["lockRenewals"].(map[string]any)["lost"]; ok {
			t.Errorf("%s: lockRenewals has a key of its own for lockLost: %s", tc.name, b)
		}
		var back Result
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, tc.res) {
			t.Errorf("%s: read back as %+v, %v; want %+v", tc.name, back, err, tc.res)
		}
		// Without "outcome", as earlier versions wrote it.
		delete(m, "outcome")
		old, _ := json.Marshal(m)
		var fromOld Result
		if err := json.Unmarshal(old, &fromOld); err != nil {
			t.Fatal(err)
		}
		want := tc.res.Outcome
		if want == OutcomeFencedOut || want == OutcomeNotWritten {
			want = OutcomeNotRecorded // the booleans do not tell them apart
		}
		if fromOld.Outcome != want || fromOld.LockRenewals.Lost != tc.res.LockRenewals.Lost {
			t.Errorf("%s: earlier JSON read as %v (lost %v)", tc.name, fromOld.Outcome, fromOld.LockRenewals.Lost)
		}
	}
	var o Outcome
	if err := o.UnmarshalText([]byte("bogus")); err == nil {
		t.Error("an unknown outcome was read")
	}
	if _, err := Outcome(42).MarshalText(); err == nil || Outcome(42).String() != "Outcome(42)" {
		t.Error("an unknown outcome was written")
	}
}
