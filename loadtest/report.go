package loadtest

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"unicode/utf8"

	"github.com/snapwriter/snapwriter/internal/plural"
)

// WriteText writes the report as text: a line that says what ran, then
// the tables (WriteTables). batchSize and lockBackend are the writers',
// which the Report does not hold.
func (r *Report) WriteText(w io.Writer, batchSize int, lockBackend string) error {
	if _, err := fmt.Fprintf(w, "loadtest: %s per write into %q (snapshot %s), %s per concurrency, batch size %d, lock backend %s\n\n",
		plural.N(r.Districts, "district"), r.Collection, r.SnapshotID, plural.N(r.RoundsPerLevel, "round"), batchSize, lockBackend); err != nil {
		return err
	}
	// Run reports a level per concurrency, whatever ran.
	return r.WriteTables(w, len(r.Levels)*r.RoundsPerLevel)
}

// WriteTables writes the report as text: one row per concurrency, and its
// write rate against the budget; then one row per round in the order run,
// and its write rate; then each round's error, the cleanup, and the
// verdict (Assess). planned is how many rounds the run meant to make (to
// say how far an interrupted run got).
func (r *Report) WriteTables(w io.Writer, planned int) error {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tdistricts/s\twrite s\tchunk p50 ms\tp95 ms\tp99 ms\taborted retries\tother retries\troot commits\tlock wait ms\tfailed chunks\tpartial rounds\t")
	for _, v := range r.Levels {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%.1f\t%d\t%d\t%d/%d\t\n", v.Concurrency, v.DistrictsPerSecond, v.WriteSeconds,
			v.ChunkLatencyMs.P50, v.ChunkLatencyMs.P95, v.ChunkLatencyMs.P99, v.AbortedRetries, v.OtherRetries, v.RootCommits,
			v.LockWaitMs, v.FailedChunks, v.PartialRounds, v.Rounds)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nwrite rate against the budget, per concurrency (district writes a second; budget wait a mean per round):\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\t"+rateHeader)
	for _, v := range r.Levels {
		fmt.Fprintf(tw, "%d\t%s\n", v.Concurrency, rateRow(v.WriteRate))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nrounds, in the order run:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tround\tdistricts/s\twrite s\tchunk p50 ms\tp95 ms\tp99 ms\taborted retries\tother retries\troot commits\tlock wait ms\tfailed chunks\tresult\t")
	for _, o := range r.Rounds {
		result := "complete"
		if !o.Complete {
			result = "PARTIAL: " + strconv.Itoa(o.DistrictsWritten) + " written"
		}
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.2f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", o.Concurrency, o.Round, o.DistrictsPerSecond,
			float64(o.DurationMs)/1000, o.ChunkLatencyMs.P50, o.ChunkLatencyMs.P95, o.ChunkLatencyMs.P99, o.AbortedRetries,
			o.OtherRetries, o.RootCommits, o.LockWaitMs, o.FailedChunks, result)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\nwrite rate against the budget, per round:\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tround\tchunks s\t"+rateHeader)
	for _, o := range r.Rounds {
		fmt.Fprintf(tw, "%d\t%d\t%.2f\t%s\n", o.Concurrency, o.Round, float64(o.WriteRate.ChunkSpanMs)/1000, rateRow(o.WriteRate))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, o := range r.Rounds {
		if o.Error != "" {
			fmt.Fprintf(&b, "concurrency %d round %d: %s\n", o.Concurrency, o.Round, o.Error)
		}
	}
	if r.Interrupted {
		fmt.Fprintf(&b, "\ninterrupted after %d of %s\n", len(r.Rounds), plural.N(planned, "round"))
	}
	fmt.Fprintf(&b, "\ncleanup: deleted %s written by this run", plural.N(r.DocumentsDeleted, "document"))
	if r.LeftoversDeleted > 0 {
		fmt.Fprintf(&b, " and %d an earlier run left", r.LeftoversDeleted)
	}
	b.WriteString("\n\n")
	wrap(&b, "verdict: "+Assess(r).Text, 100)
	_, err := io.WriteString(w, b.String())
	return err
}

// rateHeader and rateRow are the write rate columns of a table.
const rateHeader = "measured/s\tbusiest 1 s\tlimit/s\tlowest limit/s\tbudget wait ms\twait %\tRESOURCE_EXHAUSTED\tABORTED\tslowdowns\t"

func rateRow(v Rate) string {
	return fmt.Sprintf("%.0f\t%d\t%.0f\t%.0f\t%d\t%.0f\t%d\t%d\t%d\t", v.MeasuredPerSec, v.BusiestSecond, v.LimitPerSec,
		v.MinLimitPerSec, v.WaitedMs, 100*v.WaitShare, v.ResourceExhausted, v.Aborted, v.Slowdowns)
}

// wrap writes text to b in lines of at most width columns where its
// words allow, each ended by a newline.
func wrap(b *strings.Builder, text string, width int) {
	n := 0
	for i, word := range strings.Fields(text) {
		switch {
		case i == 0:
		case n+1+utf8.RuneCountInString(word) > width:
			b.WriteString("\n")
			n = 0
		default:
			b.WriteString(" ")
			n++
		}
		b.WriteString(word)
		n += utf8.RuneCountInString(word)
	}
	b.WriteString("\n")
}
