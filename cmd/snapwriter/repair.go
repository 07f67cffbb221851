package main

import (
	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

func (a *app) repairCommand() *cobra.Command {
	var f writeFlags
	var input, date string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "repair --date D --input F|-",
		Short: "Re-write only the districts the manifest records as failed",
		Long: `Complete a partial snapshot. Under the snapshot's lock, repair moves the root
to its own fence, re-writes exactly the districts the manifest does not record as
written (failed, or still pending after a write that was killed), removes district
documents the snapshot does not have, and marks the snapshot complete.

--input must be the snapshot that was written (same snapshot_id and districts);
anything else is refused with exit 2 before a write. A snapshot that is already
complete is left alone (exit 0). Exit codes are those of 'write'.`,
		Example: `  snapwriter repair --date 2026-11-20 --input snapshots/2026-11-20.json
  snapwriter list --json | jq -r '.[] | select(.state == "partial") | .snapshotId' |
    while read d; do snapwriter repair --date "$d" --input "snapshots/$d.json"; done`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.validate(); err != nil {
				return err
			}
			if !model.ValidDate(date) {
				return usagef("--date %q: want a real YYYY-MM-DD date", date)
			}
			return a.writeOp(cmd, f, input, date, asJSON, (*snapshot.Writer).Repair)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&date, "date", "", "snapshot id (YYYY-MM-DD) (required)")
	fl.StringVar(&input, "input", "", `the snapshot that was written: file, directory, or "-" (required)`)
	fl.BoolVar(&asJSON, "json", false, "print the result as JSON")
	f.register(fl)
	registerTimeout(fl, snapshot.DefaultRequestTimeout, writeTimeoutUsage)
	_ = cmd.MarkFlagRequired("date")
	_ = cmd.MarkFlagRequired("input")
	return cmd
}
