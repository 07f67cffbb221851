package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// warnIncomplete returns errIncomplete (exit 3), worded as the warning,
// unless the snapshot get printed was whole: asRead is the root the output
// was read from, so a write that finished after that read still leaves
// the output partial. The state the message names is settled now (is the
// writer alive?); the districts missing from the output, failed and
// pending, are those of asRead.
func (a *app) warnIncomplete(ctx context.Context, r *snapshot.Reader, asRead snapshot.Summary, printed int) error {
	if asRead.State == snapshot.StateComplete || asRead.State == snapshot.StateUnsuccessful {
		return nil // every district was stored and printed
	}
	id := asRead.SnapshotID
	sum, err := r.Summary(ctx, id)
	if err != nil {
		return a.firestoreWait(err)
	}
	if sum.State == snapshot.StateComplete || sum.State == snapshot.StateUnsuccessful {
		return fmt.Errorf("%w: snapshot %s was still being written when it was read: the output holds the %d of its %d districts that were stored then; the write has finished since — get it again",
			errIncomplete, id, printed, asRead.Districts)
	}
	next := "see `snapwriter list`, and `snapwriter repair` completes it"
	if sum.State == snapshot.StateWriting {
		next = "a writer is at work: get it again once it has finished"
	}
	return fmt.Errorf("%w: snapshot %s is %s: the output holds the %d of its %d districts that are stored; %s; %s",
		errIncomplete, id, sum.State, printed, sum.Districts, missingText(asRead.FailedDistricts, asRead.PendingDistricts, sum.State), next)
}

// missingText says which districts a snapshot in state st does not hold:
// "N failed (ids)", and, while its root says "writing", "K pending" — not
// reached yet by its writer, or, when it died, never reached (or written
// but not recorded).
func missingText(failed, pending []string, st snapshot.State) string {
	text := failedText(failed)
	switch {
	case st == snapshot.StateInterrupted:
		text += fmt.Sprintf(", %d pending (never reached, or written but not recorded)", len(pending))
	case len(pending) > 0 || st == snapshot.StateWriting || st == snapshot.StateUnknown:
		text += fmt.Sprintf(", %d pending (not reached yet)", len(pending))
	}
	return text
}

func (a *app) verifyCommand() *cobra.Command {
	var date, inputPath string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "verify --date D [--input F] [--json]",
		Short: "Check a stored snapshot against its manifest, its content hashes and (optionally) its input",
		Long: `Audit a stored snapshot, reading only: every district the manifest records as
written has its document, and the document matches the content hash recorded when
it was written; no document is stored that the manifest lacks or records as not
written; the manifest's counts and the metadata's lists agree with its entries;
the root's metadata and rankings match their recorded hash. With --input, the
stored districts and root payload must also equal the input's.

Each problem is named by district and kind: missing, altered, unlisted,
unrecorded, count-mismatch, payload-altered, differs-from-input.

Exit status: 0 intact and complete; 3 intact but not complete (partial, being
written or interrupted: 'repair' completes it); 6 problems found ('repair'
re-writes missing and altered districts; a snapshot that differs from its input
is written again); 1 when the snapshot is not stored, or Firestore fails or does
not answer; 2 for bad flags or input; 7 when a gs:// --input folder's upload has
not finished.`,
		Example: `  snapwriter verify --date 2026-11-20
  snapwriter verify --date 2026-11-20 --input snapshots/2026-11-20.json --json | jq .problems`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date", date)
			}
			var snap *model.Snapshot
			if inputPath != "" {
				var err error
				if snap, _, err = a.load(cmd.Context(), a.loader(0), inputPath, date); err != nil {
					return err
				}
				defer snap.Close()
			}
			var rep *snapshot.Report
			err := a.read(cmd, func(ctx context.Context, r *snapshot.Reader) (err error) {
				rep, err = r.Verify(ctx, date, snap)
				return err
			})
			if err != nil {
				return a.firestoreWait(err)
			}
			if err := a.printReport(rep, asJSON); err != nil {
				return err
			}
			switch {
			case !rep.Intact:
				return fmt.Errorf("%w: snapshot %s: %s", errNotIntact, date, plural.N(len(rep.Problems), "problem"))
			case !rep.Complete:
				intact, next := "intact", "`snapwriter repair` completes it"
				if rep.State == snapshot.StateWriting {
					intact, next = "intact so far", "a writer is at work: verify it again once it has finished"
				}
				return fmt.Errorf("%w: snapshot %s is %s: %s, %d of %d districts written, %s; %s",
					errIncomplete, date, rep.State, intact, rep.Written, rep.Districts,
					missingText(rep.FailedDistricts, rep.PendingDistricts, rep.State), next)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&date, "date", "", "snapshot id (YYYY-MM-DD) (required)")
	fl.StringVar(&inputPath, "input", "", `also compare with this input: file, directory, "-", or gs://BUCKET/PATH`)
	fl.BoolVar(&asJSON, "json", false, "print the report as JSON")
	registerTimeout(fl, defaultReadTimeout, inputTimeoutUsage)
	registerStoreFlags(fl)
	_ = cmd.MarkFlagRequired("date")
	return cmd
}

func (a *app) printReport(rep *snapshot.Report, asJSON bool) error {
	if asJSON {
		return printJSON(a.stdout, rep)
	}
	verdict := "intact"
	if !rep.Intact {
		verdict = "NOT INTACT — " + plural.N(len(rep.Problems), "problem")
	}
	hashes := "content hashes checked"
	if !rep.Hashed {
		hashes = "no content hashes recorded (written before them, or by the TypeScript application)"
	}
	fmt.Fprintf(a.stdout, "snapshot %s: %s, %s — %s, %d written, %d failed, %d pending, %s; %s\n",
		rep.SnapshotID, verdict, rep.State, plural.N(rep.Districts, "district"), rep.Written, len(rep.FailedDistricts), len(rep.PendingDistricts), plural.N(rep.Documents, "document"), hashes)
	if len(rep.FailedDistricts) > 0 {
		fmt.Fprintf(a.stdout, "  failed (%d): %s\n", len(rep.FailedDistricts), idList(rep.FailedDistricts))
	}
	if len(rep.PendingDistricts) > 0 {
		fmt.Fprintf(a.stdout, "  pending (%d): %s\n", len(rep.PendingDistricts), idList(rep.PendingDistricts))
	}
	if rep.NotYetRecorded > 0 {
		fmt.Fprintf(a.stdout, "  %s written but not yet recorded in the root (its writer is at work, or was stopped before recording them: `snapwriter repair` records them without writing them again)\n",
			plural.N(rep.NotYetRecorded, "district"))
	}
	if p := rep.Provenance; p != nil {
		fmt.Fprintf(a.stdout, "  passed the publication gate by the month-end closing rule on %s: %s allowed (compared with %s as stored)\n",
			p.CheckedAt.UTC().Format(time.RFC3339), plural.N(p.AllowedDeltas, "delta"), p.Compared)
		for i, d := range p.Deltas {
			if i == 20 {
				fmt.Fprintf(a.stdout, "    … and %d more (verify --json lists the first %d)\n", p.AllowedDeltas-i, len(p.Deltas))
				break
			}
			fmt.Fprintf(a.stdout, "    district %s %s: %s → %s (%s)\n", d.DistrictID, d.Field, jsonText(d.Old.V), jsonText(d.New.V), d.Class)
		}
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	for _, p := range rep.Problems {
		where := "snapshot"
		if p.DistrictID != "" {
			where = "district " + p.DistrictID
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", p.Kind, where, p.Detail)
	}
	return tw.Flush()
}

// jsonText is v as canonical JSON, for a line of text.
func jsonText(v any) string {
	b, err := model.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
