package loadtest

import (
	"slices"
	"testing"

	"github.com/snapwriter/snapwriter/snapshot"
)

func TestLoadtestPercentileNearestRank(t *testing.T) {
	seq := func(n int) []int64 {
		s := make([]int64, n)
		for i := range s {
			s[i] = int64(i + 1)
		}
		return s
	}
	cases := []struct {
		name   string
		values []int64
		p      float64
		want   int64
	}{
		// Wikipedia's worked examples of the nearest-rank method.
		{"five p5", []int64{15, 20, 35, 40, 50}, 5, 15},
		{"five p30", []int64{15, 20, 35, 40, 50}, 30, 20},
		{"five p40", []int64{15, 20, 35, 40, 50}, 40, 20},
		{"five p50", []int64{15, 20, 35, 40, 50}, 50, 35},
		{"five p100", []int64{15, 20, 35, 40, 50}, 100, 50},
		{"ten p25", []int64{3, 6, 7, 8, 8, 10, 13, 15, 16, 20}, 25, 7},
		{"ten p50", []int64{3, 6, 7, 8, 8, 10, 13, 15, 16, 20}, 50, 8},
		{"ten p75", []int64{3, 6, 7, 8, 8, 10, 13, 15, 16, 20}, 75, 15},
		{"unsorted", []int64{50, 15, 40, 20, 35}, 50, 35},
		// 0.95·20 is 19.000000000000004 in floating point: still rank 19.
		{"twenty p95", seq(20), 95, 19},
		{"hundred p99", seq(100), 99, 99},
		{"hundred p50", seq(100), 50, 50},
		{"101 p99", seq(101), 99, 100},
		{"one", []int64{7}, 99, 7},
		{"empty", nil, 50, 0},
		{"tiny p", seq(10), 0.001, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.values)
			if got := Percentile(c.values, c.p); got != c.want {
				t.Errorf("Percentile(%v, %v) = %d, want %d", c.values, c.p, got, c.want)
			}
			if !slices.Equal(in, c.values) {
				t.Errorf("Percentile reordered its input: %v", c.values)
			}
		})
	}
}

func TestLoadtestRoundAndLevels(t *testing.T) {
	res := &snapshot.Result{Outcome: snapshot.OutcomeComplete, DistrictsWritten: 200, TotalDurationMs: 2000, RootCommits: 7, LockWaitMs: 12,
		BatchResults: []snapshot.BatchResult{
			{BatchIndex: 0, Success: true, DurationMs: 999, RetryAttempts: 1, AbortedRetries: 1}, // the root: not a chunk latency
			{BatchIndex: 1, Success: true, DurationMs: 30, RetryAttempts: 2, AbortedRetries: 1},
			{BatchIndex: 2, Success: true, DurationMs: 10},
			{BatchIndex: 3, Success: false, DurationMs: 5000, RetryAttempts: 3}, // failed: no latency
			{BatchIndex: 4, Success: true, DurationMs: 20},
		}, FailedBatches: 1}
	r := newRound(3, 1, "2000-01-01", res, nil)
	want := Latency{Chunks: 3, P50: 20, P95: 30, P99: 30, Max: 30}
	if r.ChunkLatencyMs != want || r.DistrictsPerSecond != 100 || r.AbortedRetries != 2 || r.OtherRetries != 4 ||
		r.FailedChunks != 1 || r.RootCommits != 7 || r.LockWaitMs != 12 || !r.Complete {
		t.Fatalf("round %+v", r)
	}
	partial := newRound(3, 2, "2000-01-01", &snapshot.Result{DistrictsWritten: 100, TotalDurationMs: 3000, RootCommits: 5,
		BatchResults: []snapshot.BatchResult{{BatchIndex: 1, Success: true, DurationMs: 40}}}, snapshot.ErrPartial)
	other := newRound(16, 1, "2000-01-01", res, nil)
	ls := levels([]int{3, 16, 8}, []Round{r, other, partial})
	if len(ls) != 2 {
		t.Fatalf("levels %+v, want 3 and 16 only (8 never ran)", ls)
	}
	l := ls[0]
	if l.Concurrency != 3 || l.Rounds != 2 || l.PartialRounds != 1 || l.DistrictsPerSecond != 60 || l.WriteSeconds != 2.5 ||
		l.RootCommits != 6 || l.LockWaitMs != 6 || l.ChunkLatencyMs != (Latency{Chunks: 4, P50: 20, P95: 40, P99: 40, Max: 40}) ||
		l.AbortedRetries != 2 || l.OtherRetries != 4 || l.FailedChunks != 1 {
		t.Fatalf("level %+v", l)
	}
	if partial.Complete || partial.Error == "" {
		t.Fatalf("a round with ErrPartial must be partial and say why: %+v", partial)
	}
}

func TestLoadtestPlanInterleaves(t *testing.T) {
	got := plan([]int{3, 16}, 2)
	want := []step{{3, 1}, {16, 1}, {3, 2}, {16, 2}}
	if !slices.Equal(got, want) {
		t.Fatalf("plan = %v, want %v", got, want)
	}
}
