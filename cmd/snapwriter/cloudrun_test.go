package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// On a Cloud Run job task every log line of a command names the task's
// execution, index and attempt (and job), read from the environment Cloud
// Run sets; elsewhere no line has the key.
func TestLogLinesNameTheCloudRunTask(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	want := map[string]any{"job": "snapwriter-daily", "execution": "snapwriter-daily-x7k2p", "taskIndex": "2", "taskAttempt": "1"}
	c.env["CLOUD_RUN_JOB"], c.env["CLOUD_RUN_EXECUTION"] = "snapwriter-daily", "snapwriter-daily-x7k2p"
	c.env["CLOUD_RUN_TASK_INDEX"], c.env["CLOUD_RUN_TASK_ATTEMPT"] = "2", "1"
	code, _, errs := c.run(genJSON(t, day, 30), "write", "--input", "-", "--batch-size", "10")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := logLines(t, errs)
	if len(lines) < 5 {
		t.Fatalf("%d log lines; want the write's (lock, root, chunks, finish)", len(lines))
	}
	for _, l := range lines {
		cr, _ := l["cloudRun"].(map[string]any)
		if len(cr) != len(want) {
			t.Fatalf("line %v: cloudRun %v; want %v", l["message"], l["cloudRun"], want)
		}
		for k, v := range want {
			if cr[k] != v {
				t.Errorf("line %v: cloudRun.%s = %v; want %q", l["message"], k, cr[k], v)
			}
		}
	}

	off := newCLI(t)
	code, _, errs = off.run(genJSON(t, day, 30), "write", "--input", "-")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, l := range logLines(t, errs) {
		if _, has := l["cloudRun"]; has {
			t.Errorf("line %v has cloudRun off Cloud Run", l["message"])
		}
	}
}

// logLines parses the JSON log lines of stderr (the closing
// "snapwriter: …" line of a failure is not one).
func logLines(t *testing.T, stderr string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for s := range strings.Lines(stderr) {
		if !strings.HasPrefix(s, "{") {
			continue
		}
		var l map[string]any
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("log line %q: %v", s, err)
		}
		lines = append(lines, l)
	}
	return lines
}
