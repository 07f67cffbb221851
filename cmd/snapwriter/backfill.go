package main

import "github.com/spf13/cobra"

// backfillCommand (placeholder).
func (a *app) backfillCommand() *cobra.Command {
	return &cobra.Command{Use: "backfill", Hidden: true}
}
