package snapshot

import (
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// inputPath is what a write does with its input before it takes the
// lock and builds its documents: validate it and summarize its districts
// (model.PrepareWrite), build the root's input from the summaries
// (buildInput) and choose the manifest's form (paginate).
func inputPath(w *Writer, s *model.Snapshot) (rootInput, error) {
	prep, err := model.PrepareWrite(s, day)
	if err != nil {
		return rootInput{}, err
	}
	in, err := w.buildInput(day, s, prep, layout.Stamp{WriterFence: "000000000000001", WriterLockKeyHash: "0123456789abcdef01234567"}, time.Unix(0, 0))
	if err != nil {
		return rootInput{}, err
	}
	w.paginate(&in)
	return in, nil
}

// inputWriter is a Writer that only builds inputs (inputPath): no client,
// the default manifest pages.
func inputWriter() *Writer {
	return &Writer{lockName: "firestore", cfg: config{pageThreshold: layout.DefaultPageThreshold, pageSize: layout.DefaultPageSize}}
}

// BenchmarkInputPath measures inputPath on 5,000 generated districts held
// in memory: the validating walk of every district's data, the
// districts' summaries, the root's estimate. allocs/op over 5,000 is the
// allocations per district; cpu-ns/op (measureCPU) is the figure to
// compare on a shared machine.
func BenchmarkInputPath(b *testing.B) {
	s := model.Generate(day, 5000, 1)
	w := inputWriter()
	measureCPU(b, func() {
		if _, err := inputPath(w, s); err != nil {
			b.Fatal(err)
		}
	})
}
