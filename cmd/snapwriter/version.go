package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/buildinfo"
)

func (a *app) versionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version, VCS revision and Go version of this binary",
		Example: `  snapwriter version`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(a.stdout, "snapwriter %s\n", buildinfo.Version())
			return err
		},
	}
}
