// Package batching splits writes into commits Firestore accepts and runs
// them with bounded concurrency. It knows nothing of documents: callers say
// what an item costs and what a chunk does.
package batching

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"

	"github.com/snapwriter/snapwriter/internal/safego"
)

// Limits bound one chunk.
type Limits struct {
	MaxOps   int // operations per chunk
	MaxBytes int // encoded bytes per chunk
}

// DefaultLimits are 50 operations a chunk, so each commit ends well inside
// Firestore's RPC deadline (its 500-operation limit is not what bites), and
// 9 MiB, so a chunk stays clear of Firestore's 10 MiB request limit.
func DefaultLimits() Limits { return Limits{MaxOps: 50, MaxBytes: 9 << 20} }

// Plan splits items, in order, into consecutive chunks of at most MaxOps
// operations and MaxBytes bytes, where size gives an item's cost. Each chunk
// is filled as far as the limits allow (greedy), and none is empty; no items
// gives no chunks. Chunks share items' backing array but are capped, so
// appending to one never overwrites the next. Invalid limits, a negative
// size, and an item that alone exceeds a limit (no chunk could hold it) are
// errors naming the item.
func Plan[T any](items []T, size func(T) (ops, bytes int), lim Limits) ([][]T, error) {
	if lim.MaxOps < 1 || lim.MaxBytes < 1 {
		return nil, fmt.Errorf("batching: limits %+v must be positive", lim)
	}
	var chunks [][]T
	start, ops, bytes := 0, 0, 0
	for i, it := range items {
		o, b := size(it)
		if o < 0 || b < 0 {
			return nil, fmt.Errorf("batching: item %d has a negative size (%d operations, %d bytes)", i, o, b)
		}
		if o > lim.MaxOps || b > lim.MaxBytes {
			return nil, fmt.Errorf("batching: item %d needs %d operations and %d bytes, over the chunk limit of %d and %d",
				i, o, b, lim.MaxOps, lim.MaxBytes)
		}
		// Compared as remaining room, not as sums, so limits near
		// math.MaxInt cannot overflow.
		if i > start && (o > lim.MaxOps-ops || b > lim.MaxBytes-bytes) {
			chunks = append(chunks, items[start:i:i])
			start, ops, bytes = i, 0, 0
		}
		ops += o
		bytes += b
	}
	if start < len(items) {
		chunks = append(chunks, items[start:len(items):len(items)])
	}
	return chunks, nil
}

// Run calls fn(ctx, i, chunks[i]) for every chunk, at most concurrency at a
// time (less than 1 means 1), starting the next chunk as soon as any running
// one ends, and returns the results in chunk order. fn runs for every chunk
// even when ctx has ended, so it can record the chunk as not attempted; a
// chunk's failure is its result, and never stops the others. fn must be
// safe to call from several goroutines.
func Run[T, R any](ctx context.Context, chunks [][]T, concurrency int, fn func(ctx context.Context, i int, chunk []T) R) []R {
	results := make([]R, len(chunks))
	// A plain errgroup.Group, not WithContext: no chunk cancels another.
	var g errgroup.Group
	g.SetLimit(max(concurrency, 1))
	for i, c := range chunks {
		g.Go(safego.Func(func() error {
			results[i] = fn(ctx, i, c)
			return nil
		}))
	}
	safego.Repanic(g.Wait()) // the goroutines return nil; a panic is raised again here, in the caller
	return results
}
