package snapshot

import (
	"time"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot/internal/layout"
)

// rootInput is what a write builds its documents from (layout.Input),
// with what the write does with it: the chunks' operations and documents
// (chunk.go), the fence check (fence.go), the repair's decisions
// (repair.go), the plan's and the prune's roots.
type rootInput struct {
	layout.Input
	// gate is the gate's record of a write it let through by the closing
	// rule, which the root transaction writes beside the root; nil for
	// any other.
	gate *layout.GateRecord
}

// paginate decides the form of in's manifest from the estimated root
// (layout.Input.Paginate) by the writer's threshold and page size.
func (w *Writer) paginate(in *rootInput) {
	in.Paginate(w.cfg.pageThreshold, w.cfg.pageSize)
}

// buildInput is layout.NewInput for this writer's lock backend.
func (w *Writer) buildInput(id string, snap *model.Snapshot, prep model.Prepared, stamp layout.Stamp, start time.Time) (rootInput, error) {
	in, err := layout.NewInput(id, snap, prep, stamp, w.lockName, start)
	return rootInput{Input: in}, err
}
