package snapshot

// Batch 0 of a Result is the root document's transaction, and the
// batches after it are the district chunks. Counting them together made
// callers print TotalBatches-1 chunks; Result counts the chunks on their
// own, and Root reports the root.

// countChunks fills res's chunk counts from its batch results: every
// batch but the root's (batch 0).
func countChunks(res *Result) {
	res.Chunks, res.SuccessfulChunks, res.FailedChunks = 0, 0, 0
	for _, b := range res.BatchResults {
		if b.BatchIndex == 0 {
			continue
		}
		res.Chunks++
		if b.Success {
			res.SuccessfulChunks++
		} else {
			res.FailedChunks++
		}
	}
}

// Root is the result of the write's root transaction (batch 0 of
// BatchResults, which commits the root document before any district);
// ok is false when it never ran (a skipped write, or one stopped before
// it).
func (r *Result) Root() (root BatchResult, ok bool) {
	if len(r.BatchResults) == 0 || r.BatchResults[0].BatchIndex != 0 {
		return BatchResult{}, false
	}
	return r.BatchResults[0], true
}
