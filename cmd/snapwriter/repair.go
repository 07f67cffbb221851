package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) repairCommand() *cobra.Command {
	var f writeFlags
	var input, date, progressMode string
	var asJSON, rewrite, dryRun bool
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "repair --input F|-|gs://BUCKET/PATH [--date D] [--dry-run]",
		Short: "Re-write only the districts the manifest records as failed, missing or altered",
		Long: `Complete a partial snapshot. Under the snapshot's lock, repair moves the root
to its own fence, re-writes exactly the districts the manifest does not record as
written (failed, or still pending after a write that was killed) and those whose
document is missing or no longer matches its recorded content hash ('verify'
finds them), removes district documents the snapshot does not have, and marks the
snapshot complete. A date with nothing stored is written whole.

--input must be the snapshot that was written: the same districts, the same root
payload (metadata, rankings) and the same data for every district already written.
Anything else is refused with exit 2 before a write, naming the first differences:
write the snapshot instead (it replaces it under the lock), or pass
--rewrite-changed to re-write what differs too. A repaired snapshot never mixes two
exports. A snapshot that is complete and intact is left alone (exit 0). Exit codes
are those of 'write'. --progress is write's: on a terminal a bar counts the
districts stored, those kept as they are included.

The snapshot repaired is the input's payload.metadata.dataAsOfDate, as for 'write':
--date names it for an input without one, and must equal it otherwise. Neither
naming it, or the two disagreeing, is exit 2 with nothing written.`,
		Example: `  snapwriter repair --input snapshots/2026-11-20.json
  snapwriter repair --date 2026-11-20 --input gs://exports/snapshots/2026-11-20/ --dry-run
  snapwriter list --json | jq -r '.[] | select(.state == "partial") | .snapshotId' |
    while read d; do snapwriter repair --input "snapshots/$d.json"; done`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if date != "" && !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date", date)
			}
			if err := checkWait(wait); err != nil {
				return err
			}
			if err := checkProgress(progressMode); err != nil {
				return err
			}
			return a.writeOp(cmd, f, writeRequest{input: input, date: date, wait: wait, asJSON: asJSON, progress: progressMode, op: (*snapshot.Writer).Repair,
				extra: []snapshot.Option{snapshot.WithRewriteChanged(rewrite)}, dryRun: dryRun, plan: (*snapshot.Planner).PlanRepair})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&date, "date", "", "snapshot id (YYYY-MM-DD); default payload.metadata.dataAsOfDate, which it must equal when the input has one")
	fl.StringVar(&input, "input", "", `the snapshot that was written: file, directory, "-", or gs://BUCKET/PATH (required)`)
	registerWait(fl, &wait)
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	registerProgress(fl, &progressMode)
	fl.BoolVar(&dryRun, "dry-run", false, dryRunUsage+"; lists the districts it would write again, and why")
	fl.BoolVar(&rewrite, "rewrite-changed", false, "re-write the districts (or the whole snapshot, if its metadata or rankings differ) whose stored data differs from --input, instead of refusing")
	f.register(fl)
	registerRequestTimeout(fl, repairRequestTimeoutUsage)
	registerStoreFlags(fl)
	_ = cmd.MarkFlagRequired("input")
	return cmd
}
