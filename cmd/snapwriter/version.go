package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/snapwriter/snapwriter/internal/buildinfo"
)

// versionTemplate is the root's --version output: the line 'snapwriter
// version' prints (versionLine), the root's Version being
// buildinfo.Version().
const versionTemplate = "snapwriter {{.Version}}\n"

// versionLine is what 'snapwriter version' prints without --json.
func versionLine() string { return fmt.Sprintf("snapwriter %s\n", buildinfo.Version()) }

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "version [--json]",
		Short: "Print the version, VCS revision and Go version of this binary",
		Long: `Print the version, VCS revision and Go version of this binary.

--json prints them as one JSON object, with the full revision, whether the
tree was modified (when known), the commit time and the platform the binary
was built for: {"version", "revision", "modified", "time", "goVersion", "os",
"arch"}.`,
		Example: `  snapwriter version
  snapwriter version --json | jq -r .revision`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return a.output(asJSON, buildinfo.Read(), func(w io.Writer) error {
				_, err := io.WriteString(w, versionLine())
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}
