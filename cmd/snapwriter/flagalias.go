package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// aliasAnnotation marks a flag kept working under its old name: its value
// is the flag the old name now stands for.
const aliasAnnotation = "snapwriter_deprecated_alias_of"

// deprecateAlias makes old, a flag registered on fl, a hidden deprecated
// name of now, another flag of fl of the same type: what old is given
// sets now (resolveAliases), with a notice on stderr. note says how the
// two relate, for the notice ("the same bound", say).
//
// pflag's own MarkDeprecated is not used: cobra prints its notice with
// Print, to the command's output — stdout here, where it would land in
// the JSON a script reads (get --json > file).
func deprecateAlias(fl *pflag.FlagSet, old, now, note string) {
	f := fl.Lookup(old)
	f.Hidden = true
	_ = fl.SetAnnotation(old, aliasAnnotation, []string{now, note})
}

// aliasOf is the flag f is a deprecated name of, if it is one.
func aliasOf(f *pflag.Flag) (string, bool) {
	v := f.Annotations[aliasAnnotation]
	if len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// aliasPartner is the other name of f in fl: the flag f is a deprecated
// name of, or the deprecated name of f.
func aliasPartner(fl *pflag.FlagSet, f *pflag.Flag) (string, bool) {
	if now, ok := aliasOf(f); ok {
		return now, true
	}
	var old string
	fl.VisitAll(func(o *pflag.Flag) {
		if now, ok := aliasOf(o); ok && now == f.Name {
			old = o.Name
		}
	})
	return old, old != ""
}

// deprecationNote is the note deprecateAlias gave old, a deprecated name
// of now.
func deprecationNote(fl *pflag.FlagSet, old, now string) string {
	if v := fl.Lookup(old).Annotations[aliasAnnotation]; len(v) > 1 && v[1] != "" {
		return v[1]
	}
	return "--" + old + " is its old name"
}

// resolveAliases gives each flag of cmd the value of its deprecated name
// when that was set (on the command line, or by its SNAPWRITER_ variable)
// and it was not, with pflag's notice on stderr for a name given on the
// command line (applyEnv gives its own for a variable). Both set to one
// value is that value; to two, a usage error: neither is silently
// dropped. cmd's flags are parsed, and applyEnv has run.
func (a *app) resolveAliases(cmd *cobra.Command) error {
	fl := cmd.Flags()
	var err error
	fl.VisitAll(func(old *pflag.Flag) {
		now, ok := aliasOf(old)
		if err != nil || !ok || !old.Changed {
			return
		}
		if !fromEnv(a.fromEnv, old.Name) {
			fmt.Fprintf(a.stderr, "Flag --%s has been deprecated, use --%s (%s)\n", old.Name, now, deprecationNote(fl, old.Name, now))
		}
		nf := fl.Lookup(now)
		if nf.Changed {
			if nf.Value.String() != old.Value.String() {
				err = usagef("--%s %s and --%s %s disagree: --%s is the deprecated name of --%s; give --%s alone",
					old.Name, old.Value, now, nf.Value, old.Name, now, now)
			}
			return
		}
		// Set on the value, not the flag set: now stays unchanged, so
		// that what reads it can tell which name gave the value.
		if e := nf.Value.Set(old.Value.String()); e != nil {
			err = usagef("--%s %s: %v", old.Name, old.Value, e)
		}
	})
	return err
}

// fromEnv reports whether applyEnv set flag from its variable.
func fromEnv(set []envSetting, flag string) bool {
	for _, e := range set {
		if e.flag == flag {
			return true
		}
	}
	return false
}

// givenAs is the name the value of flag now came by: --old when only its
// deprecated name old was set, else --now.
func givenAs(fl *pflag.FlagSet, now string) string {
	nf := fl.Lookup(now)
	if nf != nil && !nf.Changed {
		if old, ok := aliasPartner(fl, nf); ok && fl.Lookup(old).Changed {
			return "--" + old
		}
	}
	return "--" + now
}
