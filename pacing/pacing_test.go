package pacing

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestRampAt(t *testing.T) {
	r := DefaultRamp()
	for _, c := range []struct {
		elapsed time.Duration
		want    float64
	}{
		{0, 500},
		{5*time.Minute - time.Nanosecond, 500},
		{5 * time.Minute, 750},
		{10 * time.Minute, 1125},
		{15 * time.Minute, 1687.5},
		{time.Hour, 10000}, // 500·1.5¹² ≈ 64,873: capped
	} {
		if got := r.At(c.elapsed); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("At(%s) = %v, want %v", c.elapsed, got, c.want)
		}
	}
	if got := Fixed(800).At(time.Hour); got != 800 {
		t.Errorf("Fixed(800).At(1h) = %v, want 800", got)
	}
}

func TestRampValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Ramp
		ok   bool
	}{
		{"default", DefaultRamp(), true},
		{"fixed", Fixed(100), true},
		{"zero initial", Ramp{Max: 10, Growth: 1}, false},
		{"NaN initial", Ramp{Initial: math.NaN(), Max: 10, Growth: 1}, false},
		{"max below initial", Ramp{Initial: 500, Max: 100, Growth: 1.5, Every: time.Minute}, false},
		{"infinite max", Ramp{Initial: 500, Max: math.Inf(1), Growth: 1.5, Every: time.Minute}, false},
		{"shrinking", Ramp{Initial: 500, Max: 1000, Growth: 0.5, Every: time.Minute}, false},
		{"growth without a step", Ramp{Initial: 500, Max: 1000, Growth: 1.5}, false},
	} {
		if err := c.r.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate() = %v, want ok %v", c.name, err, c.ok)
		}
	}
	if _, err := New(DefaultRamp(), 0); err == nil {
		t.Error("New with a share of 0: no error")
	}
}

// admitted records when each write was admitted, to find the busiest
// one-second window.
type admitted struct {
	mu    sync.Mutex
	times []time.Time
}

func (a *admitted) add(at time.Time, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for range n {
		a.times = append(a.times, at)
	}
}

// peak is the most writes admitted within any window of d (times are
// sorted, as synctest's clock only moves forward and adds run under mu).
func (a *admitted) peak(d time.Duration) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	best, lo := 0, 0
	for hi, t := range a.times {
		for t.Sub(a.times[lo]) >= d {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// drive runs writers goroutines that each take chunks of size writes
// from b until total writes were taken, and records when.
func drive(t *testing.T, b *Budget, writers, size, total int) *admitted {
	t.Helper()
	var a admitted
	var mu sync.Mutex
	left := total
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				mu.Lock()
				n := min(size, left)
				left -= n
				mu.Unlock()
				if n == 0 {
					return
				}
				if _, err := b.Wait(context.Background(), n); err != nil {
					t.Error(err)
					return
				}
				a.add(time.Now(), n)
			}
		})
	}
	wg.Wait()
	return &a
}

func TestWaitPacesToTheRamp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(DefaultRamp(), 1)
		if err != nil {
			t.Fatal(err)
		}
		defer begin(b)()
		t0 := time.Now()
		a := drive(t, b, 3, 50, 5000)
		elapsed := time.Since(t0)
		// 5,000 writes at 500/s, the first 50 from the full bucket.
		if want := 9900 * time.Millisecond; elapsed < want-50*time.Millisecond || elapsed > want+50*time.Millisecond {
			t.Errorf("5,000 writes took %s, want about %s", elapsed, want)
		}
		if p := a.peak(time.Second); p > 550 {
			t.Errorf("busiest second admitted %d writes, want ≤ 550", p)
		}
		st := b.Stats()
		if st.Writes != 5000 || st.Waited <= 0 {
			t.Errorf("stats %+v: want 5000 writes and some time waited", st)
		}
	})
}

func TestShareDividesTheBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const tasks = 4
		budgets := make([]*Budget, tasks)
		for i := range budgets {
			var err error
			if budgets[i], err = New(DefaultRamp(), tasks); err != nil {
				t.Fatal(err)
			}
			if got := budgets[i].Limit(); got != 125 {
				t.Fatalf("limit of one of 4 = %v, want 125", got)
			}
		}
		// Four tasks writing at once, each its own 1,000 writes in commits
		// of MaxCommit, started together (their worst alignment).
		size := budgets[0].MaxCommit()
		if size != 12 {
			t.Errorf("MaxCommit of one of 4 = %d, want 12", size)
		}
		var all admitted
		var wg sync.WaitGroup
		t0 := time.Now()
		for i, b := range budgets {
			wg.Go(func() {
				defer begin(b)()
				a := drive(t, b, 3, size, 1000)
				// A task's busiest second: its rate, 125, and one commit
				// whose writes were paid for just before the second.
				if p := a.peak(time.Second); p > 125+size {
					t.Errorf("task %d's busiest second: %d writes, want ≤ %d", i, p, 125+size)
				}
				for _, at := range a.times {
					all.add(at, 1)
				}
			})
		}
		wg.Wait()
		// Together: 4,000 writes at 500/s, less the four full buckets of
		// 13 writes each.
		if elapsed, want := time.Since(t0), (4000-4*13)*time.Second/500; elapsed < want {
			t.Errorf("4 tasks wrote 4,000 writes in %s, faster than 500/s (want ≥ %s)", elapsed, want)
		}
		all.mu.Lock()
		sortTimes(all.times)
		all.mu.Unlock()
		// At most 500/s and one commit of each task: 548.
		p := all.peak(time.Second)
		if p > 500+4*size {
			t.Errorf("4 tasks' busiest second: %d writes, want ≤ %d", p, 500+4*size)
		}
		t.Logf("4 tasks started together, commits of %d: busiest second %d writes", size, p)
	})
}

func TestMaxCommit(t *testing.T) {
	for _, c := range []struct {
		ramp  Ramp
		share int
		want  int
	}{
		{DefaultRamp(), 1, 50},
		{DefaultRamp(), 4, 12},
		{DefaultRamp(), 100, 1},
		{Fixed(10000), 1, 1000},
	} {
		b, err := New(c.ramp, c.share)
		if err != nil {
			t.Fatal(err)
		}
		if got := b.MaxCommit(); got != c.want {
			t.Errorf("MaxCommit of %v shared by %d = %d, want %d", c.ramp.Initial, c.share, got, c.want)
		}
	}
}

func sortTimes(ts []time.Time) {
	for i := 1; i < len(ts); i++ {
		for j := i; j > 0 && ts[j].Before(ts[j-1]); j-- {
			ts[j], ts[j-1] = ts[j-1], ts[j]
		}
	}
}

func TestRampGrowsAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		end := begin(b)
		for _, c := range []struct {
			at   time.Duration
			want float64
		}{{0, 500}, {5 * time.Minute, 750}, {10 * time.Minute, 1125}} {
			time.Sleep(c.at - sinceStart(b))
			if got := b.Limit(); got != c.want {
				t.Errorf("limit after %s = %v, want %v", c.at, got, c.want)
			}
		}
		// A second write overlapping the first keeps its ramp.
		end2 := begin(b)
		end()
		if got := b.Limit(); got != 1125 {
			t.Errorf("limit with an overlapping write = %v, want 1125", got)
		}
		end2()
		// The next day's write is a new key range: back to 500.
		defer begin(b)()
		if got := b.Limit(); got != 500 {
			t.Errorf("limit of a new write = %v, want 500", got)
		}
	})
}

func sinceStart(b *Budget) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return time.Since(b.start)
}

// acceptFor has the store accept n-write commits from b at rate writes a
// second for d, and returns when it stopped.
func acceptFor(b *Budget, rate float64, n int, d time.Duration) {
	every := time.Duration(float64(n) / rate * float64(time.Second))
	for end := time.Now().Add(d); time.Now().Before(end); {
		time.Sleep(every)
		b.Accepted(n)
	}
}

// A push-back cuts the rate to just under what the store took in the
// last two seconds (0.9 × 0.95 × 100/s), not by half: the first one of a
// write to no less than 0.9 × a quarter of the rate (a write's first
// seconds are its own pace as much as the store's). An answer to a commit
// whose writes were taken before the cut cuts nothing more; time alone
// raises nothing; each cut is of a tenth at least.
func TestPushBackCutsToWhatTheStoreTook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		taken := time.Now()
		acceptFor(b, 100, 50, 3*time.Second)
		if !b.PushedBack(taken) {
			t.Fatal("the first push-back did not cut")
		}
		if got := b.Limit(); math.Abs(got-112.5) > 1e-9 {
			t.Fatalf("after the first cut: %v, want 112.5 (0.9 × a quarter of 500)", got)
		}
		if b.PushedBack(taken) {
			t.Error("a push-back to a commit taken before the cut cut again")
		}
		time.Sleep(10 * time.Second)
		if got := b.Limit(); math.Abs(got-112.5) > 1e-9 {
			t.Errorf("10 s after the cut, nothing accepted: %v, want 112.5", got)
		}
		settle(t, b)
		// A cut while the last holds: by a tenth at least.
		taken = time.Now()
		acceptFor(b, 85.5, 10, 2*time.Second)
		b.PushedBack(taken)
		if got := b.Limit(); got > 0.9*85.5*1.02 {
			t.Errorf("after a third cut: %v, want at most 0.9 × 85.5, and a little climb", got)
		}
		st := b.Stats()
		if st.PushBacks != 4 || st.Cuts != 3 {
			t.Errorf("stats %+v: want 4 push-backs, 3 cuts", st)
		}
	})
}

// settle has b's store take 100 writes a second for 3 s and push back:
// the rate is cut to 0.9 × 0.95 × 100.
func settle(t *testing.T, b *Budget) {
	t.Helper()
	taken := time.Now()
	acceptFor(b, 100, 50, 3*time.Second)
	if !b.PushedBack(taken) {
		t.Fatal("the push-back did not cut")
	}
	if got := b.Limit(); math.Abs(got-85.5) > 1e-9 {
		t.Fatalf("after a cut, the store taking 100/s: %v, want 85.5 (0.9 × 0.95 × 100)", got)
	}
}

// After a cut the rate climbs back on CUBIC's curve, in seconds' worth of
// accepted writes: near the plateau (95/s) within 10 s, holding within
// 2 % of it for the next two seconds (the hold: 5 s), then beyond it —
// 5 % above within 20 s — and back to the ramp's 500/s, where the cut no
// longer holds.
func TestRecoveryHoldsNearThePlateauThenProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		taken := time.Now()
		acceptFor(b, 100, 50, 3*time.Second)
		b.PushedBack(taken) // to 112.5
		settle(t, b)
		cut := time.Now()
		var at10, at12, at20 float64
		for b.Limit() < 500 && time.Since(cut) < time.Minute {
			r := b.Limit()
			time.Sleep(time.Duration(10 / r * float64(time.Second)))
			b.Accepted(10)
			switch e := time.Since(cut); {
			case at10 == 0 && e >= 10*time.Second:
				at10 = b.Limit()
			case at12 == 0 && e >= 12*time.Second:
				at12 = b.Limit()
			case at20 == 0 && e >= 20*time.Second:
				at20 = b.Limit()
			}
		}
		const plateau = 95
		if at10 < 0.98*plateau || at10 > 1.02*plateau || at12 < 0.98*plateau || at12 > 1.02*plateau {
			t.Errorf("rate 10 s after the cut %v, 12 s after %v: want both within 2 %% of the plateau, %v", at10, at12, plateau)
		}
		if at20 < 1.05*plateau {
			t.Errorf("rate 20 s after the cut %v: want 5 %% above the plateau at least, probing", at20)
		}
		if got := b.Limit(); got != 500 {
			t.Errorf("a minute after the cut: %v, want back on the ramp, 500", got)
		}
		t.Logf("10 s: %.1f, 12 s: %.1f, 20 s: %.1f, back to 500 after %s", at10, at12, at20, time.Since(cut))
	})
}

// A probe refused about where the last plateau was (within 1.3 times
// it) found nothing new, and the next hold is twice as long, up to 40 s;
// a probe that got far beyond it starts again from 5 s.
func TestProbesThatFindNothingNewHoldLonger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		taken := time.Now()
		acceptFor(b, 100, 50, 3*time.Second)
		b.PushedBack(taken)
		settle(t, b)
		probeTo := func(r float64) {
			for b.Limit() < r {
				time.Sleep(time.Duration(10 / b.Limit() * float64(time.Second)))
				b.Accepted(10)
			}
			taken := time.Now()
			time.Sleep(time.Second)
			if !b.PushedBack(taken) {
				t.Fatalf("a push-back at %v did not cut", b.Limit())
			}
		}
		for _, want := range []float64{10, 20, 40, 40} {
			probeTo(1.1 * b.recovery.plateau)
			if got := b.recovery.hold; got != want {
				t.Errorf("hold after a probe refused at 1.1 × the plateau: %v s, want %v", got, want)
			}
		}
		probeTo(1.5 * b.recovery.plateau)
		if got := b.recovery.hold; got != minHold {
			t.Errorf("hold after a probe refused at 1.5 × the plateau: %v s, want %v", got, minHold)
		}
	})
}

// A store that accepts nothing for a minute (an outage) halves the rate a
// wave, down to the floor; once it accepts again the rate climbs back
// fast towards what the store took before — half of it within 5 s — and
// on to the ramp.
func TestOutageHalvesAndClimbsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		acceptFor(b, 500, 50, 3*time.Second)
		for range 30 {
			taken := time.Now()
			time.Sleep(2 * time.Second)
			b.PushedBack(taken)
		}
		if got := b.Limit(); got != 25 {
			t.Errorf("after a minute of refusals: %v, want the floor, 25", got)
		}
		back := time.Now()
		var at5 float64
		for b.Limit() < 500 && time.Since(back) < time.Minute {
			if _, err := b.Wait(context.Background(), 50); err != nil {
				t.Fatal(err)
			}
			b.Accepted(50)
			if at5 == 0 && time.Since(back) >= 5*time.Second {
				at5 = b.Limit()
			}
		}
		if at5 < 0.5*0.95*500 {
			t.Errorf("5 s after the store accepts again: %v, want half the 475/s plateau at least", at5)
		}
		if got := b.Limit(); got != 500 {
			t.Errorf("a minute after the store accepts again: %v, want 500", got)
		}
		t.Logf("5 s after the outage: %.0f/s; back to 500 after %s", at5, time.Since(back))
	})
}

func TestWaitEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(Fixed(10), 1)
		defer begin(b)()
		cause := errors.New("stopped")
		ctx, cancel := context.WithCancelCause(context.Background())
		time.AfterFunc(time.Second, func() { cancel(cause) })
		// 100 writes at 10/s: 10 s, but the context ends after 1.
		waited, err := b.Wait(ctx, 100)
		if !errors.Is(err, cause) {
			t.Errorf("Wait = %v, want the context's cause", err)
		}
		if waited != time.Second {
			t.Errorf("waited %s, want 1s", waited)
		}
	})
}

// begin begins a write too large to be whole: it is paced.
func begin(b *Budget) (end func()) {
	end, _ = b.Begin(math.MaxInt)
	return end
}

// A write that begins alone and fits in one second of the rate takes its
// writes at once (the application's 132 districts are not paced), and
// the writes that follow pay its debt; one that does not fit, or that
// begins beside another, or after a push-back, is paced.
func TestWholeWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		end, whole := b.Begin(132)
		if !whole {
			t.Fatal("a write of 132 at 500/s is not whole")
		}
		t0 := time.Now()
		b.Take(50)
		b.Take(50)
		b.Take(32)
		if time.Since(t0) != 0 {
			t.Error("Take waited")
		}
		// A second write beside it is paced, and pays the first's debt:
		// 132 writes taken, a bucket of 50, so the next 50 are due
		// (132 - 50 + 50) / 500 s later.
		end2, whole2 := b.Begin(10)
		if whole2 {
			t.Error("a write beside another is whole")
		}
		if waited, _ := b.Wait(context.Background(), 50); waited != 264*time.Millisecond {
			t.Errorf("the next 50 waited %s, want 264ms", waited)
		}
		end2()
		end()
		if _, whole := b.Begin(501); whole {
			t.Error("a write of 501 at 500/s is whole")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 4)
		if _, whole := b.Begin(132); whole {
			t.Error("132 writes with a share of 125/s is whole")
		}
	})
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		b.PushedBack(time.Now())
		if _, whole := b.Begin(132); whole {
			t.Error("a write under push-back is whole")
		}
	})
}
