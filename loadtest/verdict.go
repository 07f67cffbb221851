package loadtest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/pacing"
)

// Verdict is what a run's write rates say: whether the write budget,
// rather than the database, set the pace; the fastest rate the database
// took without pushing back, and the --max-write-rate it suggests; and
// the push-back the rounds met. Assess makes it from a Report.
type Verdict struct {
	// BudgetLimited lists the concurrencies, in the Report's order, whose
	// rounds together the budget limited (Rate.BudgetLimited) while the
	// store did not push back: there the figures measure the budget, not
	// the database.
	BudgetLimited []int `json:"budgetLimited"`
	// RerunMaxWriteRate is the --max-write-rate to rerun with, with
	// --write-ramp=false, to measure the database itself: twice the
	// highest limit of those levels, rounded down to two significant
	// figures. 0 when no level was budget-limited.
	RerunMaxWriteRate float64 `json:"rerunMaxWriteRate,omitempty"`
	// SustainedPerSec is the highest measured rate of a complete round
	// the store did not push back on (SustainedConcurrency,
	// SustainedRound); 0 when there is none. SustainedAtLimit: the budget
	// limited that round, so the database may sustain more.
	SustainedPerSec      float64 `json:"sustainedPerSec"`
	SustainedConcurrency int     `json:"sustainedConcurrency,omitempty"`
	SustainedRound       int     `json:"sustainedRound,omitempty"`
	SustainedAtLimit     bool    `json:"sustainedAtLimit,omitempty"`
	// MaxWriteRate is SustainedPerSec rounded down to two significant
	// figures: the --max-write-rate suggested. 0 when there is none.
	MaxWriteRate float64 `json:"maxWriteRate,omitempty"`
	// PushedBackRounds counts the rounds the store pushed back on
	// (Rate.PushedBack); ResourceExhausted and Aborted sum their answers
	// to chunk commits, and LowestLimitPerSec is the lowest the budget
	// fell to in them (LowestConcurrency, LowestRound).
	PushedBackRounds  int     `json:"pushedBackRounds"`
	ResourceExhausted int     `json:"resourceExhausted"`
	Aborted           int     `json:"aborted"`
	LowestLimitPerSec float64 `json:"lowestLimitPerSec,omitempty"`
	LowestConcurrency int     `json:"lowestConcurrency,omitempty"`
	LowestRound       int     `json:"lowestRound,omitempty"`
	// Text says the above in a paragraph.
	Text string `json:"text"`
}

// Assess reads the Verdict from r's levels and rounds (their WriteRate),
// and nothing else: r.Verdict is not read.
func Assess(r *Report) Verdict {
	v := Verdict{BudgetLimited: []int{}}
	var limited []Level
	for _, l := range r.Levels {
		if l.WriteRate.BudgetLimited() && !l.WriteRate.PushedBack() {
			limited = append(limited, l)
			v.BudgetLimited = append(v.BudgetLimited, l.Concurrency)
			v.RerunMaxWriteRate = max(v.RerunMaxWriteRate, floor2(2*l.WriteRate.LimitPerSec))
		}
	}
	completed := 0
	for _, o := range r.Rounds {
		w := o.WriteRate
		if w.PushedBack() {
			v.PushedBackRounds++
			v.ResourceExhausted += w.ResourceExhausted
			v.Aborted += w.Aborted
			if v.LowestLimitPerSec == 0 || w.MinLimitPerSec < v.LowestLimitPerSec {
				v.LowestLimitPerSec, v.LowestConcurrency, v.LowestRound = w.MinLimitPerSec, o.Concurrency, o.Round
			}
			continue
		}
		if !o.Complete {
			continue
		}
		completed++
		if w.MeasuredPerSec > v.SustainedPerSec {
			v.SustainedPerSec, v.SustainedConcurrency, v.SustainedRound = w.MeasuredPerSec, o.Concurrency, o.Round
			v.SustainedAtLimit = w.BudgetLimited()
		}
	}
	v.MaxWriteRate = floor2(v.SustainedPerSec)
	v.Text = v.text(limited, len(r.Rounds), completed)
	return v
}

// text is v's paragraph; limited are the levels of v.BudgetLimited,
// rounds the rounds run, completed those complete without push-back.
func (v Verdict) text(limited []Level, rounds, completed int) string {
	if rounds == 0 {
		return "No round ran: nothing to assess."
	}
	var b strings.Builder
	if len(limited) > 0 {
		parts := make([]string, len(limited))
		for i, l := range limited {
			w := l.WriteRate
			parts[i] = fmt.Sprintf("at concurrency %d: %s of %s district writes/s, chunks waiting for budget %.0f %% of their time",
				l.Concurrency, perSec(w.MeasuredPerSec), perSec(w.LimitPerSec), 100*w.WaitShare)
		}
		fmt.Fprintf(&b, "The budget limited these writes: the measured rate came within 10 %% of its limit (%s). "+
			"These figures measure the budget, not the database; to measure the database itself, "+
			"rerun with --write-ramp=false --max-write-rate %s. ", strings.Join(parts, "; "), number(v.RerunMaxWriteRate))
	}
	switch {
	case v.SustainedPerSec > 0:
		fmt.Fprintf(&b, "The database sustained %s district writes/s (concurrency %d, round %d) without pushing back",
			perSec(v.SustainedPerSec), v.SustainedConcurrency, v.SustainedRound)
		if v.SustainedAtLimit {
			b.WriteString(", at the budget's limit: it may sustain more")
		}
		fmt.Fprintf(&b, "; suggested --max-write-rate %s", number(v.MaxWriteRate))
		if v.MaxWriteRate < pacing.DefaultInitial {
			fmt.Fprintf(&b, ", which lowers the default start (%d) to it: each day's write runs at %s from its start. ",
				pacing.DefaultInitial, number(v.MaxWriteRate))
		} else {
			fmt.Fprintf(&b, ". The ramp still starts each day's new key range at --initial-write-rate (%d, Firestore's guidance "+
				"for a new collection) and grows 50 %% every 5 minutes up to --max-write-rate; start higher only on a database you have measured. ",
				pacing.DefaultInitial)
		}
	case completed > 0:
		b.WriteString("No district write rate was measured. ")
	case v.PushedBackRounds > 0:
		b.WriteString("No round completed without push-back, so no rate was sustained: " +
			"rerun with a lower --concurrency, or --write-ramp=false and a lower --max-write-rate. ")
	default:
		b.WriteString("No round completed, so no rate was sustained. ")
	}
	if v.PushedBackRounds > 0 {
		fmt.Fprintf(&b, "%d of %s met push-back: %d RESOURCE_EXHAUSTED and %d ABORTED answers to chunk commits; "+
			"the budget fell to %s district writes/s at the lowest (concurrency %d, round %d).",
			v.PushedBackRounds, plural.N(rounds, "round"), v.ResourceExhausted, v.Aborted, perSec(v.LowestLimitPerSec), v.LowestConcurrency, v.LowestRound)
	} else {
		b.WriteString("The store pushed back on no round (no RESOURCE_EXHAUSTED or ABORTED answer to a chunk commit).")
	}
	return b.String()
}

// floor2 is x rounded down to two significant figures (0 for x ≤ 0):
// 1234 → 1200, 98.7 → 98, 0.297 → 0.29.
func floor2(x float64) float64 {
	if !(x > 0) || math.IsInf(x, 0) {
		return 0
	}
	e := int(math.Floor(math.Log10(x))) - 1 // the second figure's exponent
	// The epsilon keeps a value like 0.29, 28.999999999999996 hundredths
	// in floating point, at 0.29.
	if e >= 0 {
		p := math.Pow10(e)
		return math.Floor(x/p+1e-9) * p
	}
	p := math.Pow10(-e)
	return math.Floor(x*p+1e-9) / p
}

// perSec formats a rate: whole numbers from 100 up, one decimal from 10,
// two below.
func perSec(f float64) string {
	switch {
	case f >= 100:
		return strconv.FormatFloat(f, 'f', 0, 64)
	case f >= 10:
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'f', 2, 64)
}

// number formats a flag's value as it would be typed: 1200, 98, 9.8.
func number(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
