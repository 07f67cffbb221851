package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/snapwriter/snapwriter/internal/logging"
	"github.com/snapwriter/snapwriter/internal/progress/termtest"
	"github.com/snapwriter/snapwriter/snapshot"
)

// denyHalfTheChunks refuses, permanently, every commit whose first
// district document has a numeric id whose last two digits are 01 to 50:
// of chunks of 50 consecutive ids, about every other one. (Not every
// chunk: the emulator takes no request over 4 MiB, and the finish of a
// write with all of 20,000 districts failed is larger.)
func denyHalfTheChunks() grpc.UnaryClientInterceptor {
	return commitHook(func(_ context.Context, cr *firestorepb.CommitRequest) error {
		for _, w := range cr.GetWrites() {
			name := w.GetUpdate().GetName()
			i := strings.LastIndex(name, "/districts/district_")
			if i < 0 {
				continue
			}
			if id, err := strconv.Atoi(name[i+len("/districts/district_"):]); err == nil && (id-1)%100 < 50 {
				return status.Error(codes.PermissionDenied, "injected")
			}
			return nil
		}
		return nil
	})
}

// longestLine is the length in bytes of s's longest line, its newline
// not counted.
func longestLine(s string) int {
	n := 0
	for line := range strings.SplitSeq(s, "\n") {
		n = max(n, len(line))
	}
	return n
}

// failedLine is the text output's line of failed districts: their count,
// the first ten, and how many more.
var failedLine = regexp.MustCompile(`(?m)^failed districts \(([0-9,]+)\): ((?:[^ ,]+, ){9}[^ ,]+) … and ([0-9,]+) more; --json lists them all$`)

// A partial write of 20,000 districts, about half of them failed: no log
// line reaches 64 KB, the text output names the first ten failed ids and
// counts the rest, and the summary log line counts them all and names
// ten. (--json, which lists every one: TestPrintResultBounded.)
func TestPartialWriteOutputBounded(t *testing.T) {
	t.Parallel()
	const n = 20000
	c := newCLI(t)
	c.env["SNAPWRITER_MAX_RETRIES"] = "0"
	// Unpaced, 16 chunks at once: the test is about the output.
	c.env["SNAPWRITER_WRITE_RAMP"] = "false"
	c.env["SNAPWRITER_MAX_WRITE_RATE"] = "1000000"
	c.env["SNAPWRITER_CONCURRENCY"] = "16"
	c.interceptors = []grpc.UnaryClientInterceptor{denyHalfTheChunks()}

	code, out, errs := c.run(genJSON(t, day, n), "write", "--input", "-")
	if code != exitPartial {
		t.Fatalf("exit %d, want 3\n%.3000s", code, errs[max(0, len(errs)-3000):])
	}
	t.Logf("longest stderr line %d bytes, stdout %d bytes, stderr %d bytes", longestLine(errs), len(out), len(errs))
	if l := longestLine(errs); l >= logging.MaxEntryBytes {
		t.Errorf("a stderr line of %d bytes: want every line under %d", l, logging.MaxEntryBytes)
	}
	if len(out) > 2048 {
		t.Errorf("text output of %d bytes: want the failed ids bounded\n%.3000s", len(out), out)
	}
	m := failedLine.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("text output does not name ten failed ids and count the rest:\n%s", out)
	}
	failed, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	more, _ := strconv.Atoi(strings.ReplaceAll(m[3], ",", ""))
	if failed < n/4 || failed > 3*n/4 || more != failed-10 || !strings.HasPrefix(m[2], "1, 2, 3, ") {
		t.Errorf("failed districts (%d): %s … and %d more", failed, m[2], more)
	}
	if !strings.Contains(errs, fmt.Sprintf("%d districts not written", failed)) {
		t.Errorf("the error does not count the districts not written:\n%.2000s", errs[max(0, len(errs)-2000):])
	}
	// The summary line counts them, and names a sample.
	var summary struct {
		FailedDistricts       int      `json:"failedDistricts"`
		FailedDistrictsSample []string `json:"failedDistrictsSample"`
	}
	for line := range strings.SplitSeq(errs, "\n") {
		if strings.Contains(line, `"message":"snapshot write finished"`) {
			if err := json.Unmarshal([]byte(line), &summary); err != nil {
				t.Fatalf("%v: %.500s", err, line)
			}
		}
	}
	if summary.FailedDistricts != failed || len(summary.FailedDistrictsSample) != 10 || summary.FailedDistrictsSample[0] != "1" {
		t.Errorf("summary line: failedDistricts %d, sample %q; want %d and ten ids", summary.FailedDistricts, summary.FailedDistrictsSample, failed)
	}
}

// The text output names at most ten ids of a list and counts the rest;
// --json lists every one, as it did.
func TestPrintResultBounded(t *testing.T) {
	t.Parallel()
	ids := make([]string, 20000)
	for i := range ids {
		ids[i] = strconv.Itoa(i + 1)
	}
	res := &snapshot.Result{SnapshotID: day, Outcome: snapshot.OutcomePartial, Chunks: 400, FailedChunks: 400, FailedDistricts: ids}
	for _, tc := range []struct {
		ids  []string
		want string
	}{
		{ids, "failed districts (20,000): 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 … and 19,990 more; --json lists them all\n"},
		{ids[:10], "failed districts (10): 1, 2, 3, 4, 5, 6, 7, 8, 9, 10\n"},
		{[]string{"F"}, "failed districts (1): F\n"},
	} {
		var out bytes.Buffer
		a := &app{stdout: &out}
		res.FailedDistricts = tc.ids
		if err := a.printResult(res, false, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), "\n"+tc.want) || len(out.String()) > 1024 {
			t.Errorf("%d failed: text output\n%s\nwant the line %q", len(tc.ids), out.String(), tc.want)
		}
	}
	var out bytes.Buffer
	res.FailedDistricts = ids
	if err := (&app{stdout: &out}).printResult(res, true, false); err != nil {
		t.Fatal(err)
	}
	var back snapshot.Result
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || len(back.FailedDistricts) != len(ids) || back.FailedDistricts[19999] != "20000" {
		t.Errorf("--json: %d failed districts (%v), want all %d", len(back.FailedDistricts), err, len(ids))
	}
}

func TestThousands(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 19990: "19,990", 1234567: "1,234,567", -1000: "-1,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// consoleLine matches a console log line: time, level, message.
var consoleLine = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(Z|[+-]\d\d:\d\d)\t(DEBUG|INFO|WARN|ERROR)\t[^\t]+`)

// screen is what a terminal shows after out (termtest.Render), its
// empty lines left out.
func screen(out string) []string {
	lines, _ := termtest.Render(out)
	return slices.DeleteFunc(lines, func(l string) bool { return l == "" })
}

// The log format: console where stderr is a terminal, JSON elsewhere, by
// default; --log-format and SNAPWRITER_LOG_FORMAT win either way.
func TestLogFormatDefaults(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		terminal bool
		env      string
		args     []string
		json     bool
	}{
		{"pipe", false, "", nil, true},
		{"terminal", true, "", nil, false},
		{"terminal, --log-format json", true, "", []string{"--log-format", "json"}, true},
		{"terminal, SNAPWRITER_LOG_FORMAT=json", true, "json", nil, true},
		{"pipe, --log-format console", false, "", []string{"--log-format", "console"}, false},
		{"pipe, SNAPWRITER_LOG_FORMAT=console", false, "console", nil, false},
		{"pipe, --log-format auto", false, "console", []string{"--log-format", "auto"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCLI(t)
			c.terminal = tc.terminal
			if tc.env != "" {
				c.env["SNAPWRITER_LOG_FORMAT"] = tc.env
			}
			args := append([]string{"write", "--input", "-", "--progress", "log"}, tc.args...)
			code, _, errs := c.run(genJSON(t, day, 60), args...)
			if code != exitOK {
				t.Fatalf("exit %d\n%s", code, errs)
			}
			for _, line := range strings.Split(strings.TrimSpace(errs), "\n") {
				if tc.json {
					var e struct{ Severity, Message, Time string }
					if err := json.Unmarshal([]byte(line), &e); err != nil || e.Severity == "" || e.Message == "" || e.Time == "" {
						t.Fatalf("want JSON lines with severity, message, time; got %q", line)
					}
				} else if !consoleLine.MatchString(line) {
					t.Fatalf("want console lines; got %q", line)
				}
			}
		})
	}
	code, _, errs := newCLI(t).run("", "write", "--input", "x.json", "--log-format", "xml")
	if code != exitUsage || !strings.Contains(errs, `--log-format "xml": want auto, json or console`) {
		t.Errorf("--log-format xml: exit %d\n%s", code, errs)
	}
}

// At a terminal, with the bar: the log lines come above the bar, whole
// and readable (console), the per-chunk ones left out, the bar last.
func TestTerminalLogAboveBar(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	c.terminal = true
	code, out, errs := c.run(genJSON(t, day, 120), "write", "--input", "-")
	if code != exitOK || !strings.Contains(out, "complete") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	lines := screen(errs)
	if len(lines) < 3 {
		t.Fatalf("stderr as shown:\n%s", strings.Join(lines, "\n"))
	}
	var msgs []string
	for i, l := range lines {
		if i == len(lines)-1 {
			if !strings.HasPrefix(l, "write "+day) || !strings.Contains(l, "(120/120") {
				t.Errorf("the last line %q: want the bar, full", l)
			}
			break
		}
		if !consoleLine.MatchString(l) {
			t.Fatalf("line %d is not a whole console log line: %q\nstderr as shown:\n%s", i, l, strings.Join(lines, "\n"))
		}
		msgs = append(msgs, strings.Split(l, "\t")[2])
	}
	for _, want := range []string{"snapshot lock acquired", "recording the manifest", "snapshot write finished"} {
		if !strings.Contains(strings.Join(msgs, "\n"), want) {
			t.Errorf("no %q line above the bar: %q", want, msgs)
		}
	}
	if strings.Contains(errs, chunkCommitted) {
		t.Errorf("per-chunk lines beside the bar: %q", msgs)
	}
}

// The built binary at a terminal (a pseudo-terminal, by script(1)) logs
// in the console form and draws its bar under the lines; with its
// stderr a pipe it logs JSON.
func TestBinaryTerminal(t *testing.T) {
	t.Parallel()
	bin, project := binary(t), newProject(t)
	scriptPath, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) (util-linux) not installed: no pseudo-terminal to run the binary at")
	}
	in := writeFile(t, "snap.json", genJSON(t, day, 60))
	cmd := exec.Command(scriptPath, "-qfec", bin+" write --input "+in, "/dev/null")
	cmd.Env = binaryEnv(project)
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, outb)
	}
	var logs, bars int
	for _, l := range screen(strings.ReplaceAll(string(outb), "\r\n", "\n")) {
		switch {
		case consoleLine.MatchString(l):
			logs++
		case strings.HasPrefix(l, "write "+day):
			bars++
			if !strings.Contains(l, "(60/60") {
				t.Errorf("the bar %q: want it full", l)
			}
		case strings.HasPrefix(l, "snapshot "+day+": complete"), strings.HasPrefix(l, "write rate:"), strings.HasPrefix(l, "the store was slow"):
			// stdout's result
		default:
			t.Errorf("a line neither a console log line, the bar nor the result: %q", l)
		}
	}
	if logs < 3 || bars != 1 {
		t.Errorf("%d console log lines, %d bars; want some, and one\n%s", logs, bars, outb)
	}

	// A terminal 60 columns wide, narrower than the bar's line: the bar
	// keeps to one row, its count on it; wrapped, each redraw would leave
	// a row behind.
	const cols = 60
	cmd = exec.Command(scriptPath, "-qfec", fmt.Sprintf("stty cols %d rows 24; %s write --input %s", cols, bin, in), "/dev/null")
	cmd.Env = binaryEnv(project)
	if outb, err = cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, outb)
	}
	rows, _ := termtest.RenderCols(strings.ReplaceAll(string(outb), "\r\n", "\n"), cols)
	var barRows []string
	for _, r := range rows {
		if strings.ContainsAny(r, "█|") || strings.Contains(r, "districts/s") {
			barRows = append(barRows, r)
		}
	}
	if len(barRows) != 1 || !strings.HasPrefix(barRows[0], "write "+day) || !strings.Contains(barRows[0], "(60/60") {
		t.Errorf("at %d columns, the bar's rows %q: want one, whole, with its count\n%s", cols, barRows, strings.Join(rows, "\n"))
	}

	// A pipe: JSON, no bar.
	cmd = exec.Command(bin, "write", "--input", in)
	cmd.Env = binaryEnv(project)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if msgs := logMessages(t, stderr.String()); len(msgs) < 3 {
		t.Errorf("JSON log lines: %q", msgs)
	}
}
