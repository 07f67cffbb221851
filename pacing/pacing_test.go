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

func TestPushBackHalvesAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		sent := time.Now()
		time.Sleep(10 * time.Millisecond)
		if !b.PushedBack(sent) {
			t.Fatal("first push-back did not cut")
		}
		if got := b.Limit(); got != 250 {
			t.Fatalf("after one cut: %v, want 250", got)
		}
		// Answers to commits sent before the cut say nothing new.
		if b.PushedBack(sent) {
			t.Error("a push-back to a commit sent before the cut cut again")
		}
		if got := b.Limit(); got != 250 {
			t.Errorf("after a stale push-back: %v, want 250", got)
		}
		// Time alone raises nothing ...
		time.Sleep(10 * time.Second)
		if got := b.Limit(); got != 250 {
			t.Errorf("10 s after the cut, nothing accepted: %v, want 250", got)
		}
		// ... a second's worth of accepted writes (250 at 250/s) raises
		// it by 50 writes/s (10 % of 500) ...
		b.Accepted(250)
		if got := b.Limit(); math.Abs(got-300) > 1e-6 {
			t.Errorf("after 250 accepted writes: %v, want 300", got)
		}
		// ... up to the ramp, where the ceiling is lifted.
		for range 10 {
			b.Accepted(500)
		}
		if got := b.Limit(); got != 500 {
			t.Errorf("after 5,000 more accepted writes: %v, want 500", got)
		}
		st := b.Stats()
		if st.PushBacks != 2 || st.Cuts != 1 || st.MinLimit != 250 {
			t.Errorf("stats %+v: want 2 push-backs, 1 cut, min 250", st)
		}
	})
}

func TestPushBackHoldsAtTheFloor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := New(DefaultRamp(), 1)
		defer begin(b)()
		// A store that refuses everything for a minute: every attempt is
		// refused, one every 2 s.
		for range 30 {
			sent := time.Now()
			time.Sleep(2 * time.Second)
			b.PushedBack(sent)
		}
		if got := b.Limit(); got != 25 {
			t.Errorf("after a minute of refusals: %v, want the floor, 25", got)
		}
		// Then it accepts again: each commit of 50 it accepts raises the
		// rate, back to 500 within 3,000 writes (about 10 s of them).
		t0, writes := time.Now(), 0
		for b.Limit() < 500 && writes < 3000 {
			if _, err := b.Wait(context.Background(), 50); err != nil {
				t.Fatal(err)
			}
			b.Accepted(50)
			writes += 50
		}
		if got := b.Limit(); got != 500 {
			t.Errorf("after %d accepted writes: %v, want 500", writes, got)
		}
		t.Logf("recovered from the floor in %s, %d writes", time.Since(t0), writes)
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
