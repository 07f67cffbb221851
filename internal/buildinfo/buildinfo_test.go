package buildinfo

import (
	"reflect"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	set := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	cases := []struct {
		version  string
		settings []debug.BuildSetting
		linked   linked
		want     string
	}{
		{"v1.2.3", set("vcs.revision", rev, "vcs.time", "2026-11-19T08:00:00Z", "vcs.modified", "false"), linked{},
			"v1.2.3 0123456789ab 2026-11-19T08:00:00Z go1.26.8"},
		{"", set("vcs.revision", rev, "vcs.modified", "true"), linked{}, "(devel) 0123456789ab+dirty go1.26.8"},
		{"(devel)", set("vcs.revision", "abc", "vcs.time", "2026-11-19T08:00:00Z"), linked{}, "(devel) abc 2026-11-19T08:00:00Z go1.26.8"},
		// Modified without a revision says nothing of it.
		{"v1.2.3", set("vcs.modified", "true", "-trimpath", "true"), linked{}, "v1.2.3 go1.26.8"},
		// No VCS information (gcloud builds submit): the linked revision
		// and version stand in, and a modified tree is not said of them.
		{"(devel)", set("-trimpath", "true", "vcs.modified", "true"), linked{version: "v1.4.0", revision: rev}, "v1.4.0 0123456789ab go1.26.8"},
		{"", nil, linked{revision: "fedcba9"}, "(devel) fedcba9 go1.26.8"},
		// VCS information wins over the linked revision; a module version
		// over the linked version.
		{"v1.2.3", set("vcs.revision", rev), linked{version: "v9.9.9", revision: "fedcba9876543210"}, "v1.2.3 0123456789ab go1.26.8"},
	}
	for _, tc := range cases {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := describe(bi, tc.linked); got != tc.want {
			t.Errorf("describe(%q, %v) = %q, want %q", tc.version, tc.settings, got, tc.want)
		}
	}
}

// A test binary has build info: its Go version ends the description.
func TestVersion(t *testing.T) {
	t.Parallel()
	if got := Version(); !strings.HasSuffix(got, " "+runtime.Version()) {
		t.Errorf("Version() = %q, want it to end in %s", got, runtime.Version())
	}
}

// read gives Version's parts one by one: the full revision, the modified
// flag only when the build's own VCS information says it, the platform.
func TestRead(t *testing.T) {
	t.Parallel()
	const rev = "0123456789abcdef0123456789abcdef01234567"
	yes, no := true, false
	cases := []struct {
		name     string
		version  string
		settings []debug.BuildSetting
		linked   linked
		want     Info
	}{
		{"vcs clean", "v1.2.3", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.time", Value: "2026-11-19T08:00:00Z"}, {Key: "vcs.modified", Value: "false"}}, linked{},
			Info{Version: "v1.2.3", Revision: rev, Modified: &no, Time: "2026-11-19T08:00:00Z"}},
		{"vcs dirty", "(devel)", []debug.BuildSetting{{Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: "true"}}, linked{},
			Info{Version: "(devel)", Revision: rev, Modified: &yes}},
		{"linked", "(devel)", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, linked{version: "v1.4.0", revision: rev},
			Info{Version: "v1.4.0", Revision: rev}},
		{"nothing", "", nil, linked{}, Info{Version: "(devel)"}},
	}
	for _, tc := range cases {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		tc.want.GoVersion, tc.want.OS, tc.want.Arch = "go1.26.8", runtime.GOOS, runtime.GOARCH
		if got := read(bi, tc.linked); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: read = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
