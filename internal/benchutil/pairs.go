package benchutil

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// Pair is one lock implementation's acquire and release as a benchmark
// drives them: Acquire returns the lockId that Release takes with the key.
type Pair struct {
	Acquire func(key string) (lockID string, err error)
	Release func(key, lockID string) error
}

// Contender is one lock implementation under measurement. PairFor(w)
// returns the operations worker w uses: on storage of its own when w >= 0,
// on the contender's shared storage when w < 0.
type Contender struct {
	Name    string
	PairFor func(w int) (Pair, error)
}

// RoundStats is one round of one contender.
type RoundStats struct {
	PairsPerSec      float64
	Acquire, Release []time.Duration // every operation's latency
}

// Round runs pairs acquire+release pairs on each of workers goroutines,
// each on a key of its own ("bench:<name>:<worker>"), and times them. With
// ownStorage each worker gets PairFor(worker), else PairFor(-1).
func (c Contender) Round(workers, pairs int, ownStorage bool) (RoundStats, error) {
	fns := make([]Pair, workers)
	for w := range workers {
		i := -1
		if ownStorage {
			i = w
		}
		var err error
		if fns[w], err = c.PairFor(i); err != nil {
			return RoundStats{}, err
		}
	}
	acq := make([][]time.Duration, workers)
	rel := make([][]time.Duration, workers)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	t0 := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("bench:%s:%d", c.Name, w)
			acq[w], rel[w] = make([]time.Duration, 0, pairs), make([]time.Duration, 0, pairs)
			for range pairs {
				t1 := time.Now()
				id, err := fns[w].Acquire(key)
				t2 := time.Now()
				if err == nil {
					err = fns[w].Release(key, id)
				}
				if err != nil {
					errs[w] = err
					return
				}
				acq[w] = append(acq[w], t2.Sub(t1))
				rel[w] = append(rel[w], time.Since(t2))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	if err := errors.Join(errs...); err != nil {
		return RoundStats{}, err
	}
	st := RoundStats{PairsPerSec: float64(workers*pairs) / elapsed.Seconds()}
	for w := range workers {
		st.Acquire = append(st.Acquire, acq[w]...)
		st.Release = append(st.Release, rel[w]...)
	}
	return st, nil
}

// PercentileMs is the p-th percentile of ds (nearest rank), in ms.
func PercentileMs(ds []time.Duration, p int) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return float64(s[max(i, 0)]) / float64(time.Millisecond)
}

// Metric is a figure a benchmark reports, as testing.B.ReportMetric takes it.
type Metric struct {
	Value float64
	Unit  string
}

// AcquireRelease runs the acquire+release benchmark shared by the lock
// backends: ours against baseline, alternating within each round and
// swapping order every round so drift in the server hits both alike. Every
// metric is the median over BENCH_ROUNDS rounds (default 5):
//
//   - serial: one goroutine, one key, BENCH_PAIRS pairs a round (default
//     200): pairs/s of each, their ratio, and the p50 and p99 latency (ms)
//     of acquire and of release alone;
//   - parallel-16: 16 goroutines, each on a key of its own (and, with
//     parallelOwnStorage, storage of its own), BENCH_PAR_PAIRS pairs each a
//     round (default 50): pairs/s over the round's wall time, and the
//     ratio.
//
// The ratio is ours/baseline throughput (above 1: ours is faster). Each
// sub-benchmark also reports extra (the setup's measured round trip, say).
// Nothing is asserted on timings.
func AcquireRelease(b *testing.B, ours, baseline Contender, parallelOwnStorage bool, extra ...Metric) {
	ours.Name, baseline.Name = "ours", "baseline"
	contenders := []Contender{ours, baseline}
	rounds := EnvInt("BENCH_ROUNDS", 5)
	run := func(b *testing.B, workers, pairs int, own, latencies bool) {
		// Warm up both (connections, caches, JITs) before measuring.
		for _, c := range contenders {
			if _, err := c.Round(workers, max(20/workers, 5), own); err != nil {
				b.Fatalf("%s: %v", c.Name, err)
			}
		}
		rate := map[string][]float64{}
		lat := map[string][]float64{} // "<name>-<acquire|release>-p<50|99>-ms"
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			for r := range rounds {
				for j := range contenders {
					c := contenders[(j+r)%len(contenders)]
					st, err := c.Round(workers, pairs, own)
					if err != nil {
						b.Fatalf("%s: %v", c.Name, err)
					}
					rate[c.Name] = append(rate[c.Name], st.PairsPerSec)
					if !latencies {
						continue
					}
					for op, ds := range map[string][]time.Duration{"acquire": st.Acquire, "release": st.Release} {
						for _, p := range []int{50, 99} {
							k := fmt.Sprintf("%s-%s-p%d-ms", c.Name, op, p)
							lat[k] = append(lat[k], PercentileMs(ds, p))
						}
					}
				}
			}
		}
		b.StopTimer()
		o, l := Median(rate["ours"]), Median(rate["baseline"])
		b.ReportMetric(o, "ours-pairs/s")
		b.ReportMetric(l, "baseline-pairs/s")
		b.ReportMetric(o/l, "ratio")
		for k, v := range lat {
			b.ReportMetric(Median(v), k)
		}
		for _, m := range extra {
			b.ReportMetric(m.Value, m.Unit)
		}
		b.ReportMetric(0, "ns/op") // a whole run is one op; ns/op would mislead
	}
	b.Run("serial", func(b *testing.B) {
		run(b, 1, EnvInt("BENCH_PAIRS", 200), false, true)
	})
	b.Run("parallel-16", func(b *testing.B) {
		run(b, 16, EnvInt("BENCH_PAR_PAIRS", 50), parallelOwnStorage, false)
	})
}
