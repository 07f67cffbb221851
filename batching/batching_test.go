package batching

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"pgregory.net/rapid"
)

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func one(int) (int, int) { return 1, 100 }

// Chunks hold at most 50 operations and there are ⌈n/50⌉ of them (the
// root is written on its own before them).
func TestPlanCounts(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 1, 49: 1, 50: 1, 51: 2, 100: 2, 101: 3, 132: 3, 5000: 100} {
		chunks, err := Plan(seq(n), one, DefaultLimits())
		if err != nil || len(chunks) != want {
			t.Errorf("n=%d: %d chunks, %v; want %d", n, len(chunks), err, want)
		}
		for _, c := range chunks {
			if len(c) > 50 || len(c) == 0 {
				t.Errorf("n=%d: chunk of %d", n, len(c))
			}
		}
	}
}

func TestPlanByBytes(t *testing.T) {
	mib := func(int) (int, int) { return 1, 1 << 20 }
	chunks, err := Plan(seq(10), mib, DefaultLimits())
	if err != nil || len(chunks) != 2 || len(chunks[0]) != 9 || len(chunks[1]) != 1 {
		t.Fatalf("chunks %v, %v; want 9 + 1", chunks, err)
	}
	_, err = Plan(seq(3), func(i int) (int, int) { return 1, 10 << 20 }, DefaultLimits())
	if err == nil || !strings.Contains(err.Error(), "item 0") {
		t.Errorf("oversize item: %v", err)
	}
	for _, lim := range []Limits{{0, 1}, {1, 0}, {-1, -1}} {
		if _, err := Plan(seq(3), one, lim); err == nil {
			t.Errorf("limits %+v accepted", lim)
		}
	}
}

// Every item lands in exactly one chunk, in order; every chunk is within
// the limits and full (the next item would not have fitted).
func TestPropertyPlan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		lim := Limits{MaxOps: rapid.IntRange(1, 60).Draw(rt, "ops"), MaxBytes: rapid.IntRange(1, 5000).Draw(rt, "bytes")}
		type item struct{ ops, bytes int }
		items := rapid.SliceOf(rapid.Custom(func(t *rapid.T) item {
			return item{rapid.IntRange(1, lim.MaxOps).Draw(t, "o"), rapid.IntRange(0, lim.MaxBytes).Draw(t, "b")}
		})).Draw(rt, "items")
		size := func(i item) (int, int) { return i.ops, i.bytes }
		chunks, err := Plan(items, size, lim)
		if err != nil {
			rt.Fatal(err)
		}
		var flat []item
		for ci, c := range chunks {
			o, b := 0, 0
			for _, it := range c {
				o, b = o+it.ops, b+it.bytes
			}
			if len(c) == 0 || o > lim.MaxOps || b > lim.MaxBytes {
				rt.Fatalf("chunk %d: %d items, %d ops, %d bytes, limits %+v", ci, len(c), o, b, lim)
			}
			if ci+1 < len(chunks) {
				next := chunks[ci+1][0]
				if o+next.ops <= lim.MaxOps && b+next.bytes <= lim.MaxBytes {
					rt.Fatalf("chunk %d could have held the next item", ci)
				}
			}
			flat = append(flat, c...)
		}
		if !slices.Equal(flat, items) {
			rt.Fatalf("items lost or reordered")
		}
	})
}

// Run keeps exactly concurrency chunks in flight and returns the results in
// chunk order. In a synctest bubble each chunk's 2 ms of work is exact, so
// n chunks take ⌈n/concurrency⌉·2 ms.
func TestRunOrderAndConcurrency(t *testing.T) {
	chunks, _ := Plan(seq(400), one, Limits{MaxOps: 10, MaxBytes: 1 << 20})
	for _, limit := range []int{1, 3, 16} {
		t.Run(fmt.Sprint(limit), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var inFlight, peak atomic.Int32
				start := time.Now()
				res := Run(context.Background(), chunks, limit, func(_ context.Context, i int, c []int) int {
					n := inFlight.Add(1)
					for {
						p := peak.Load()
						if n <= p || peak.CompareAndSwap(p, n) {
							break
						}
					}
					time.Sleep(2 * time.Millisecond)
					inFlight.Add(-1)
					return c[0]
				})
				for i, r := range res {
					if r != i*10 {
						t.Fatalf("result %d = %d: out of order", i, r)
					}
				}
				if p := peak.Load(); p != int32(limit) {
					t.Errorf("peak concurrency %d", p)
				}
				rounds := (len(chunks) + limit - 1) / limit
				if took, want := time.Since(start), time.Duration(rounds)*2*time.Millisecond; took != want {
					t.Errorf("took %s, want %s", took, want)
				}
			})
		})
	}
}

// A slow chunk holds one slot, not the window: the others start and finish
// around it, each as soon as the one before it in the free slot is done.
func TestRunIsASlidingWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		chunks := [][]int{{0}, {1}, {2}, {3}, {4}, {5}}
		start := time.Now()
		finished := Run(context.Background(), chunks, 2, func(_ context.Context, i int, _ []int) time.Duration {
			work := time.Second
			if i == 0 {
				work = 10 * time.Second
			}
			time.Sleep(work)
			return time.Since(start)
		})
		// In batches of two the last chunk would end at 12 s.
		want := []time.Duration{10 * time.Second, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5 * time.Second}
		if !slices.Equal(finished, want) {
			t.Errorf("chunks finished at %v, want %v", finished, want)
		}
	})
}

func TestRunCallsEveryChunkAfterCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	res := Run(ctx, [][]int{{1}, {2}, {3}}, 0, func(ctx context.Context, i int, _ []int) error {
		calls.Add(1)
		return ctx.Err()
	})
	if calls.Load() != 3 || len(res) != 3 || res[2] == nil {
		t.Errorf("%d calls, results %v", calls.Load(), res)
	}
}

func TestPlanRejectsNegativeSizes(t *testing.T) {
	_, err := Plan(seq(3), func(i int) (int, int) {
		if i == 2 {
			return 1, -1
		}
		return 1, 1
	}, DefaultLimits())
	if err == nil || !strings.Contains(err.Error(), "item 2") {
		t.Errorf("negative size: %v", err)
	}
}

func TestPlanHugeLimits(t *testing.T) {
	big := func(int) (int, int) { return 1, math.MaxInt / 2 }
	chunks, err := Plan(seq(5), big, Limits{MaxOps: 50, MaxBytes: math.MaxInt})
	if err != nil || len(chunks) != 3 {
		t.Errorf("chunks %v, %v; want 2+2+1", chunks, err)
	}
}

// Appending to a chunk must not write into the next one.
func TestPlanChunksAreCapped(t *testing.T) {
	items := seq(4)
	chunks, _ := Plan(items, one, Limits{MaxOps: 2, MaxBytes: 1 << 20})
	_ = append(chunks[0], 99)
	if chunks[1][0] != 2 || items[2] != 2 {
		t.Errorf("append to chunk 0 overwrote chunk 1: %v", chunks)
	}
}

// Chunk i's fn gets index i; every index is seen exactly once.
func TestRunIndexes(t *testing.T) {
	chunks := make([][]int, 20)
	for i := range chunks {
		chunks[i] = []int{i}
	}
	res := Run(context.Background(), chunks, 4, func(_ context.Context, i int, c []int) int {
		if c[0] != i {
			t.Errorf("fn(%d) got chunk %v", i, c)
		}
		return i
	})
	if !slices.Equal(res, seq(20)) {
		t.Errorf("results %v", res)
	}
	if res := Run(context.Background(), nil, 3, func(context.Context, int, []int) int { return 1 }); len(res) != 0 {
		t.Errorf("no chunks gave %v", res)
	}
}
