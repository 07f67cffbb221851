// Package buildinfo describes the running binary from the build info the
// Go toolchain embeds in it.
package buildinfo

import "runtime/debug"

// Version describes the binary: module version, VCS revision (12 hex
// digits, "+dirty" when built from a modified tree) and time, Go version.
// `make build` and the Dockerfile build from a Git checkout, so the
// revision is there.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	return describe(bi)
}

// describe is Version for the build info bi.
func describe(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	out := v
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " " + rev
		if modified {
			out += "+dirty"
		}
	}
	if at != "" {
		out += " " + at
	}
	return out + " " + bi.GoVersion
}
