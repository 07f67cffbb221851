package emulator

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseGCPauses(t *testing.T) {
	log := `[0.012s][info][gc] Using G1
[9.429s][info][gc] GC(8) Pause Remark 24M->24M(120M) 14.484ms
[134.535s][info][gc] GC(155) Pause Young (Normal) (G1 Preventive Collection) 6019M->6023M(6028M) 86.727ms
[149.111s][info][gc] GC(156) Pause Full (G1 Compaction Pause) 6023M->3331M(6028M) 14576.336ms
[280.056s][info][gc] GC(228) Concurrent Mark Cycle 15840.034ms
[283.312s][info][gc] GC(229) Pause Young (Prepare Mixed) (G1 Evacuation Pause) 5239M->4929M(6028M) 44.635ms
`
	var p GCPauses
	if err := p.read(strings.NewReader(log)); err != nil {
		t.Fatal(err)
	}
	want := GCPauses{Count: 4, Full: 1, Longest: 14576336 * time.Microsecond,
		Total: (14484 + 86727 + 14576336 + 44635) * time.Microsecond}
	if p != want {
		t.Errorf("read = %+v; want %+v (the concurrent cycle stops nothing)", p, want)
	}
	if !p.Stalled() {
		t.Error("a 14.6 s pause is not Stalled")
	}
	if got, want := p.String(), "14.6 s at most (1 full collection; 4 pauses, 14.7 s in all)"; got != want {
		t.Errorf("String = %q; want %q", got, want)
	}
	if (GCPauses{Count: 3, Longest: 999 * time.Millisecond}).Stalled() {
		t.Error("pauses under a second are Stalled")
	}
}

func TestGCEnvKeepsTheCallersJavaOptions(t *testing.T) {
	for _, tc := range []struct {
		env  []string
		want string
	}{
		{[]string{"PATH=/bin"}, "JAVA_TOOL_OPTIONS=-Xlog:gc:file=/tmp/x/gc-%p.log::filecount=0"},
		{[]string{"JAVA_TOOL_OPTIONS=-Xmx2g", "PATH=/bin"}, "JAVA_TOOL_OPTIONS=-Xmx2g -Xlog:gc:file=/tmp/x/gc-%p.log::filecount=0"},
	} {
		got := gcEnv(tc.env, "/tmp/x")
		if n := len(slices.DeleteFunc(slices.Clone(got), func(kv string) bool { return !strings.HasPrefix(kv, "JAVA_TOOL_OPTIONS=") })); n != 1 {
			t.Errorf("gcEnv(%q) sets JAVA_TOOL_OPTIONS %d times", tc.env, n)
		}
		if !slices.Contains(got, tc.want) || !slices.Contains(got, "PATH=/bin") {
			t.Errorf("gcEnv(%q) = %q; want PATH=/bin and %s", tc.env, got, tc.want)
		}
	}
}
