package loadtest

import (
	"slices"
	"time"

	"github.com/snapwriter/snapwriter/snapshot"
)

// Rate is how fast a round wrote its districts, against the write budget
// that paced its chunks (snapshot.WithWriteBudget, package pacing), and
// how often the store pushed back.
type Rate struct {
	// MeasuredPerSec is the districts written per second while the
	// chunks ran, from their commits: the districts committed after the
	// first chunk's commit, over ChunkSpanMs, the time from it to the last
	// chunk's commit. The pace of the commits, that is, without the first
	// chunk's wait and round trip, which would otherwise weigh on a short
	// write and hide a budget that set the pace. For a write of one chunk
	// (or whose chunks all committed at once), its districts over the
	// time from the first chunk's start.
	MeasuredPerSec float64 `json:"measuredPerSec"`
	ChunkSpanMs    int64   `json:"chunkSpanMs"`
	// BusiestSecond is the most districts committed within any one second
	// (a sliding window), each chunk's districts counted at its commit:
	// a chunk's districts reach the store together, so at rates below a
	// chunk a second this is a chunk's size.
	BusiestSecond int `json:"busiestSecond"`
	// LimitPerSec is the budget's rate limit, in document writes a
	// second, when the write ended; MinLimitPerSec the lowest it was
	// during the write (push-back lowers it).
	LimitPerSec    float64 `json:"limitPerSec"`
	MinLimitPerSec float64 `json:"minLimitPerSec"`
	// WaitedMs is the time the chunks waited for budget, summed over the
	// chunks; WaitShare is that share of the chunks' summed durations
	// (which include their waits): 0 when the budget never held a chunk
	// back, near 1 when chunks did little but wait for it.
	WaitedMs  int64   `json:"waitedMs"`
	WaitShare float64 `json:"waitShare"`
	// ResourceExhausted and Aborted count the chunk commits the store
	// answered with RESOURCE_EXHAUSTED and ABORTED (push-back); Slowdowns,
	// the times those answers lowered the budget's rate.
	ResourceExhausted int `json:"resourceExhausted"`
	Aborted           int `json:"aborted"`
	Slowdowns         int `json:"slowdowns"`
}

// PushedBack reports whether the store answered any chunk commit with
// RESOURCE_EXHAUSTED or ABORTED.
func (r Rate) PushedBack() bool { return r.ResourceExhausted+r.Aborted > 0 }

// Thresholds of BudgetLimited.
const (
	// NearLimit: a measured rate at least this share of the budget's
	// limit came within 10 % of it.
	NearLimit = 0.9
	// NoticeableWait: chunks that spent at least this share of their time
	// waiting for budget waited noticeably.
	NoticeableWait = 0.1
)

// BudgetLimited reports whether the budget, rather than the store or the
// writer, set the pace: the measured rate came within 10 % of the limit
// the write ended at (NearLimit) while the chunks spent a noticeable
// share of their time waiting for budget (NoticeableWait).
func (r Rate) BudgetLimited() bool {
	return r.LimitPerSec > 0 && r.MeasuredPerSec >= NearLimit*r.LimitPerSec && r.WaitShare >= NoticeableWait
}

// commit is a chunk's commit: when, and how many districts it wrote.
type commit struct {
	at        time.Time
	districts int
}

// busiest is the most districts of commits within any window of length
// w, [t, t+w) sliding over the commits: the busiest such window starts at
// a commit. commits need not be sorted and are not modified.
func busiest(commits []commit, w time.Duration) int {
	s := slices.Clone(commits)
	slices.SortFunc(s, func(a, b commit) int { return a.at.Compare(b.at) })
	best, sum, j := 0, 0, 0
	for i := range s {
		// The window is [s[i].at, s[i].at+w): add what falls in it.
		for ; j < len(s) && s[j].at.Sub(s[i].at) < w; j++ {
			sum += s[j].districts
		}
		best = max(best, sum)
		sum -= s[i].districts
	}
	return best
}

// rateTally is what a round's Rate is made of, kept to pool a level's
// rounds.
type rateTally struct {
	districts int   // the districts MeasuredPerSec counts
	spanMs    int64 // ChunkSpanMs, the time it counts them over
	chunkMs   int64 // the district chunks' durations, summed
}

// rateOf is the Rate of a write's result, and its tally.
func rateOf(res *snapshot.Result) (Rate, rateTally) {
	wr := res.WriteRate
	r := Rate{LimitPerSec: wr.LimitPerSec, MinLimitPerSec: wr.MinLimitPerSec, WaitedMs: wr.WaitedMs,
		ResourceExhausted: wr.ResourceExhausted, Aborted: wr.Aborted, Slowdowns: wr.Slowdowns}
	var t rateTally
	var commits []commit
	var start time.Time // of the first chunk to start, of those that committed
	for _, b := range res.BatchResults {
		if b.BatchIndex == 0 { // the root: no budget, no districts
			continue
		}
		t.chunkMs += b.DurationMs
		if !b.Success || b.CommittedAt.IsZero() {
			continue
		}
		commits = append(commits, commit{b.CommittedAt, len(b.DistrictIDs)})
		t.districts += len(b.DistrictIDs)
		if s := b.CommittedAt.Add(-time.Duration(b.DurationMs) * time.Millisecond); start.IsZero() || s.Before(start) {
			start = s
		}
	}
	if len(commits) > 0 {
		slices.SortFunc(commits, func(a, b commit) int { return a.at.Compare(b.at) })
		first, last := commits[0], commits[len(commits)-1]
		if last.at.Sub(first.at) >= time.Millisecond {
			t.districts -= first.districts
			start = first.at
		}
		t.spanMs = last.at.Sub(start).Milliseconds()
	}
	r.ChunkSpanMs = t.spanMs
	if t.spanMs > 0 {
		r.MeasuredPerSec = float64(t.districts) / (float64(t.spanMs) / 1000)
	}
	r.BusiestSecond = busiest(commits, time.Second)
	if t.chunkMs > 0 {
		r.WaitShare = min(1, float64(r.WaitedMs)/float64(t.chunkMs))
	}
	return r, t
}

// levelRate pools the Rates of a level's rounds, in the order run:
// measured over every round's districts and chunk time, the busiest
// second of any round, the limit the last round ended at and the lowest
// of any, the wait and ChunkSpanMs as means per round, the answers and
// slowdowns summed.
func levelRate(rounds []Round) Rate {
	var l Rate
	var t rateTally
	for i, r := range rounds {
		w := r.WriteRate
		t.districts += r.rate.districts
		t.spanMs += r.rate.spanMs
		t.chunkMs += r.rate.chunkMs
		l.BusiestSecond = max(l.BusiestSecond, w.BusiestSecond)
		l.LimitPerSec = w.LimitPerSec
		if i == 0 || w.MinLimitPerSec < l.MinLimitPerSec {
			l.MinLimitPerSec = w.MinLimitPerSec
		}
		l.WaitedMs += w.WaitedMs
		l.ResourceExhausted += w.ResourceExhausted
		l.Aborted += w.Aborted
		l.Slowdowns += w.Slowdowns
	}
	if len(rounds) == 0 {
		return l
	}
	if t.spanMs > 0 {
		l.MeasuredPerSec = float64(t.districts) / (float64(t.spanMs) / 1000)
	}
	if t.chunkMs > 0 {
		l.WaitShare = min(1, float64(l.WaitedMs)/float64(t.chunkMs))
	}
	l.ChunkSpanMs = t.spanMs / int64(len(rounds))
	l.WaitedMs /= int64(len(rounds))
	return l
}
