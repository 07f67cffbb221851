package loadtest

import (
	"math"
	"slices"

	"github.com/snapwriter/snapwriter/snapshot"
)

// Percentile returns the p-th percentile (0 < p <= 100) of values by the
// nearest-rank method: the smallest value such that at least p% of the
// values are less than or equal to it, i.e. the ⌈p/100·n⌉-th smallest.
// It is always one of the values, never an interpolation, so a p99 over a
// few hundred chunks is a latency some chunk really had. values need not
// be sorted and is not modified; it returns 0 for no values.
func Percentile(values []int64, p float64) int64 {
	if len(values) == 0 {
		return 0
	}
	s := slices.Clone(values)
	slices.Sort(s)
	return nearestRank(s, p)
}

// nearestRank is Percentile on sorted values.
func nearestRank(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The small epsilon keeps 0.95·20 = 19.000000000000004 at rank 19.
	rank := int(math.Ceil(p/100*float64(n) - 1e-9))
	return sorted[min(max(rank, 1), n)-1]
}

// Latency summarises the commit latencies of district chunks, in
// milliseconds: nearest-rank percentiles (Percentile) and the maximum.
type Latency struct {
	Chunks int   `json:"chunks"` // how many latencies the figures are over
	P50    int64 `json:"p50"`
	P95    int64 `json:"p95"`
	P99    int64 `json:"p99"`
	Max    int64 `json:"max"`
}

// latencyOf summarises values.
func latencyOf(values []int64) Latency {
	s := slices.Clone(values)
	slices.Sort(s)
	l := Latency{Chunks: len(s), P50: nearestRank(s, 50), P95: nearestRank(s, 95), P99: nearestRank(s, 99)}
	if len(s) > 0 {
		l.Max = s[len(s)-1]
	}
	return l
}

// Round is one measured write: one snapshot of Config.Districts written
// under the real lock and fence at one concurrency.
type Round struct {
	Concurrency int    `json:"concurrency"`
	Round       int    `json:"round"` // 1-based, per concurrency
	SnapshotID  string `json:"snapshotId"`
	// Complete: every district was written. A round that is not complete
	// is partial (or failed: see Error).
	Complete         bool  `json:"complete"`
	DistrictsWritten int   `json:"districtsWritten"`
	DurationMs       int64 `json:"durationMs"` // the write's, from asking for the lock to the finish
	// DistrictsPerSecond is DistrictsWritten over DurationMs.
	DistrictsPerSecond float64 `json:"districtsPerSecond"`
	// ChunkLatencyMs is over the district chunks that committed (batch
	// index > 0, retries included in their duration).
	ChunkLatencyMs Latency `json:"chunkLatencyMs"`
	// AbortedRetries and OtherRetries count the retries of every chunk,
	// the root's included: after an ABORTED answer (contention), and after
	// anything else.
	AbortedRetries int   `json:"abortedRetries"`
	OtherRetries   int   `json:"otherRetries"`
	RootCommits    int   `json:"rootCommits"`
	LockWaitMs     int64 `json:"lockWaitMs"`
	FailedChunks   int   `json:"failedChunks"`
	// WriteRate is the district write rate measured, against the write
	// budget's limit, and the store's push-back.
	WriteRate Rate `json:"writeRate"`
	// Error is why the write did not complete; "" when it did.
	Error string `json:"error,omitempty"`

	latencies []int64   // the district chunks' DurationMs, for the level's percentiles
	rate      rateTally // what WriteRate is made of, for the level's
}

// newRound summarises one write's result and error (res may be nil when
// the write never reached its root).
func newRound(concurrency, n int, id string, res *snapshot.Result, err error) Round {
	r := Round{Concurrency: concurrency, Round: n, SnapshotID: id}
	if err != nil {
		r.Error = err.Error()
	}
	if res == nil {
		return r
	}
	r.Complete = err == nil && (res.Outcome == snapshot.OutcomeComplete || res.Outcome == snapshot.OutcomeSkipped)
	r.DistrictsWritten = res.DistrictsWritten
	r.DurationMs = res.TotalDurationMs
	if res.TotalDurationMs > 0 {
		r.DistrictsPerSecond = float64(res.DistrictsWritten) / (float64(res.TotalDurationMs) / 1000)
	}
	r.RootCommits = res.RootCommits
	r.LockWaitMs = res.LockWaitMs
	r.FailedChunks = res.FailedBatches
	for _, b := range res.BatchResults {
		r.AbortedRetries += b.AbortedRetries
		r.OtherRetries += b.RetryAttempts - b.AbortedRetries
		if b.BatchIndex > 0 && b.Success {
			r.latencies = append(r.latencies, b.DurationMs)
		}
	}
	r.ChunkLatencyMs = latencyOf(r.latencies)
	r.WriteRate, r.rate = rateOf(res)
	return r
}

// Level aggregates the rounds at one concurrency.
type Level struct {
	Concurrency   int `json:"concurrency"`
	Rounds        int `json:"rounds"`
	PartialRounds int `json:"partialRounds"` // rounds that did not complete
	// DistrictsPerSecond is every district written over every round's
	// duration: the rounds' throughput weighted by their length.
	DistrictsPerSecond float64 `json:"districtsPerSecond"`
	// WriteSeconds, RootCommits and LockWaitMs are means per round.
	WriteSeconds float64 `json:"writeSeconds"`
	// ChunkLatencyMs pools every round's chunk latencies.
	ChunkLatencyMs Latency `json:"chunkLatencyMs"`
	AbortedRetries int     `json:"abortedRetries"` // summed over the rounds
	OtherRetries   int     `json:"otherRetries"`   // summed over the rounds
	RootCommits    float64 `json:"rootCommits"`
	LockWaitMs     int64   `json:"lockWaitMs"`
	FailedChunks   int     `json:"failedChunks"` // summed over the rounds
	// WriteRate pools the rounds' (see levelRate): the measured rate over
	// every round's chunks, the busiest second of any round, the limit
	// the last round ended at and the lowest of any, the wait (and the
	// chunk span) a mean per round, the push-back summed.
	WriteRate Rate `json:"writeRate"`
}

// levels aggregates rounds by concurrency, in the order of concurrency.
func levels(concurrency []int, rounds []Round) []Level {
	var out []Level
	for _, c := range concurrency {
		l := Level{Concurrency: c}
		var written int
		var ms, lockMs int64
		var roots int
		var lat []int64
		var mine []Round
		for _, r := range rounds {
			if r.Concurrency != c {
				continue
			}
			mine = append(mine, r)
			l.Rounds++
			if !r.Complete {
				l.PartialRounds++
			}
			written += r.DistrictsWritten
			ms += r.DurationMs
			lockMs += r.LockWaitMs
			roots += r.RootCommits
			lat = append(lat, r.latencies...)
			l.AbortedRetries += r.AbortedRetries
			l.OtherRetries += r.OtherRetries
			l.FailedChunks += r.FailedChunks
		}
		if l.Rounds == 0 {
			continue
		}
		if ms > 0 {
			l.DistrictsPerSecond = float64(written) / (float64(ms) / 1000)
		}
		l.WriteSeconds = float64(ms) / 1000 / float64(l.Rounds)
		l.RootCommits = float64(roots) / float64(l.Rounds)
		l.LockWaitMs = lockMs / int64(l.Rounds)
		l.ChunkLatencyMs = latencyOf(lat)
		l.WriteRate = levelRate(mine)
		out = append(out, l)
	}
	return out
}
