package snapshot

import "context"

// withBeforeChunks runs fn between the root commit and the first chunk, so
// tests can stall a writer there (a GC pause, a partition).
func withBeforeChunks(fn func(wctx context.Context)) Option {
	return func(c *config) { c.beforeChunks = fn }
}
