package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/backfill"
)

// jobArgs reads the container args of the Cloud Run job in deploy/name,
// BUCKET replaced by the test's bucket.
func jobArgs(t *testing.T, name string) []string {
	t.Helper()
	b, err := os.ReadFile("../../deploy/" + name)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	// A Cloud Storage FUSE volume lists no folder that exists only as a
	// prefix — every folder the application uploads — without implicit-dirs.
	if strings.Contains(y, "gcsfuse") && !strings.Contains(y, "implicit-dirs") {
		t.Errorf("%s mounts the bucket without implicit-dirs", name)
	}
	m := regexp.MustCompile(`(?s)args: (\[[^\]]*\])`).FindStringSubmatch(y)
	if m == nil {
		t.Fatalf("%s: no args", name)
	}
	var args []string
	if err := json.Unmarshal([]byte(m[1]), &args); err != nil {
		t.Fatalf("%s: args %s: %v", name, m[1], err)
	}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "BUCKET", gcsBucket)
	}
	return args
}

// The backfill job of deploy/job.yaml, run as its four Cloud Run tasks,
// writes every complete folder of the bucket once, and a folder still
// uploading is not-ready: its task exits 7, to be retried.
func TestDeployBackfillJob(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	dates := []string{"2026-11-17", "2026-11-18", "2026-11-19", "2026-11-20", "2026-11-21"}
	for _, d := range dates {
		g.folder(t, d, 3)
	}
	g.unfinish("2026-11-21")
	args := jobArgs(t, "job.yaml")
	c.env["CLOUD_RUN_TASK_COUNT"] = "4"
	for i := range 4 {
		c.env["CLOUD_RUN_TASK_INDEX"] = strconv.Itoa(i)
		code, out, errs := c.run("", args...)
		want := exitOK
		if backfill.ShardOf("2026-11-21", 4) == i {
			want = exitNotReady
		}
		if code != want {
			t.Errorf("task %d: exit %d, want %d\n%s%s", i, code, want, out, errs)
		}
	}
	st := stateOf(t, c.project)
	for _, d := range dates[:4] {
		if st[d].State != "complete" {
			t.Errorf("%s: %+v", d, st[d])
		}
	}
	if _, ok := st["2026-11-21"]; ok {
		t.Error("a folder still uploading was written")
	}
}

// The daily job of deploy/daily-job.yaml writes today's folder, and a
// second run the same day is a no-op.
func TestDeployDailyJob(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	today := time.Now().UTC().Format(time.DateOnly)
	g.folder(t, today, 4)
	args := jobArgs(t, "daily-job.yaml")
	for run := range 2 {
		if code, out, errs := c.run("", args...); code != exitOK {
			t.Fatalf("run %d: exit %d\n%s%s", run, code, out, errs)
		}
	}
	if st := stateOf(t, c.project); st[today].State != "complete" || st[today].Districts != 4 {
		t.Errorf("stored %+v", st)
	}
}
