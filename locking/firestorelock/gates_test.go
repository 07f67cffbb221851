package firestorelock

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// One attempt at a time per document, any number on different documents;
// a wait ends with its context; a gate nobody uses is dropped.
func TestDocGates(t *testing.T) {
	t.Parallel()
	var g docGates
	var in, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			leave, err := g.enter(context.Background(), "a")
			if err != nil {
				t.Error(err)
				return
			}
			n := in.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(time.Millisecond)
			in.Add(-1)
			leave()
		})
	}
	wg.Wait()
	if m := most.Load(); m != 1 {
		t.Errorf("%d attempts on one document at once; want 1", m)
	}
	leaveA, err := g.enter(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	leaveB, err := g.enter(context.Background(), "b")
	if err != nil {
		t.Fatalf("another document waited for the first: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := g.enter(ctx, "a"); err != context.DeadlineExceeded {
		t.Errorf("enter of a busy document = %v; want its context's end", err)
	}
	leaveA()
	leaveB()
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.m) != 0 {
		t.Errorf("%d gates left after every attempt ended; want 0", len(g.m))
	}
}
