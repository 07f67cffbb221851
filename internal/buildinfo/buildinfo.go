// Package buildinfo describes the running binary from the build info the
// Go toolchain embeds in it, and from what the linker set when that has
// no VCS information.
package buildinfo

import "runtime/debug"

// version and revision are set by the linker alone —
// -ldflags "-X github.com/snapwriter/snapwriter/internal/buildinfo.revision=$REVISION
// -X github.com/snapwriter/snapwriter/internal/buildinfo.version=$VERSION" — and never
// assigned at run time: constants of the build, which the linker can set
// only in variables. They stand in for what a build without its .git
// lacks: `gcloud builds submit` uploads none (its default .gcloudignore
// leaves .git out), so the Dockerfile's ARG REVISION carries it.
var (
	version  string
	revision string
)

// Version describes the binary: module version, VCS revision (12 hex
// digits, "+dirty" when built from a modified tree) and time, Go version.
// `make build` and a Docker build with the .git directory embed the
// revision; a build without it (`gcloud builds submit`) shows the revision
// and version the linker set, if any.
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build info)"
	}
	return describe(bi, linked{version: version, revision: revision})
}

// linked is what the linker set.
type linked struct{ version, revision string }

// describe is Version for the build info bi and the linked values l: the
// build info's VCS revision first, then l's, and l's version where the
// build info has none ("(devel)").
func describe(bi *debug.BuildInfo, l linked) string {
	v := bi.Main.Version
	if (v == "" || v == "(devel)") && l.version != "" {
		v = l.version
	}
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
	if rev == "" {
		// A modified tree, if the build info says so, is not the linked
		// revision's: say nothing of it.
		rev, modified = l.revision, false
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
