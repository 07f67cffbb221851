package backfill

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/snapwriter/snapwriter/outcome"
)

// Report is what a backfill task reports when it is done: its shard, the
// counts of its dates by outcome, and each date with the exit code a write
// of that date alone would have ended with. Its JSON form is the CLI's
// `backfill --json` summary, a contract for the scripts that read it.
type Report struct {
	TaskIndex  int          `json:"taskIndex"`
	TaskCount  int          `json:"taskCount"`
	Complete   int          `json:"complete"`
	Partial    int          `json:"partial"`
	Failed     int          `json:"failed"`
	Skipped    int          `json:"skipped"`
	NotStarted int          `json:"notStarted"`
	NotReady   int          `json:"notReady"`
	Held       int          `json:"held"`
	ExitCode   int          `json:"exitCode"` // the worst date's
	Dates      []DateReport `json:"dates"`
}

// DateReport is one date's line of a Report.
type DateReport struct {
	Date             string          `json:"date"`
	Outcome          outcome.Outcome `json:"outcome"`
	ExitCode         int             `json:"exitCode"`
	Fence            string          `json:"fence,omitempty"`
	DistrictsWritten int             `json:"districtsWritten"`
	FailedDistricts  []string        `json:"failedDistricts,omitempty"`
	DurationMs       int64           `json:"durationMs"`
	Error            string          `json:"error,omitempty"`
}

// NewReport is the Report of s for the task shard; exit gives a date's
// exit code (the caller's contract), and the Report's is that of s.Worst.
func NewReport(s *Summary, shard Shard, exit func(DateResult) int) Report {
	rep := Report{TaskIndex: shard.Index, TaskCount: shard.Count, Complete: s.Complete, Partial: s.Partial,
		Failed: s.Failed, Skipped: s.Skipped, NotStarted: s.NotStarted, NotReady: s.NotReady, Held: s.Held, Dates: make([]DateReport, 0, len(s.Dates))}
	if worst, ok := s.Worst(); ok {
		rep.ExitCode = exit(worst)
	}
	for _, r := range s.Dates {
		d := DateReport{Date: r.Date, Outcome: r.Outcome, ExitCode: exit(r), Fence: r.Fence, DistrictsWritten: r.DistrictsWritten,
			FailedDistricts: r.FailedDistricts, DurationMs: r.Duration.Milliseconds()}
		if r.Err != nil {
			d.Error = r.Err.Error()
		}
		rep.Dates = append(rep.Dates, d)
	}
	return rep
}

// Counts is the one-line account of the dates: "N complete, N partial,
// N failed, N skipped, N not started", and ", N not ready" and ", N held"
// when there are any.
func (r *Report) Counts() string {
	s := fmt.Sprintf("%d complete, %d partial, %d failed, %d skipped, %d not started",
		r.Complete, r.Partial, r.Failed, r.Skipped, r.NotStarted)
	if r.NotReady > 0 {
		s += fmt.Sprintf(", %d not ready", r.NotReady)
	}
	if r.Held > 0 {
		s += fmt.Sprintf(", %d held", r.Held)
	}
	return s
}

// WriteTable writes r as a table of its dates followed by the task's
// counts.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DATE\tOUTCOME\tDISTRICTS\tFAILED\tFENCE\tERROR")
	for _, d := range r.Dates {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", d.Date, d.Outcome, d.DistrictsWritten, len(d.FailedDistricts), d.Fence, d.Error)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "task %d/%d: %s\n", r.TaskIndex, r.TaskCount, r.Counts())
	return err
}
