package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// runApp runs a command line in process with the environment env, no
// Firestore behind it: for what a command says before it runs (--help,
// usage errors).
func runApp(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	a := newApp(strings.NewReader(""), &out, &errb, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	code := a.run(context.Background(), args)
	return code, out.String(), errb.String()
}

// helpPages is every command's path, the root's ("") included.
func helpPages(t *testing.T) [][]string {
	t.Helper()
	var paths [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		paths = append(paths, path)
		for _, sub := range c.Commands() {
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(newApp(nil, nil, nil, nil).rootCommand(), nil)
	if len(paths) < 14 {
		t.Fatalf("only %d commands found", len(paths))
	}
	return paths
}

// helpFlags are the flags the command at path takes, by name: its own,
// the global ones and cobra's --help and --version.
func helpFlags(path []string) map[string]bool {
	root := newApp(nil, nil, nil, nil).rootCommand()
	c, _, err := root.Find(path)
	if err != nil {
		panic(err)
	}
	c.InitDefaultHelpFlag()
	root.InitDefaultVersionFlag()
	names := map[string]bool{}
	add := func(f *pflag.Flag) { names[f.Name] = true }
	c.Flags().VisitAll(add)
	c.InheritedFlags().VisitAll(add)
	return names
}

var flagRef = regexp.MustCompile(`(^|[^-\w])--([a-z][a-z0-9-]*)`)

// Every command's --help: booleans shown as "--x", not pflag's
// "--x[=true|false]"; one default at most per flag; and no flag named
// that the command does not take (a usage text shared by commands
// naming another command's flag, say).
func TestHelpOutput(t *testing.T) {
	t.Parallel()
	pages := helpPages(t)
	var commands []string
	for _, path := range pages {
		if len(path) > 0 {
			commands = append(commands, path[len(path)-1])
		}
	}
	for _, path := range pages {
		args := append(append([]string(nil), path...), "--help")
		code, out, errs := runApp(t, nil, args...)
		if code != exitOK || errs != "" {
			t.Errorf("%v: exit %d\n%s", args, code, errs)
			continue
		}
		if strings.Contains(out, "[=true|false]") || strings.Contains(out, "[=") {
			t.Errorf("%v: a boolean shown with its values:\n%s", args, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.Count(line, "(default ") > 1 {
				t.Errorf("%v: two defaults: %s", args, line)
			}
		}
		flags := helpFlags(path)
		for _, m := range flagRef.FindAllStringSubmatch(out, -1) {
			if name := m[2]; !flags[name] && !otherCommandsFlag(out, name, commands) {
				t.Errorf("%v: --help names --%s, a flag the command does not take", args, name)
			}
		}
	}
}

// otherCommandsFlag reports whether help names --name in a command line
// of another command, one of commands: "snapwriter backfill --input-dir
// D" in an example, "get --district" in the root's list of exit codes.
func otherCommandsFlag(help, name string, commands []string) bool {
	flag, cmds := regexp.QuoteMeta(name), strings.Join(commands, "|")
	return regexp.MustCompile("snapwriter ("+cmds+")( [^ \n`']+)* --"+flag+`\b`).MatchString(help) ||
		regexp.MustCompile(`\b(`+cmds+") --"+flag+`\b`).MatchString(help)
}

// The booleans' plain listing changes only the listing: --x, --x=true
// and --x=false still parse.
func TestHelpBooleansStillParse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"version", "--help"}, "Print the version"},
		{[]string{"version", "-h=true"}, "Print the version"},
		{[]string{"version", "--help=false"}, "snapwriter "},
	} {
		code, out, errs := runApp(t, nil, tc.args...)
		if code != exitOK || !strings.HasPrefix(out, tc.want) {
			t.Errorf("%v: exit %d, want output starting %q\n%s%s", tc.args, code, tc.want, out, errs)
		}
	}
	// And after --help rendered them, in the same process.
	_, out, _ := runApp(t, nil, "write", "--help")
	if !regexp.MustCompile(`(?m)^\s+--dry-run\s+validate`).MatchString(out) || !strings.Contains(out, "  -h, --help ") {
		t.Errorf("write --help:\n%s", out)
	}
}
