package main

import "github.com/spf13/cobra"

// repairCommand (placeholder).
func (a *app) repairCommand() *cobra.Command {
	return &cobra.Command{Use: "repair", Hidden: true}
}
