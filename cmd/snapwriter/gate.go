package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/snapwriter/snapwriter/gate"
	"github.com/snapwriter/snapwriter/internal/plural"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/snapshot"
)

// gateFlags are the publication gate's flags (docs/operations.md, "The
// publication gate"): write, backfill and schedule register them, and
// writeFlags carries them (a pointer, so that its copies share the policy
// read once).
type gateFlags struct {
	on         bool
	policyFile string
	allow      bool
	// policy is the policy read by check: --gate-policy's, else the
	// defaults.
	policy *gate.Policy
}

func (g *gateFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&g.on, "gate", false, "check the input against what readers have before writing, and hold (exit 8, nothing written) a snapshot with fewer districts, changed values, or month-end deltas past their bounds")
	g.registerPolicy(fl)
	fl.BoolVar(&g.allow, "allow-value-changes", false, "with --gate: let changed values of a stored complete date through (a deliberate re-derivation); a removed district still holds")
}

// registerPolicy registers --gate-policy alone: diff and policy take it.
func (g *gateFlags) registerPolicy(fl *pflag.FlagSet) {
	// The backquoted FILE is pflag's placeholder in the listing:
	// "--gate-policy FILE".
	fl.StringVar(&g.policyFile, "gate-policy", "", "the gate's field policy, a JSON `FILE` ('snapwriter policy' prints the defaults to start from)")
}

// check reads the policy --gate-policy names, or takes the defaults, and
// checks the flags together: a usage error, before anything is read or
// written, for a policy that cannot be used.
func (g *gateFlags) check() error {
	if g.allow && !g.on {
		return usagef("--allow-value-changes: only with --gate")
	}
	g.policy = gate.DefaultPolicy()
	if g.policyFile == "" {
		return nil
	}
	b, err := os.ReadFile(g.policyFile)
	if err != nil {
		return usagef("--gate-policy: %v", err)
	}
	if g.policy, err = gate.ParsePolicy(b); err != nil {
		return usagef("--gate-policy %s: %v", g.policyFile, err)
	}
	return nil
}

// options are the gate's options, for the value rule of a comparison.
func (g *gateFlags) options() gate.Options {
	return gate.Options{Policy: g.policy, AllowValueChanges: g.allow}
}

// writerOptions is the writer's gate option: none when the gate is off.
func (g *gateFlags) writerOptions() []snapshot.Option {
	if g == nil || !g.on {
		return nil
	}
	return []snapshot.Option{snapshot.WithGate(g.options())}
}

// printGate prints the gate's decision after a write's result line: a held
// write's whole report, or one line for one it let through.
func printGate(w io.Writer, res *snapshot.Result) error {
	rep := res.Gate
	switch {
	case rep == nil:
		return nil
	case rep.Held:
		return rep.WriteText(w)
	case rep.PassedByClosingRule:
		_, err := fmt.Fprintf(w, "publication gate: passed by the month-end closing rule, %s allowed (recorded with the snapshot: `snapwriter verify` shows them)\n",
			plural.N(len(rep.Allowed()), "delta"))
		return err
	}
	_, err := fmt.Fprintf(w, "publication gate: passed%s\n", gateBasis(rep))
	return err
}

// gateBasis says what the gate compared a snapshot it let through with.
func gateBasis(rep *gate.Report) string {
	s := "no complete snapshot before it to count against"
	if rep.Baseline.SnapshotID != "" {
		s = fmt.Sprintf("every district of %s, the newest complete snapshot before it, is in the input", rep.Baseline.SnapshotID)
	}
	if rep.Compared != "" {
		s += fmt.Sprintf("; compared with %s as stored: %d unchanged, %d changed", rep.Compared, rep.Districts.Unchanged, len(rep.Districts.Changed))
	}
	return " (" + s + ")"
}

// differError ends diff --exit-code when the snapshots differ: exit 1, as
// git diff --exit-code, with nothing more said (the diff is the output).
type differError struct{}

func (differError) Error() string { return "the snapshots differ" }

func (a *app) diffCommand() *cobra.Command {
	var g gateFlags
	var from, to, in string
	var asJSON, exitCodeFlag bool
	cmd := &cobra.Command{
		Use:   "diff [--from D] (--to D | --input F|-|gs://BUCKET/PATH) [--json] [--exit-code]",
		Short: "Show what changed, per district and field, between two snapshots",
		Long: `Compare two snapshots district by district: the stored snapshot --from with
another stored one (--to) or with an input (--input, any form write takes), and
print the districts added, removed and changed, with old → new for each field
that changed. Order and volatile metadata (calculatedAt, csvFetchedAt, fromCache,
version stamps) are ignored, as the publication gate ignores them; each change
says its field's class in the gate's policy (--gate-policy) and what the gate's
value rule — or, comparing a month-end closing input with its own date, the
closing rule — would make of it.

--from defaults to the input's own date: what 'write --gate' would compare a
rewrite with. The stored snapshots are read as they were at one moment; districts
are read a batch at a time, so a snapshot of thousands never sits in memory.

--exit-code exits 1 when the snapshots differ and 0 when they do not, as git diff
does (a failure exits with its own code, 1 or 2, and says so on stderr).`,
		Example: `  snapwriter diff --input gs://exports/snapshots/2026-11-30/
  snapwriter diff --from 2026-11-19 --to 2026-11-20
  snapwriter diff --from 2026-11-19 --input 2026-11-20.json --json | jq .districts.changed`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, d := range []struct{ flag, v string }{{"--from", from}, {"--to", to}} {
				if d.v != "" && !model.ValidDate(d.v) {
					return usagef("%s %q: want a real YYYY-MM-DD date", d.flag, d.v)
				}
			}
			switch {
			case (to == "") == (in == ""):
				return usagef("give one of --to (a stored snapshot) and --input (an input) to compare --from with")
			case to != "" && from == "":
				return usagef("--to %s: give --from, the stored snapshot to compare it with", to)
			}
			if err := g.check(); err != nil {
				return err
			}
			return a.diff(cmd, g.options(), from, to, in, asJSON, exitCodeFlag)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&from, "from", "", "the stored snapshot to compare from (YYYY-MM-DD); default the input's date")
	fl.StringVar(&to, "to", "", "the stored snapshot to compare with --from (YYYY-MM-DD)")
	fl.StringVar(&in, "input", "", inputUsage)
	fl.BoolVar(&asJSON, "json", false, "print the comparison as JSON (docs/cli.md documents its fields)")
	fl.BoolVar(&exitCodeFlag, "exit-code", false, "exit 1 when the snapshots differ, 0 when they do not")
	g.registerPolicy(fl)
	registerTimeout(fl, defaultReadTimeout, inputTimeoutUsage)
	registerStoreFlags(fl)
	return cmd
}

// diff compares the stored snapshot from with the stored snapshot to, or
// with the input in, and prints the report.
func (a *app) diff(cmd *cobra.Command, o gate.Options, from, to, in string, asJSON, exitCode bool) error {
	ctx := cmd.Context()
	var snap *model.Snapshot
	var id string
	if in != "" {
		var err error
		if snap, id, err = a.load(ctx, a.loader(0), in, ""); err != nil {
			return err
		}
		defer snap.Close()
		if from == "" {
			from = id
		}
	}
	var rep *gate.Report
	err := a.read(cmd, func(ctx context.Context, r *snapshot.Reader) (err error) {
		if snap != nil {
			rep, err = r.CompareInput(ctx, from, id, snap, o)
		} else {
			rep, err = r.CompareStored(ctx, from, to, o)
		}
		if errors.Is(err, snapshot.ErrNotFound) {
			return notFoundError{msg: fmt.Sprintf("snapshot %s is not stored: nothing to compare with (`snapwriter list` shows what is)", from), err: err}
		}
		return a.firestoreWait(err)
	})
	if err != nil {
		return err
	}
	if err := a.output(asJSON, rep, rep.WriteText); err != nil {
		return err
	}
	if exitCode && rep.Changed() {
		return differError{}
	}
	return nil
}

func (a *app) policyCommand() *cobra.Command {
	var g gateFlags
	cmd := &cobra.Command{
		Use:   "policy [--gate-policy F]",
		Short: "Print the publication gate's field policy",
		Long: `Print the field policy the publication gate (write --gate) and diff judge
changes by, as the JSON file --gate-policy takes: the default policy, or the
file given, once checked. Start a policy of your own from the defaults:

  snapwriter policy > gate-policy.json

docs/operations.md explains the classes (counter, identity, plan, derived,
volatile), the patterns and the array keys.`,
		Example: `  snapwriter policy > gate-policy.json
  snapwriter write --input snap.json --gate --gate-policy gate-policy.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := g.check(); err != nil {
				return err
			}
			return printJSON(a.stdout, g.policy)
		},
	}
	g.registerPolicy(cmd.Flags())
	return cmd
}
