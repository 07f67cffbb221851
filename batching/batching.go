// Package batching splits writes into commits Firestore accepts and runs
// them with bounded concurrency. It knows nothing of documents: callers say
// what an item costs and what a chunk does.
package batching

import (
	"context"
	"fmt"

	"golang.org/x/sync/errgroup"
)

// Limits bound one chunk.
type Limits struct {
	MaxOps   int // operations per chunk
	MaxBytes int // encoded bytes per chunk
}

// DefaultLimits are the spec's 50 operations, and 9 MiB so a chunk stays
// clear of Firestore's 10 MiB request limit.
func DefaultLimits() Limits { return Limits{MaxOps: 50, MaxBytes: 9 << 20} }

// Plan splits items, in order, into consecutive chunks of at most MaxOps
// operations and MaxBytes bytes, where size gives an item's cost. Each chunk
// is filled as far as the limits allow. An item that alone exceeds a limit
// is an error, since no chunk could hold it.
func Plan[T any](items []T, size func(T) (ops, bytes int), lim Limits) ([][]T, error) {
	if lim.MaxOps < 1 || lim.MaxBytes < 1 {
		return nil, fmt.Errorf("batching: limits %+v must be positive", lim)
	}
	var chunks [][]T
	start, ops, bytes := 0, 0, 0
	for i, it := range items {
		o, b := size(it)
		if o > lim.MaxOps || b > lim.MaxBytes {
			return nil, fmt.Errorf("batching: item %d needs %d operations and %d bytes, over the chunk limit of %d and %d",
				i, o, b, lim.MaxOps, lim.MaxBytes)
		}
		if i > start && (ops+o > lim.MaxOps || bytes+b > lim.MaxBytes) {
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

// Run calls fn for every chunk, at most concurrency at a time, starting the
// next chunk as soon as any running one ends, and returns the results in
// chunk order. fn runs for every chunk even when ctx has ended, so it can
// record the chunk as not attempted; a chunk's failure is its result, and
// never stops the others.
func Run[T, R any](ctx context.Context, chunks [][]T, concurrency int, fn func(ctx context.Context, i int, chunk []T) R) []R {
	results := make([]R, len(chunks))
	// A plain errgroup.Group, not WithContext: no chunk cancels another.
	var g errgroup.Group
	g.SetLimit(max(concurrency, 1))
	for i, c := range chunks {
		g.Go(func() error {
			results[i] = fn(ctx, i, c)
			return nil
		})
	}
	_ = g.Wait() // the goroutines return nil
	return results
}
