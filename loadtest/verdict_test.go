package loadtest

import (
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestLoadtestFloor2(t *testing.T) {
	cases := []struct{ in, want float64 }{
		{1234, 1200}, {1299.99, 1200}, {98.7, 98}, {99.99, 99}, {100, 100}, {999.9, 990}, {1000, 1000},
		{10000, 10000}, {12, 12}, {9.87, 9.8}, {0.297, 0.29}, {0.29, 0.29}, {1000001, 1000000},
		{0, 0}, {-5, 0}, {math.NaN(), 0}, {math.Inf(1), 0},
	}
	for _, c := range cases {
		if got := floor2(c.in); got != c.want {
			t.Errorf("floor2(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestLoadtestVerdict(t *testing.T) {
	// round makes a round at concurrency c; complete unless partial.
	round := func(c, n int, complete bool, r Rate) Round {
		return Round{Concurrency: c, Round: n, Complete: complete, WriteRate: r}
	}
	level := func(c int, r Rate) Level { return Level{Concurrency: c, Rounds: 1, WriteRate: r} }
	cases := []struct {
		name   string
		rep    Report
		want   Verdict // Text aside
		says   []string
		denies []string
	}{
		{
			name: "the budget limited every level",
			rep: Report{
				Levels: []Level{
					level(3, Rate{MeasuredPerSec: 98, LimitPerSec: 100, MinLimitPerSec: 100, WaitShare: 0.6}),
					level(16, Rate{MeasuredPerSec: 99, LimitPerSec: 100, MinLimitPerSec: 100, WaitShare: 0.8}),
				},
				Rounds: []Round{
					round(3, 1, true, Rate{MeasuredPerSec: 97, LimitPerSec: 100, WaitShare: 0.6}),
					round(16, 1, true, Rate{MeasuredPerSec: 99.5, LimitPerSec: 100, WaitShare: 0.8}),
				},
			},
			want: Verdict{BudgetLimited: []int{3, 16}, RerunMaxWriteRate: 200, SustainedPerSec: 99.5, SustainedConcurrency: 16,
				SustainedRound: 1, SustainedAtLimit: true, MaxWriteRate: 99},
			says: []string{"The budget limited these writes", "at concurrency 3: 98.0 of 100 district writes/s", "60 %",
				"at concurrency 16: 99.0 of 100", "rerun with --write-ramp=false --max-write-rate 200.",
				"sustained 99.5 district writes/s (concurrency 16, round 1)", "at the budget's limit: it may sustain more",
				"--max-write-rate 99, which lowers the default start (500) to it", "pushed back on no round"},
		},
		{
			name: "one level limited, the other not",
			rep: Report{
				Levels: []Level{
					level(1, Rate{MeasuredPerSec: 480, LimitPerSec: 500, WaitShare: 0.3}),
					level(3, Rate{MeasuredPerSec: 300, LimitPerSec: 500, WaitShare: 0.4}),
				},
				Rounds: []Round{
					round(1, 1, true, Rate{MeasuredPerSec: 480, LimitPerSec: 500, WaitShare: 0.3}),
					round(3, 1, true, Rate{MeasuredPerSec: 300, LimitPerSec: 500, WaitShare: 0.4}),
				},
			},
			want: Verdict{BudgetLimited: []int{1}, RerunMaxWriteRate: 1000, SustainedPerSec: 480, SustainedConcurrency: 1,
				SustainedRound: 1, SustainedAtLimit: true, MaxWriteRate: 480},
			says:   []string{"(at concurrency 1: 480 of 500 district writes/s", "--max-write-rate 1000.", "--max-write-rate 480, which lowers the default start (500) to it"},
			denies: []string{"at concurrency 3: 300"},
		},
		{
			name: "near the limit without waiting: the writer's pace, not the budget's",
			rep: Report{
				Levels: []Level{level(3, Rate{MeasuredPerSec: 95, LimitPerSec: 100, WaitShare: 0.02})},
				Rounds: []Round{round(3, 1, true, Rate{MeasuredPerSec: 95, LimitPerSec: 100, WaitShare: 0.02})},
			},
			want:   Verdict{BudgetLimited: []int{}, SustainedPerSec: 95, SustainedConcurrency: 3, SustainedRound: 1, MaxWriteRate: 95},
			says:   []string{"sustained 95.0 district writes/s (concurrency 3, round 1) without pushing back; suggested --max-write-rate 95"},
			denies: []string{"budget limited", "may sustain more", "rerun"},
		},
		{
			name: "waiting, far below the limit",
			rep: Report{
				Levels: []Level{level(16, Rate{MeasuredPerSec: 50, LimitPerSec: 100, WaitShare: 0.5})},
				Rounds: []Round{round(16, 1, true, Rate{MeasuredPerSec: 50, LimitPerSec: 100, WaitShare: 0.5})},
			},
			want:   Verdict{BudgetLimited: []int{}, SustainedPerSec: 50, SustainedConcurrency: 16, SustainedRound: 1, MaxWriteRate: 50},
			denies: []string{"budget limited"},
		},
		{
			name: "a fast database: the ramp still starts at 500",
			rep: Report{
				Levels: []Level{
					level(3, Rate{MeasuredPerSec: 800, LimitPerSec: 10000}),
					level(16, Rate{MeasuredPerSec: 1200, LimitPerSec: 10000}),
				},
				Rounds: []Round{
					round(3, 1, true, Rate{MeasuredPerSec: 800, LimitPerSec: 10000}),
					round(16, 1, true, Rate{MeasuredPerSec: 1234.5, LimitPerSec: 10000}),
					round(3, 2, true, Rate{MeasuredPerSec: 810, LimitPerSec: 10000}),
					round(16, 2, true, Rate{MeasuredPerSec: 1190, LimitPerSec: 10000}),
				},
			},
			want: Verdict{BudgetLimited: []int{}, SustainedPerSec: 1234.5, SustainedConcurrency: 16, SustainedRound: 1, MaxWriteRate: 1200},
			says: []string{"sustained 1234 district writes/s (concurrency 16, round 1)", "suggested --max-write-rate 1200.",
				"The ramp still starts each day's new key range at --initial-write-rate (500", "only on a database you have measured",
				"pushed back on no round"},
			denies: []string{"--initial-write-rate 1200", "may sustain more"},
		},
		{
			name: "push-back: the fastest round the store refused is not sustained",
			rep: Report{
				Levels: []Level{
					level(3, Rate{MeasuredPerSec: 400, LimitPerSec: 500}),
					// Near its lowered limit and waiting, but the store set
					// that limit: push-back, not the budget.
					level(16, Rate{MeasuredPerSec: 130, LimitPerSec: 125, WaitShare: 0.5, ResourceExhausted: 8, Aborted: 1}),
				},
				Rounds: []Round{
					round(3, 1, true, Rate{MeasuredPerSec: 400, LimitPerSec: 500, MinLimitPerSec: 500}),
					round(16, 1, true, Rate{MeasuredPerSec: 900, LimitPerSec: 250, MinLimitPerSec: 125, ResourceExhausted: 5, Aborted: 1}),
					round(3, 2, false, Rate{MeasuredPerSec: 600, LimitPerSec: 500, MinLimitPerSec: 500}), // partial: not sustained
					round(16, 2, false, Rate{MeasuredPerSec: 100, LimitPerSec: 125, MinLimitPerSec: 31.25, ResourceExhausted: 3}),
				},
			},
			want: Verdict{BudgetLimited: []int{}, SustainedPerSec: 400, SustainedConcurrency: 3, SustainedRound: 1, MaxWriteRate: 400,
				PushedBackRounds: 2, ResourceExhausted: 8, Aborted: 1, LowestLimitPerSec: 31.25, LowestConcurrency: 16, LowestRound: 2},
			says: []string{"sustained 400 district writes/s (concurrency 3, round 1)", "--max-write-rate 400, which lowers the default start (500) to it",
				"2 of 4 rounds met push-back: 8 RESOURCE_EXHAUSTED and 1 ABORTED answers to chunk commits",
				"the budget fell to 31.2 district writes/s at the lowest (concurrency 16, round 2)"},
			denies: []string{"budget limited", "pushed back on no round"},
		},
		{
			name: "ABORTED alone is push-back",
			rep: Report{Rounds: []Round{
				round(1, 1, true, Rate{MeasuredPerSec: 300, LimitPerSec: 500, MinLimitPerSec: 250, Aborted: 2}),
			}},
			want: Verdict{BudgetLimited: []int{}, PushedBackRounds: 1, Aborted: 2, LowestLimitPerSec: 250, LowestConcurrency: 1, LowestRound: 1},
			says: []string{"No round completed without push-back, so no rate was sustained", "lower --max-write-rate",
				"1 of 1 round met push-back: 0 RESOURCE_EXHAUSTED and 2 ABORTED"},
			denies: []string{"The database sustained"},
		},
		{
			name: "no round completed",
			rep:  Report{Rounds: []Round{round(1, 1, false, Rate{MeasuredPerSec: 300, LimitPerSec: 500})}},
			want: Verdict{BudgetLimited: []int{}},
			says: []string{"No round completed, so no rate was sustained.", "pushed back on no round"},
		},
		{
			name: "no round ran",
			rep:  Report{Interrupted: true},
			want: Verdict{BudgetLimited: []int{}},
			says: []string{"No round ran"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Assess(&c.rep)
			text := v.Text
			v.Text = ""
			if !slices.Equal(v.BudgetLimited, c.want.BudgetLimited) || v.BudgetLimited == nil {
				t.Errorf("BudgetLimited %v, want %v", v.BudgetLimited, c.want.BudgetLimited)
			}
			v.BudgetLimited, c.want.BudgetLimited = nil, nil
			if !reflect.DeepEqual(v, c.want) {
				t.Errorf("verdict %+v\nwant    %+v", v, c.want)
			}
			for _, s := range c.says {
				if !strings.Contains(text, s) {
					t.Errorf("text lacks %q:\n%s", s, text)
				}
			}
			for _, s := range c.denies {
				if strings.Contains(text, s) {
					t.Errorf("text says %q:\n%s", s, text)
				}
			}
		})
	}
}

// The verdict is a function of the report alone: the same report, the
// same verdict, whatever Verdict it holds already.
func TestLoadtestVerdictIgnoresStoredVerdict(t *testing.T) {
	rep := Report{Rounds: []Round{{Concurrency: 1, Round: 1, Complete: true, WriteRate: Rate{MeasuredPerSec: 120, LimitPerSec: 500}}}}
	first := Assess(&rep)
	rep.Verdict = Verdict{SustainedPerSec: 1e9, Text: "stale"}
	if second := Assess(&rep); second.Text != first.Text || second.SustainedPerSec != 120 {
		t.Errorf("Assess read the stored verdict: %+v", second)
	}
}
