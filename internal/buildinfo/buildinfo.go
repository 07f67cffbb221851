// Package buildinfo describes the running binary from the build info the
// Go toolchain embeds in it, and from what the linker set when that has
// no VCS information.
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

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

// Info is what Version describes, field by field: the binary's
// description for a program to read (`snapwriter version --json`).
type Info struct {
	// Version is the module version, else the linked version, else
	// "(devel)".
	Version string `json:"version"`
	// Revision is the full VCS revision: the build's own, else the linked
	// one; empty when neither is known.
	Revision string `json:"revision,omitempty"`
	// Modified says whether the build's tree had uncommitted changes; nil
	// when that is not known (no VCS information in the build: a linked
	// revision says nothing of the tree).
	Modified *bool `json:"modified,omitempty"`
	// Time is the revision's commit time (RFC 3339), when the build knows it.
	Time string `json:"time,omitempty"`
	// GoVersion is the toolchain that built the binary ("go1.26.8").
	GoVersion string `json:"goVersion"`
	// OS and Arch are the platform the binary was built for ("linux",
	// "amd64"): an image built for the wrong one does not start.
	OS   string `json:"os"`
	Arch string `json:"arch"`
}

// Read describes the running binary, as Version does.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: "unknown", GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	}
	return read(bi, linked{version: version, revision: revision})
}

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

// read is Read for the build info bi and the linked values l: the build
// info's VCS revision first, then l's, and l's version where the build
// info has none ("(devel)").
func read(bi *debug.BuildInfo, l linked) Info {
	info := Info{Version: bi.Main.Version, GoVersion: bi.GoVersion, OS: runtime.GOOS, Arch: runtime.GOARCH}
	if (info.Version == "" || info.Version == "(devel)") && l.version != "" {
		info.Version = l.version
	}
	if info.Version == "" {
		info.Version = "(devel)"
	}
	var modified *bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			m := s.Value == "true"
			modified = &m
		}
	}
	if info.Revision == "" {
		// A modified tree, if the build info says so, is not the linked
		// revision's: say nothing of it.
		info.Revision = l.revision
	} else {
		info.Modified = modified
	}
	return info
}

// describe is Version for the build info bi and the linked values l.
func describe(bi *debug.BuildInfo, l linked) string {
	info := read(bi, l)
	out := info.Version
	if rev := info.Revision; rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		out += " " + rev
		if info.Modified != nil && *info.Modified {
			out += "+dirty"
		}
	}
	if info.Time != "" {
		out += " " + info.Time
	}
	return out + " " + info.GoVersion
}
