package buildinfo

import (
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
		want     string
	}{
		{"v1.2.3", set("vcs.revision", rev, "vcs.time", "2026-11-19T08:00:00Z", "vcs.modified", "false"),
			"v1.2.3 0123456789ab 2026-11-19T08:00:00Z go1.26.8"},
		{"", set("vcs.revision", rev, "vcs.modified", "true"), "(devel) 0123456789ab+dirty go1.26.8"},
		{"(devel)", set("vcs.revision", "abc", "vcs.time", "2026-11-19T08:00:00Z"), "(devel) abc 2026-11-19T08:00:00Z go1.26.8"},
		// Modified without a revision says nothing of it.
		{"v1.2.3", set("vcs.modified", "true", "-trimpath", "true"), "v1.2.3 go1.26.8"},
	}
	for _, tc := range cases {
		bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: tc.version}, Settings: tc.settings}
		if got := describe(bi); got != tc.want {
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
