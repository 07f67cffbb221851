package main

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"

	"github.com/snapwriter/snapwriter/pacing"
)

// logMessages are the messages of a command's JSON log lines, sorted (chunks
// log concurrently); it fails the test on a line that is not JSON, such as
// a bar's.
func logMessages(t *testing.T, stderr string) []string {
	t.Helper()
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(stderr), "\n") {
		var entry struct{ Message string }
		if err := json.Unmarshal([]byte(line), &entry); err != nil {
			t.Fatalf("stderr line is not a JSON log line: %q", line)
		}
		msgs = append(msgs, entry.Message)
	}
	slices.Sort(msgs)
	return msgs
}

// --progress auto, where stderr is not a terminal, logs what --progress
// log does and draws no bar.
func TestWriteProgressAutoIsLog(t *testing.T) {
	t.Parallel()
	in := genJSON(t, day, 132)
	var got [2][]string
	for i, mode := range []string{"auto", "log"} {
		code, _, errs := newCLI(t).run(in, "write", "--input", "-", "--progress", mode)
		if code != exitOK {
			t.Fatalf("--progress %s: exit %d\n%s", mode, code, errs)
		}
		got[i] = logMessages(t, errs)
	}
	if !slices.Equal(got[0], got[1]) {
		t.Errorf("--progress auto logged\n%q\n--progress log\n%q", got[0], got[1])
	}
	if !slices.Contains(got[0], "batch committed") {
		t.Errorf("no per-chunk lines: %q", got[0])
	}
}

// --progress bar counts the districts of a write, a partial write and its
// repair on stderr, and leaves out the per-chunk lines while it shows.
func TestWriteRepairProgressBar(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	in := genJSON(t, day, 60)
	code, out, errs := c.run(in, "write", "--input", "-", "--progress", "bar")
	if code != exitOK || !strings.Contains(out, "complete") {
		t.Fatalf("write: exit %d\n%s\n%s", code, out, errs)
	}
	for _, want := range []string{"write " + day, "100%", "(60/60", "districts/"} {
		if !strings.Contains(errs, want) {
			t.Errorf("write's bar lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, "batch committed") {
		t.Errorf("per-chunk log lines beside the bar:\n%s", errs)
	}

	// Partial: district 7's chunk of 50 is refused, 10 districts written;
	// the bar ends there, and the warnings still show.
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	c.interceptors = []grpc.UnaryClientInterceptor{denyDistrict("7")}
	const day2 = "2026-11-21"
	in2 := genJSON(t, day2, 60)
	code, out, errs = c.run(in2, "write", "--input", "-", "--progress", "bar")
	c.interceptors = nil
	delete(c.env, "SNAPWRITER_MAX_RETRIES")
	if code != exitPartial || !strings.Contains(out, "PARTIAL") {
		t.Fatalf("partial write: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "(10/60") || strings.Contains(errs, "(60/60") || !strings.Contains(errs, `"WARNING"`) {
		t.Errorf("a partial write's bar should stop at 10/60, its warnings show:\n%s", errs)
	}

	// The repair counts the 10 districts it keeps and the 50 it writes.
	path := writeFile(t, "snap.json", in2)
	code, out, errs = c.run("", "repair", "--date", day2, "--input", path, "--progress", "bar")
	if code != exitOK || !strings.Contains(out, "complete") {
		t.Fatalf("repair: exit %d\n%s\n%s", code, out, errs)
	}
	if !strings.Contains(errs, "repair "+day2) || !strings.Contains(errs, "(60/60") {
		t.Errorf("repair's bar should reach 60/60:\n%s", errs)
	}
}

// A --progress that is not auto, bar or log is refused before anything is
// written.
func TestBadProgressExit2(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	path := writeFile(t, "snap.json", genJSON(t, day, 5))
	for _, args := range [][]string{
		{"write", "--input", path, "--progress", "fancy"},
		{"repair", "--date", day, "--input", path, "--progress", "fancy"},
	} {
		code, _, errs := c.run("", args...)
		if code != exitUsage || !strings.Contains(errs, `--progress "fancy": want auto, bar or log`) {
			t.Errorf("%s: exit %d, want 2\n%s", args[0], code, errs)
		}
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("a bad --progress wrote %d documents", n)
	}
}

// The built binary draws the bar with --progress bar, and none by default
// when its stderr is a pipe.
func TestBinaryProgress(t *testing.T) {
	t.Parallel()
	bin, project := binary(t), newProject(t)
	in := genJSON(t, day, 20)
	for _, tc := range []struct {
		mode string
		bar  bool
	}{{"auto", false}, {"bar", true}} {
		cmd := exec.Command(bin, "write", "--input", "-", "--progress", tc.mode)
		cmd.Env, cmd.Stdin = binaryEnv(project), strings.NewReader(in)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("--progress %s: %v\n%s", tc.mode, err, stderr.String())
		}
		if got := strings.Contains(stderr.String(), "(20/20"); got != tc.bar {
			t.Errorf("--progress %s: bar %v, want %v:\n%s", tc.mode, got, tc.bar, stderr.String())
		}
	}
}

// The bar's name shows the write budget's limit, and the store's
// push-back once there was any.
func TestDescribeRate(t *testing.T) {
	for _, c := range []struct {
		st   pacing.Stats
		want string
	}{
		{pacing.Stats{Limit: 500}, "write 2026-11-20 ≤500/s"},
		{pacing.Stats{Limit: 124.6, PushBacks: 3}, "write 2026-11-20 ≤125/s (store pushed back 3×)"},
	} {
		if got := describeRate("write 2026-11-20", c.st); got != c.want {
			t.Errorf("describeRate(%+v) = %q, want %q", c.st, got, c.want)
		}
	}
}
