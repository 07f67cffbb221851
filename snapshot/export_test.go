package snapshot

import "context"

// withBeforeChunks runs fn between the root commit and the first chunk, so
// tests can stall a writer there (a GC pause, a partition).
func withBeforeChunks(fn func(wctx context.Context)) Option {
	return func(c *config) { c.beforeChunks = fn }
}

// withPages sets the largest estimated root kept inline (threshold bytes;
// 0 pages every snapshot) and the entries per manifest page, so that tests
// of a few districts run on the paged manifest.
func withPages(threshold, size int) Option {
	return func(c *config) { c.pageThreshold, c.pageSize = threshold, size }
}
