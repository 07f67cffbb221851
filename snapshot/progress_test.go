package snapshot

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// counter is a Progress that sums what it is told, and fails the test if
// two Adds ever overlap (the feed promises one at a time).
type counter struct {
	t     *testing.T
	mu    sync.Mutex
	busy  bool
	n     int
	calls int
	first int // the first Add's n
	// started: an Add has begun
	started bool
	// block, if set, is waited on in every Add.
	block chan struct{}
	// entered is closed at the first Add, when set.
	entered chan struct{}
}

func (c *counter) Add(n int) error {
	c.mu.Lock()
	if c.busy {
		c.t.Error("two Adds at once")
	}
	c.busy = true
	if c.calls == 0 && !c.started {
		c.started, c.first = true, n
		if c.entered != nil {
			close(c.entered)
		}
	}
	c.mu.Unlock()
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	c.n += n
	c.calls++
	return nil
}

func (c *counter) total() (n, calls int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n, c.calls
}

// Many chunks counting at once: every count arrives, in Adds one at a
// time, all of them before stop returns.
func TestProgressFeedConcurrent(t *testing.T) {
	t.Parallel()
	c := &counter{t: t}
	f := startProgress(c)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 500 {
				f.add(3)
			}
		})
	}
	wg.Wait()
	f.settle(10) // below the count: changes nothing
	f.stop()
	if n, calls := c.total(); n != 64*500*3 || calls == 0 {
		t.Errorf("Progress got %d in %d Adds, want %d", n, calls, 64*500*3)
	}
	var none *progressFeed // no Progress: counting is a no-op
	none.add(1)
	none.settle(2)
	none.stop()
}

// A Progress that never returns does not hold up the chunks: add neither
// waits nor allocates, and what piles up arrives in one Add.
func TestProgressFeedNeverBlocks(t *testing.T) {
	t.Parallel()
	c := &counter{t: t, block: make(chan struct{}), entered: make(chan struct{})}
	f := startProgress(c)
	f.add(1)
	<-c.entered // the feed's goroutine is stuck in Add(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 10000 {
			f.add(1)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("add waited for a blocked Progress")
	}
	close(c.block)
	f.settle(20200)
	f.stop()
	if n, calls := c.total(); n != 20200 || calls > 4 {
		t.Errorf("Progress got %d in %d Adds, want 20200 in at most 4", n, calls)
	}
}

// Counting a chunk's districts allocates nothing. Not parallel:
// AllocsPerRun counts the whole process's allocations.
func TestProgressAddAllocs(t *testing.T) {
	c := &counter{t: t, block: make(chan struct{}), entered: make(chan struct{})}
	f := startProgress(c)
	f.add(1)
	<-c.entered // the feed's goroutine waits in Add: only add is measured
	if a := testing.AllocsPerRun(1000, func() { f.add(50) }); a != 0 {
		t.Errorf("add allocates %v times", a)
	}
	close(c.block)
	f.stop()
}

// The counts a Progress gets on a complete write, a partial one and the
// repair that completes it: districts as their chunks commit, the repair's
// kept ones included, so that a complete snapshot reaches the input's
// count and a partial one stops short by the districts not written.
func TestProgressCounts(t *testing.T) {
	t.Parallel()
	eachForm(t, func(t *testing.T, e *env) {
		in := gen(132, 7)
		// Chunks of 5 districts, 8 at once: 27 chunks counting concurrently.
		many := []Option{WithBatchSize(5), WithConcurrency(8)}
		c := &counter{t: t}
		res := mustWrite(t, e.writer(append(many, WithProgress(c))...), day, in)
		if n, _ := c.total(); n != 132 || res.DistrictsWritten != 132 {
			t.Errorf("complete write: Progress got %d, Result says %d written; want 132", n, res.DistrictsWritten)
		}

		other := gen(132, 8) // another export: written whole
		e.deny(layout.DistrictIDs(other)[60])
		c = &counter{t: t}
		res = mustPartial(t)(e.writer(append(many, WithProgress(c))...).Write(context.Background(), day, other))
		if n, _ := c.total(); n != res.DistrictsWritten || n != 132-5 {
			t.Errorf("partial write: Progress got %d, Result says %d written; want 127 (a chunk of 5 failed)", n, res.DistrictsWritten)
		}

		e.f.setRule(nil)
		c = &counter{t: t}
		rep, err := e.writer(append(many, WithProgress(c))...).Repair(context.Background(), day, other)
		if err != nil || rep.Outcome != OutcomeComplete {
			t.Fatalf("Repair = %s, %v", brief(rep), err)
		}
		if n, _ := c.total(); n != 132 || rep.DistrictsWritten != 5 || rep.DistrictsKept != 127 {
			t.Errorf("repair: Progress got %d (written %d, kept %d); want 132", n, rep.DistrictsWritten, rep.DistrictsKept)
		}
		// The kept districts are counted as soon as they are known, before
		// the chunk, not only when the repair ends.
		if c.first < 127 || c.first == 132 {
			t.Errorf("repair: first Add(%d), want the 127 kept districts before the last chunk's", c.first)
		}

		// A complete snapshot left alone counts as done.
		c = &counter{t: t}
		if rep, err := e.writer(WithProgress(c)).Repair(context.Background(), day, other); err != nil || rep.Outcome != OutcomeSkipped {
			t.Fatalf("second Repair = %s, %v; want skipped", brief(rep), err)
		}
		if n, _ := c.total(); n != 132 {
			t.Errorf("skipped repair: Progress got %d, want 132", n)
		}
	})
}

// A Progress that stalls does not stall the write: every chunk commits
// while its first Add is stuck, and Write returns only once the Add has.
func TestSlowProgressDoesNotStallChunks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c := &counter{t: t, block: make(chan struct{}), entered: make(chan struct{})}
	in := gen(132, 3)
	done := make(chan error, 1)
	go func() {
		_, err := e.writer(WithBatchSize(10), WithConcurrency(4), WithProgress(c)).Write(context.Background(), day, in)
		done <- err
	}()
	<-c.entered
	if c.first >= 132 {
		t.Errorf("first Add(%d): want a chunk's count, not the whole write's at its end", c.first)
	}
	districts := e.clean.Collection(DefaultCollection).Doc(day).Collection("districts")
	stored := func() int {
		docs, err := districts.Select().Documents(context.Background()).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		return len(docs)
	}
	deadline := time.Now().Add(time.Minute)
	for n := stored(); n < 132; n = stored() {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of 132 districts stored while the Progress is stuck", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("Write returned (%v) before its Progress's Add did", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(c.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n, _ := c.total(); n != 132 {
		t.Errorf("Progress got %d, want 132", n)
	}
}

// BenchmarkProgressAdd is what counting a committed chunk costs it, from
// many chunks at once, with a Progress that is slow to draw.
func BenchmarkProgressAdd(b *testing.B) {
	f := startProgress(progressFunc(func(int) { time.Sleep(time.Millisecond) }))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f.add(50)
		}
	})
	f.stop()
}

// progressFunc is a func as a Progress (tests).
type progressFunc func(n int)

func (p progressFunc) Add(n int) error { p(n); return nil }
