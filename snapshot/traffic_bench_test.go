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
//     share of commits the store refused, the busiest second; and its
//     control, the same write through the proxy with no budget and
//     nothing enforced (what the proxy and the emulator sustain here);
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
				rows = append(rows, trafficOpen(b, n))
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

// trafficOpen is the control of trafficRamp: the same write through the
// proxy with the budget out of the way (a fixed 1,000,000/s) and nothing
// enforced — how fast the proxy and the emulator go on this machine.
func trafficOpen(b *testing.B, n int) trafficRow {
	p := fsproxy.Start(b, emu.Host, fsproxy.Config{})
	w := trafficWriter(b, p.Addr(), emulator.ProjectID(b), budgetOf(b, pacing.Fixed(1e6), 1))
	id := "2026-04-02"
	t0 := time.Now()
	res, err := w.Write(context.Background(), id, model.Generate(id, n, 1))
	if err != nil {
		b.Fatalf("through the proxy, no budget: %v", err)
	}
	return trafficRow{name: "proxy, no budget, no ramp", districts: n, elapsed: time.Since(t0), chunks: chunkSpan(res),
		commits: p.Stats().Commits, note: "the proxy's and the emulator's own pace here"}
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

// BenchmarkSlowStore measures how the write settles under push-back: one
// write of BENCH_SLOW_DISTRICTS districts (default 3000) at the default
// budget (500/s at first, one writer) through a store that takes fewer
// district writes a second than that (internal/fsproxy holding its
// budget at 100/s, then at 250/s), and four tasks sharing the default
// budget through the 100/s store; and one write through a store that
// takes 250/s, drops to 100/s for a third of the write and recovers. It
// prints the elapsed time against the ideal (districts ÷ the store's
// rate), the district commit attempts the store refused, and the rates
// the write ran at.
func BenchmarkSlowStore(b *testing.B) {
	ns, err := envInts("BENCH_SLOW_DISTRICTS", "3000")
	if err != nil {
		b.Fatal(err)
	}
	var rows []slowRow
	for _, n := range ns {
		b.Run(fmt.Sprintf("districts=%d", n), func(b *testing.B) {
			for range b.N {
				trafficBare(b, 2000, 1) // warm the emulator up, uncounted
				rows = append(rows, slowStore(b, n, 100, 1), slowStore(b, n, 250, 1), slowStore(b, n, 100, 4), slowDrop(b, n))
			}
		})
	}
	printSlow(os.Stdout, rows)
}

// slowRow is one line of BenchmarkSlowStore's table.
type slowRow struct {
	name              string
	districts         int
	elapsed, ideal    time.Duration
	chunks            time.Duration // the paced phase (chunkSpan), the longest of the writers'
	attempts, refused int           // district commit attempts, and those the store refused
	minLimit, limit   float64       // the lowest rate and the last, of the first writer
	slowdowns         int
}

// slowStore writes n districts through a store that takes rate district
// writes a second, as tasks writers dividing the default budget.
func slowStore(b *testing.B, n int, rate float64, tasks int) slowRow {
	p := fsproxy.Start(b, emu.Host, fsproxy.Config{Ramp: fsproxy.Ramp{Collection: "districts", Start: rate, Max: rate}})
	name := fmt.Sprintf("store takes %v/s", rate)
	if tasks > 1 {
		name = fmt.Sprintf("%d tasks, store takes %v/s", tasks, rate)
	}
	row := slowWrite(b, p, n, tasks, nil)
	row.name, row.ideal = name, time.Duration(float64(n)/rate*float64(time.Second))
	return row
}

// slowDrop writes n districts through a store that takes 250/s, holds it
// at 100/s for the middle third of the ideal time, and returns it to
// 250/s.
func slowDrop(b *testing.B, n int) slowRow {
	p := fsproxy.Start(b, emu.Host, fsproxy.Config{Ramp: fsproxy.Ramp{Collection: "districts", Start: 250, Max: 250}})
	third := time.Duration(float64(n) / 250 / 3 * float64(time.Second))
	row := slowWrite(b, p, n, 1, func() {
		time.Sleep(third)
		p.SetRate(100)
		time.Sleep(third)
		p.SetRate(250)
	})
	// Ideal: a third of the districts' time at 250/s, that long at 100/s,
	// the rest at 250/s.
	row.name = fmt.Sprintf("store takes 250/s, 100/s for %.0f s", third.Seconds())
	at100 := third.Seconds() * 100
	row.ideal = third + time.Duration(at100/100*float64(time.Second)) + time.Duration((float64(n)-third.Seconds()*250-at100)/250*float64(time.Second))
	return row
}

// slowWrite writes n districts through p as tasks writers dividing the
// default budget, each its own date; during runs beside the chunks, from
// the first writer's first chunk.
func slowWrite(b *testing.B, p *fsproxy.Proxy, n, tasks int, during func()) slowRow {
	project := emulator.ProjectID(b)
	results := make([]*Result, tasks)
	errs := make([]error, tasks)
	var once sync.Once
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range tasks {
		var opts []Option
		if during != nil && i == 0 {
			opts = append(opts, withBeforeChunks(func(context.Context) { once.Do(func() { go during() }) }))
		}
		client, api, lock := storeClients(b, p.Addr(), project)
		w, err := NewWriter(client, lock, append(opts, WithAPIClient(api), WithWriteBudget(budgetOf(b, pacing.DefaultRamp(), tasks)))...)
		if err != nil {
			b.Fatal(err)
		}
		id := fmt.Sprintf("2026-06-%02d", 1+i)
		in := model.Generate(id, n/tasks, int64(i+1))
		wg.Go(func() { results[i], errs[i] = w.Write(context.Background(), id, in) })
	}
	wg.Wait()
	row := slowRow{districts: n, elapsed: time.Since(t0)}
	for i, err := range errs {
		if err != nil {
			b.Fatalf("writer %d: %v", i, err)
		}
		res := results[i]
		row.chunks = max(row.chunks, chunkSpan(res))
		row.attempts += res.Chunks + res.WriteRate.ResourceExhausted + res.WriteRate.Aborted
		row.refused += res.WriteRate.ResourceExhausted + res.WriteRate.Aborted
		row.slowdowns += res.WriteRate.Slowdowns
	}
	row.minLimit, row.limit = results[0].WriteRate.MinLimitPerSec, results[0].WriteRate.LimitPerSec
	if got := p.Stats().Rejected[fsproxy.CauseRamp]; got != row.refused {
		b.Logf("the store refused %d district commits, the writers counted %d", got, row.refused)
	}
	return row
}

func printSlow(f *os.File, rows []slowRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintln(f, "\npush-back (internal/fsproxy holding the districts' rate below the default budget's 500/s):")
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "case\tdistricts\telapsed s\tchunks s\tideal s\telapsed ÷ ideal\tattempts\trefused\trefused %\tslowdowns\tmin rate/s\tlast rate/s\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%d\t%d\t%.1f\t%d\t%.0f\t%.0f\t\n", r.name, r.districts, r.elapsed.Seconds(), r.chunks.Seconds(),
			r.ideal.Seconds(), r.elapsed.Seconds()/r.ideal.Seconds(), r.attempts, r.refused, 100*float64(r.refused)/float64(max(r.attempts, 1)),
			r.slowdowns, r.minLimit, r.limit)
	}
	_ = tw.Flush()
}
