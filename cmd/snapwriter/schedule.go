package main

import "github.com/spf13/cobra"

// scheduleCommand is written by the schedule helper (placeholder).
func (a *app) scheduleCommand() *cobra.Command {
	return &cobra.Command{Use: "schedule", Short: "Long-running: write on a cron schedule (not built yet)", Hidden: true}
}
