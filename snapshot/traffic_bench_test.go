package snapshot

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/benchutil"
	"github.com/snapwriter/snapwriter/internal/fsproxy"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/pacing"
)

// BenchmarkTrafficDiscipline measures the write budget against a store
// that enforces Firestore's ramp (internal/fsproxy in front of the
// package's emulator), on BENCH_TRAFFIC_DISTRICTS districts (default
// 5000; "none" skips it), and prints one table:
//
//   - ramp: one write at the default budget (500/50/5) through a store
//     that enforces 500/50/5: elapsed against the ideal n ÷ 500 s, the
//     share of commits the store refused, the busiest second;
//   - scaled ramp: the same at 150/s, a rate the emulator outruns here,
//     so that the ratio is the budget's and not the emulator's;
//   - 4 tasks: four writers, each with a quarter of the budget, writing
//     n/4 districts of their own date at once into one such store;
//   - no proxy: the write on the emulator alone, at the default budget
//     and with the budget out of the way (a fixed 1,000,000/s), rounds
//     alternating, medians: what the ramp costs where nothing enforces it.
func BenchmarkTrafficDiscipline(b *testing.B) {
	ns, err := envInts("BENCH_TRAFFIC_DISTRICTS", "5000")
	if err != nil {
		b.Fatal(err)
	}
	var rows []trafficRow
	for _, n := range ns {
		b.Run(fmt.Sprintf("districts=%d", n), func(b *testing.B) {
			for range b.N {
				// A cold emulator runs at half speed for its first few
				// thousand documents: warm it up first, uncounted.
				trafficBare(b, 2000, 1)
				rows = append(rows, trafficRamp(b, "ramp 500/50/5", n, 500))
				rows = append(rows, trafficRamp(b, "scaled ramp 150/s", min(n, 1500), 150))
				rows = append(rows, trafficTasks(b, n, 4))
				rows = append(rows, trafficBare(b, n, benchutil.EnvInt("BENCH_ROUNDS", 3))...)
			}
		})
	}
	printTraffic(os.Stdout, rows)
}

// trafficRow is one line of the table.
type trafficRow struct {
	name           string
	districts      int
	elapsed, ideal time.Duration
	// chunks is the paced phase: from the first chunk's start to the
	// last chunk's commit (the longest of the writers').
	chunks           time.Duration
	commits, refused int
	peak, peakWhole  int // busiest sliding second, busiest whole second (district writes)
	waited           time.Duration
	note             string
}

// trafficStore is a store enforcing ramp start/s on the districts, for b.
func trafficStore(b *testing.B, start float64) *fsproxy.Proxy {
	return fsproxy.Start(b, emu.Host, fsproxy.Config{Ramp: fsproxy.Ramp{Collection: "districts", Start: start}})
}

// trafficWriter is a writer of project through host, with budget.
func trafficWriter(b *testing.B, host, project string, budget *pacing.Budget) *Writer {
	client, api, lock := storeClients(b, host, project)
	w, err := NewWriter(client, lock, WithAPIClient(api), WithWriteBudget(budget))
	if err != nil {
		b.Fatal(err)
	}
	return w
}

func trafficRamp(b *testing.B, name string, n int, rate float64) trafficRow {
	p := trafficStore(b, rate)
	ramp := pacing.DefaultRamp()
	ramp.Initial = rate
	w := trafficWriter(b, p.Addr(), emulator.ProjectID(b), budgetOf(b, ramp, 1))
	id := "2026-04-01"
	t0 := time.Now()
	res, err := w.Write(context.Background(), id, model.Generate(id, n, 1))
	elapsed := time.Since(t0)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	st := p.Stats()
	return trafficRow{name: name, districts: n, elapsed: elapsed, chunks: chunkSpan(res), ideal: time.Duration(float64(n) / rate * float64(time.Second)),
		commits: st.Commits, refused: st.Rejected[fsproxy.CauseRamp], peak: st.PeakRampWrites,
		peakWhole: slices.Max(append(p.RampWritesPerSecond(), 0)), waited: time.Duration(res.WriteRate.WaitedMs) * time.Millisecond}
}

func trafficTasks(b *testing.B, n, tasks int) trafficRow {
	p := trafficStore(b, 500)
	project := emulator.ProjectID(b)
	var wg sync.WaitGroup
	errs := make([]error, tasks)
	var waited, span time.Duration
	var mu sync.Mutex
	t0 := time.Now()
	for i := range tasks {
		w := trafficWriter(b, p.Addr(), project, budgetOf(b, pacing.DefaultRamp(), tasks))
		id := fmt.Sprintf("2026-04-%02d", 10+i)
		in := model.Generate(id, n/tasks, int64(i+1))
		wg.Go(func() {
			res, err := w.Write(context.Background(), id, in)
			errs[i] = err
			if res != nil {
				mu.Lock()
				waited += time.Duration(res.WriteRate.WaitedMs) * time.Millisecond
				span = max(span, chunkSpan(res))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	for i, err := range errs {
		if err != nil {
			b.Fatalf("task %d: %v", i, err)
		}
	}
	st := p.Stats()
	return trafficRow{name: fmt.Sprintf("%d tasks sharing 500/s", tasks), districts: n, elapsed: elapsed, chunks: span,
		ideal: time.Duration(float64(n) / 500 * float64(time.Second)), commits: st.Commits, refused: st.Rejected[fsproxy.CauseRamp],
		peak: st.PeakRampWrites, peakWhole: slices.Max(append(p.RampWritesPerSecond(), 0)), waited: waited}
}

// trafficBare writes n districts on the emulator alone, rounds times at
// the default budget and as many with the budget out of the way,
// alternating, and returns both medians, the second noting the ratio.
func trafficBare(b *testing.B, n, rounds int) []trafficRow {
	var ramped, open, spans []time.Duration
	var waited []time.Duration
	for r := range rounds {
		for k, budget := range []*pacing.Budget{budgetOf(b, pacing.DefaultRamp(), 1), budgetOf(b, pacing.Fixed(1e6), 1)} {
			w := trafficWriter(b, emu.Host, emulator.ProjectID(b), budget)
			id := fmt.Sprintf("2026-05-%02d", 1+2*r+k)
			in := model.Generate(id, n, int64(r))
			t0 := time.Now()
			res, err := w.Write(context.Background(), id, in)
			d := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			if k == 0 {
				ramped = append(ramped, d)
				spans = append(spans, chunkSpan(res))
				waited = append(waited, time.Duration(res.WriteRate.WaitedMs)*time.Millisecond)
			} else {
				open = append(open, d)
			}
		}
	}
	med := func(ds []time.Duration) time.Duration { slices.Sort(ds); return ds[len(ds)/2] }
	mr, mo := med(ramped), med(open)
	return []trafficRow{
		{name: "no proxy, default budget", districts: n, elapsed: mr, chunks: med(spans),
			ideal: time.Duration(float64(n) / 500 * float64(time.Second)), waited: med(waited),
			note: fmt.Sprintf("median of %d", rounds)},
		{name: "no proxy, no budget", districts: n, elapsed: mo,
			note: fmt.Sprintf("median of %d; budget/none = %.2f", rounds, mr.Seconds()/mo.Seconds())},
	}
}

// chunkSpan is res's paced phase: from the earliest chunk's start (its
// commit less its duration) to the latest chunk's commit.
func chunkSpan(res *Result) time.Duration {
	var first, last time.Time
	for _, r := range res.BatchResults[1:] {
		if r.CommittedAt.IsZero() {
			continue
		}
		start := r.CommittedAt.Add(-time.Duration(r.DurationMs) * time.Millisecond)
		if first.IsZero() || start.Before(first) {
			first = start
		}
		if r.CommittedAt.After(last) {
			last = r.CommittedAt
		}
	}
	return last.Sub(first)
}

func printTraffic(f *os.File, rows []trafficRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(f, "\ntraffic discipline (internal/fsproxy enforcing the ramp on the districts' key range):")
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tdistricts\telapsed s\tchunks s\tideal s\tchunks × ideal\tcommits\trefused\trefused %\tbusiest s (sliding)\tbusiest whole s\tchunks waited s\t note")
	for _, r := range rows {
		ratio, ideal, refusedPct := "—", "—", "—"
		if r.ideal > 0 {
			ideal = fmt.Sprintf("%.1f", r.ideal.Seconds())
			ratio = fmt.Sprintf("%.2f", r.chunks.Seconds()/r.ideal.Seconds())
		}
		if r.commits > 0 {
			refusedPct = fmt.Sprintf("%.1f", 100*float64(r.refused)/float64(r.commits))
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%.1f\t%s\n", r.name, r.districts, r.elapsed.Seconds(), r.chunks.Seconds(), ideal, ratio,
			r.commits, r.refused, refusedPct, r.peak, r.peakWhole, r.waited.Seconds(), " "+r.note)
	}
	_ = tw.Flush()
}
