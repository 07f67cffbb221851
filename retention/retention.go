// Package retention deletes old snapshots: a Policy (keep rules with
// restic forget's meaning, or a plain cutoff) gives every dated snapshot
// its verdict, never pruning the newest complete one; a Report prunes the
// selected ones one at a time with a snapshot.Writer, oldest first, and
// reports how each went, in package outcome's words (backfill reports its
// dates in the same ones), with the kept ones and the rules that keep
// them. The CLI's `prune` prints the Report.
package retention

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// Date is one selected date of a Report.
type Date struct {
	SnapshotID string                `json:"snapshotId"`
	State      snapshot.State        `json:"state"`
	Districts  int                   `json:"districts"`
	Outcome    outcome.Outcome       `json:"outcome"`
	Error      string                `json:"error,omitempty"`
	Result     *snapshot.PruneResult `json:"result,omitempty"`
}

// Report is a prune's plan and, once Run, what came of each date. Its
// JSON form is the CLI's `prune --json` output.
type Report struct {
	// Before is the plan's Cutoff: the date before which every snapshot is
	// pruned, when the policy is a plain cutoff (Before, or KeepDays
	// alone); absent when a period rule is given.
	Before string `json:"before,omitempty"`
	Policy Policy `json:"policy"`
	// Today is the date KeepDays counted from, in TimeZone.
	Today          string `json:"today"`
	TimeZone       string `json:"timeZone"`
	DryRun         bool   `json:"dryRun"`
	NewestComplete string `json:"newestComplete,omitempty"`
	// Snapshots are the dates selected to be pruned, oldest first.
	Snapshots []Date `json:"snapshots"`
	// Kept are the dates kept, oldest first, each with its reasons.
	Kept []Verdict `json:"kept"`
	// ExitCode is the caller's code for the worst outcome (see Worst).
	ExitCode int `json:"exitCode"`
}

// NewReport is the report of plan before anything is pruned: every
// pruned date outcome.WouldPrune.
func NewReport(plan Plan, dryRun bool) *Report {
	r := &Report{Before: plan.Cutoff, Policy: plan.Policy, Today: plan.Today, TimeZone: plan.TimeZone, DryRun: dryRun,
		NewestComplete: plan.NewestComplete, Snapshots: []Date{}, Kept: plan.Kept()}
	for _, v := range plan.Pruned() {
		r.Snapshots = append(r.Snapshots, Date{SnapshotID: v.SnapshotID, State: v.State, Districts: v.Districts, Outcome: outcome.WouldPrune})
	}
	return r
}

// Pruner prunes one snapshot; *snapshot.Writer is one.
type Pruner interface {
	Prune(ctx context.Context, id string) (*snapshot.PruneResult, error)
}

// Run prunes the report's dates in turn, oldest first, recording each
// outcome; describe words a date's error for the report (nil: its
// Error()). Once ctx ends, no further date starts.
func (r *Report) Run(ctx context.Context, p Pruner, describe func(error) string) {
	if describe == nil {
		describe = func(err error) string { return err.Error() }
	}
	for i := range r.Snapshots {
		d := &r.Snapshots[i]
		if ctx.Err() != nil {
			d.Outcome, d.Error = outcome.NotStarted, context.Cause(ctx).Error()
			continue
		}
		res, err := p.Prune(ctx, d.SnapshotID)
		d.Result, d.Outcome = res, outcomeOf(res, err)
		if err != nil {
			d.Error = describe(err)
		}
	}
}

// outcomeOf is the outcome of a Prune that returned res and err: pruned
// or gone, else as the error says (outcome.Of: kept for
// snapshot.ErrNewestComplete).
func outcomeOf(res *snapshot.PruneResult, err error) outcome.Outcome {
	switch {
	case err == nil && res != nil && !res.Found:
		return outcome.Gone
	case err == nil:
		return outcome.Pruned
	}
	return outcome.Of(err)
}

// Worst is the outcome of the highest Severity, outcome.Pruned when there
// are no dates or none is worse.
func (r *Report) Worst() outcome.Outcome {
	worst := outcome.Pruned
	for _, d := range r.Snapshots {
		if d.Outcome.Severity() > worst.Severity() {
			worst = d.Outcome
		}
	}
	return worst
}

// Count is how many dates ended in each outcome.
func (r *Report) Count() map[outcome.Outcome]int {
	n := map[outcome.Outcome]int{}
	for _, d := range r.Snapshots {
		n[d.Outcome]++
	}
	return n
}

// WriteText writes the report as text, as restic forget does: the
// policy, a table of the kept dates with the rules that keep each, then
// one of the selected dates with their outcomes, then each date's error.
func (r *Report) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "policy: %s (today %s, %s)", r.Policy, r.Today, r.TimeZone)
	if r.NewestComplete != "" {
		fmt.Fprintf(w, "; newest complete snapshot %s", r.NewestComplete)
	}
	fmt.Fprintf(w, "\nkeep %s", plural.N(len(r.Kept), "snapshot"))
	if len(r.Kept) > 0 {
		fmt.Fprintln(w, ":")
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "DATE\tSTATE\tDISTRICTS\tREASONS")
		for _, k := range r.Kept {
			reasons := make([]string, len(k.Reasons))
			for i, why := range k.Reasons {
				reasons[i] = string(why)
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", k.SnapshotID, k.State, k.Districts, strings.Join(reasons, ", "))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(w)
	}
	dated := ""
	if r.Before != "" {
		dated = " dated before " + r.Before
	}
	if r.DryRun {
		fmt.Fprintf(w, "dry run: would delete %s%s", plural.N(len(r.Snapshots), "snapshot"), dated)
	} else {
		fmt.Fprintf(w, "prune: %s%s selected", plural.N(len(r.Snapshots), "snapshot"), dated)
	}
	if len(r.Snapshots) == 0 {
		_, err := fmt.Fprintln(w, "; nothing to prune")
		return err
	}
	fmt.Fprintln(w, ":")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tSTATE\tDISTRICTS\tOUTCOME\tDOCUMENTS DELETED")
	for _, d := range r.Snapshots {
		docs := "-"
		if res := d.Result; res != nil && res.Found {
			n := res.DistrictsDeleted + res.PagesDeleted + res.OtherDeleted
			if res.RootDeleted {
				n += 2 // the fence document and the root
			}
			docs = fmt.Sprint(n)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", d.SnapshotID, d.State, d.Districts, d.Outcome, docs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, d := range r.Snapshots {
		if d.Error != "" {
			if _, err := fmt.Fprintf(w, "  %s %s: %s\n", d.SnapshotID, d.Outcome, d.Error); err != nil {
				return err
			}
		}
	}
	if r.DryRun {
		_, err := fmt.Fprintln(w, "nothing was deleted (--dry-run)")
		return err
	}
	return nil
}
