package loadtest

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/snapshot"
)

func TestLoadtestBusiestSecond(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int, districts int) commit {
		return commit{t0.Add(time.Duration(ms) * time.Millisecond), districts}
	}
	cases := []struct {
		name    string
		commits []commit
		want    int
	}{
		{"none", nil, 0},
		{"one", []commit{at(0, 50)}, 50},
		{"half a second apart", []commit{at(0, 50), at(500, 50)}, 100},
		{"a second apart: the window is half-open", []commit{at(0, 50), at(1000, 50)}, 50},
		{"just within a second", []commit{at(0, 50), at(999, 50)}, 100},
		{"at once", []commit{at(300, 50), at(300, 50), at(300, 50)}, 150},
		// From 2300: 20+30+40 = 90; from 2000: 10+20+30 = 60.
		{"unsorted, busiest later", []commit{at(3050, 40), at(2000, 10), at(0, 50), at(2900, 30), at(2300, 20)}, 90},
		// 0.1 s apart at 50 each (500/s): ten in [t, t+1s), the eleventh
		// just out.
		{"steady 500/s", func() []commit {
			var cs []commit
			for i := range 30 {
				cs = append(cs, at(100*i, 50))
			}
			return cs
		}(), 500},
		// From 4000: 60; from 4100: 40 (5100 is a second after it).
		{"a slow start, then a burst", []commit{at(0, 10), at(2000, 10), at(4000, 20), at(4100, 20), at(4200, 20), at(5100, 20)}, 60},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.commits)
			if got := busiest(c.commits, time.Second); got != c.want {
				t.Errorf("busiest = %d, want %d", got, c.want)
			}
			if !slices.Equal(in, c.commits) {
				t.Error("busiest reordered its input")
			}
		})
	}
}

func TestLoadtestRateOfResult(t *testing.T) {
	t0 := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	ids := func(n int) []string { return make([]string, n) }
	res := &snapshot.Result{Outcome: snapshot.OutcomeComplete,
		WriteRate: snapshot.WriteRate{LimitPerSec: 100, MinLimitPerSec: 50, Share: 1, WaitedMs: 1100, ResourceExhausted: 1, Aborted: 2, Slowdowns: 1},
		BatchResults: []snapshot.BatchResult{
			// The root: before the chunks, and no part of their rate.
			{BatchIndex: 0, Success: true, DurationMs: 999, CommittedAt: ms(-500)},
			{BatchIndex: 1, Success: true, DurationMs: 1000, CommittedAt: ms(1000), DistrictIDs: ids(50)}, // started at 0
			{BatchIndex: 2, Success: true, DurationMs: 1000, CommittedAt: ms(1500), DistrictIDs: ids(50)},
			{BatchIndex: 3, Success: false, DurationMs: 2000, DistrictIDs: ids(50)}, // failed: its time only
			{BatchIndex: 4, Success: true, DurationMs: 500, CommittedAt: ms(2500), DistrictIDs: ids(30)},
		}}
	got, tally := rateOf(res)
	// The 80 districts committed after the first commit, over the 1.5 s
	// from it to the last.
	want := Rate{MeasuredPerSec: 80 / 1.5, ChunkSpanMs: 1500, BusiestSecond: 100, LimitPerSec: 100, MinLimitPerSec: 50,
		WaitedMs: 1100, WaitShare: 1100.0 / 4500, ResourceExhausted: 1, Aborted: 2, Slowdowns: 1}
	if got != want {
		t.Errorf("rateOf = %+v\nwant     %+v", got, want)
	}
	if tally != (rateTally{districts: 80, spanMs: 1500, chunkMs: 4500}) {
		t.Errorf("tally %+v", tally)
	}
	if !got.PushedBack() || got.BudgetLimited() {
		t.Errorf("%+v: want pushed back (RESOURCE_EXHAUSTED and ABORTED), not budget-limited (53 of 100/s)", got)
	}

	// One chunk, or chunks that all committed at once: their districts
	// over the time from the first one's start.
	for name, bs := range map[string][]snapshot.BatchResult{
		"one chunk": {{BatchIndex: 1, Success: true, DurationMs: 800, CommittedAt: ms(800), DistrictIDs: ids(40)}},
		"at once": {
			{BatchIndex: 1, Success: true, DurationMs: 800, CommittedAt: ms(800), DistrictIDs: ids(20)},
			{BatchIndex: 2, Success: true, DurationMs: 400, CommittedAt: ms(800), DistrictIDs: ids(20)},
		},
	} {
		one, _ := rateOf(&snapshot.Result{BatchResults: bs})
		if one.MeasuredPerSec != 50 || one.ChunkSpanMs != 800 || one.BusiestSecond != 40 {
			t.Errorf("%s: rate %+v, want 40 districts over 0.8 s", name, one)
		}
	}

	// Results without commit times (a Result read back from JSON): no
	// rate, no division by zero.
	none, _ := rateOf(&snapshot.Result{BatchResults: []snapshot.BatchResult{{BatchIndex: 1, Success: true, DistrictIDs: ids(5)}}})
	if none.MeasuredPerSec != 0 || none.BusiestSecond != 0 || none.WaitShare != 0 || math.IsNaN(none.MeasuredPerSec) {
		t.Errorf("rate without commit times: %+v", none)
	}
}

func TestLoadtestLevelRate(t *testing.T) {
	r1 := Round{Concurrency: 3, Round: 1, Complete: true,
		WriteRate: Rate{BusiestSecond: 60, LimitPerSec: 500, MinLimitPerSec: 250, WaitedMs: 400, ResourceExhausted: 1, Slowdowns: 1},
		rate:      rateTally{districts: 100, spanMs: 1000, chunkMs: 2000}}
	r2 := Round{Concurrency: 3, Round: 2, Complete: true,
		WriteRate: Rate{BusiestSecond: 90, LimitPerSec: 375, MinLimitPerSec: 375, WaitedMs: 800, Aborted: 2},
		rate:      rateTally{districts: 200, spanMs: 3000, chunkMs: 6000}}
	other := Round{Concurrency: 16, Round: 1, WriteRate: Rate{BusiestSecond: 1000, MinLimitPerSec: 1}, rate: rateTally{districts: 1, spanMs: 1}}
	ls := levels([]int{3, 16}, []Round{r1, other, r2})
	want := Rate{MeasuredPerSec: 75, ChunkSpanMs: 2000, BusiestSecond: 90, LimitPerSec: 375, MinLimitPerSec: 250,
		WaitedMs: 600, WaitShare: 0.15, ResourceExhausted: 1, Aborted: 2, Slowdowns: 1}
	if len(ls) != 2 || ls[0].WriteRate != want {
		t.Fatalf("level rate %+v\nwant       %+v", ls[0].WriteRate, want)
	}
	if ls[1].WriteRate.BusiestSecond != 1000 || ls[1].WriteRate.MinLimitPerSec != 1 {
		t.Errorf("concurrency 16's rate %+v", ls[1].WriteRate)
	}
}

func TestLoadtestBudgetLimited(t *testing.T) {
	cases := []struct {
		r    Rate
		want bool
	}{
		{Rate{MeasuredPerSec: 98, LimitPerSec: 100, WaitShare: 0.5}, true},
		{Rate{MeasuredPerSec: 90, LimitPerSec: 100, WaitShare: 0.1}, true},
		{Rate{MeasuredPerSec: 105, LimitPerSec: 100, WaitShare: 0.3}, true}, // a burst's worth above
		{Rate{MeasuredPerSec: 89, LimitPerSec: 100, WaitShare: 0.9}, false}, // waited, but the store or writer was slower
		{Rate{MeasuredPerSec: 99, LimitPerSec: 100, WaitShare: 0.05}, false},
		{Rate{MeasuredPerSec: 99, WaitShare: 0.5}, false}, // no budget reported
	}
	for _, c := range cases {
		if got := c.r.BudgetLimited(); got != c.want {
			t.Errorf("%+v: BudgetLimited = %t, want %t", c.r, got, c.want)
		}
	}
}
