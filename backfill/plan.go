package backfill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/snapwriter/snapwriter/input"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// PlanReport is a backfill's dry run: the plan of every date of the task,
// oldest first. Its JSON form is `backfill --dry-run --json`.
type PlanReport struct {
	TaskIndex int              `json:"taskIndex"`
	TaskCount int              `json:"taskCount"`
	Dates     []*snapshot.Plan `json:"dates"`
}

// Plan is the dry run of a backfill of inputs (after Select and Check) for
// the task shard, inputs read through l: each date's snapshot.Plan, from p (a planner with
// snapshot.WithSkipComplete as the backfill's --skip-complete), in the
// order Run writes them. A date in complete (the --skip-complete listing)
// is planned as skipped without reading its input, as Run skips it. An
// input that became unreadable since Check, or a plan that fails, stops
// the dry run with that date's error.
func Plan(ctx context.Context, l *input.Loader, inputs []Input, complete map[string]string, shard Shard, p *snapshot.Planner) (*PlanReport, error) {
	rep := &PlanReport{TaskIndex: shard.Index, TaskCount: shard.Count, Dates: make([]*snapshot.Plan, 0, len(inputs))}
	for _, in := range inputs {
		var pl *snapshot.Plan
		var err error
		if _, done := complete[in.Date]; done {
			pl, err = p.Skipped(in.Date, "complete in Firestore, and complete dates are skipped")
		} else {
			pl, err = planDate(ctx, l, in, p)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", in.Date, err)
		}
		rep.Dates = append(rep.Dates, pl)
	}
	return rep, nil
}

// planDate plans the write of one date's input.
func planDate(ctx context.Context, l *input.Loader, in Input, p *snapshot.Planner) (*snapshot.Plan, error) {
	snap, err := loaderOf(l).LoadDated(ctx, in.Path, in.Date)
	if errors.Is(err, model.ErrNotReady) {
		return p.Skipped(in.Date, "input not ready: "+err.Error())
	}
	if err != nil {
		return nil, err
	}
	defer snap.Close()
	return p.Plan(ctx, in.Date, snap)
}

// WriteTable writes r as a table, a date a line, and the totals.
func (r *PlanReport) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tACTION\tSTORED\tDISTRICTS\tTO WRITE\tCHUNKS\tMANIFEST\tROOT BYTES\tLOCK KEY HASH")
	var districts, chunks, writes int
	for _, p := range r.Dates {
		form := p.Manifest.Form
		if p.Manifest.Form == snapshot.ManifestPages {
			form = plural.N(p.Manifest.Pages, "page")
		}
		root := fmt.Sprint(p.RootBytes)
		if p.Action == snapshot.PlanSkip {
			form, root = "-", "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", p.SnapshotID, p.Action, p.Stored, p.Districts, p.DistrictsToWrite,
			p.Chunks, form, root, p.Lock.KeyHash)
		districts += p.DistrictsToWrite
		chunks += p.Chunks
		if p.Action != snapshot.PlanSkip {
			writes++
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "task %d/%d (dry run: nothing written, no lock taken): %s, %d to write, %s in %s\n",
		r.TaskIndex, r.TaskCount, plural.N(len(r.Dates), "date"), writes, plural.N(districts, "district"), plural.N(chunks, "chunk"))
	return err
}
