package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/gcsserver"
	"github.com/snapwriter/snapwriter/model"
)

// gcsBucket is the bucket every test's Cloud Storage server holds.
const gcsBucket = "exports"

// gcsFixture is a Cloud Storage API server (fake-gcs-server on loopback)
// for one test, reached as the CLI reaches Cloud Storage: by
// STORAGE_EMULATOR_HOST.
type gcsFixture struct {
	srv *gcsserver.Server
}

func newGCS(t *testing.T, c *cli) *gcsFixture {
	t.Helper()
	srv, err := gcsserver.Start(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	srv.CreateBucket(gcsBucket)
	if c != nil {
		c.env["STORAGE_EMULATOR_HOST"] = srv.Host
	}
	return &gcsFixture{srv: srv}
}

// folder uploads a generated snapshot folder of n districts for date
// under snapshots/DATE/, the manifest last (as the application's uploader
// does), and returns the local copy.
func (g *gcsFixture) folder(t *testing.T, date string, n int) string {
	t.Helper()
	local := filepath.Join(t.TempDir(), date)
	if err := model.WriteFolder(model.Generate(date, n, 5), local); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.PutDir(gcsBucket, "snapshots/"+date+"/", local, "manifest.json"); err != nil {
		t.Fatal(err)
	}
	return local
}

// unfinish replaces the folder's manifest with one that does not say
// writeComplete: true, as during an upload.
func (g *gcsFixture) unfinish(date string) {
	g.srv.Put(gcsBucket, "snapshots/"+date+"/manifest.json", []byte(`{"districts": []}`))
}

// noneStored fails t when c's project holds any snapshot.
func noneStored(t *testing.T, c *cli) {
	t.Helper()
	if st := stateOf(t, c.project); len(st) != 0 {
		t.Errorf("stored %+v; want nothing", st)
	}
}

// startWaiting starts the built binary with args against c's project and
// g, and returns once it logs that it waits for its input.
func startWaiting(t *testing.T, c *cli, g *gcsFixture, args ...string) (*exec.Cmd, io.Reader, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	cmd.Env = binaryEnv(c.project, "STORAGE_EMULATOR_HOST="+g.srv.Host)
	stderr, sc, logs := startLogged(t, cmd)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "input not ready; waiting for it") {
			return cmd, stderr, logs
		}
	}
	_ = cmd.Wait()
	t.Fatalf("%v: no wait logged\n%s", args, logs)
	return nil, nil, nil
}

// getSnapshot reads the stored snapshot of date back with `get`.
func getSnapshot(t *testing.T, c *cli, date string) *model.Snapshot {
	t.Helper()
	code, out, errs := c.run("", "get", "--date", date)
	if code != exitOK {
		t.Fatalf("get %s: exit %d\n%s", date, code, errs)
	}
	s, err := model.Decode(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A gs:// folder writes what the same folder on disk writes, and get
// returns it; so does a gs:// Snapshot JSON object.
func TestWriteFromGCS(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	local := g.folder(t, day, 60)
	if code, out, errs := c.run("", "write", "--input", "gs://exports/snapshots/"+day+"/", "--json"); code != exitOK || !strings.Contains(out, `"complete": true`) {
		t.Fatalf("write: exit %d\n%s\n%s", code, out, errs)
	}
	want, err := model.LoadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	defer want.Close()
	if d := model.Diff(want, getSnapshot(t, c, day)); d != "" {
		t.Errorf("get differs from the folder: %s", d)
	}

	obj := genJSON(t, "2026-11-21", 7)
	g.srv.Put(gcsBucket, "one/2026-11-21.json", []byte(obj))
	if code, _, errs := c.run("", "write", "--input", "gs://exports/one/2026-11-21.json"); code != exitOK {
		t.Fatalf("write object: exit %d\n%s", code, errs)
	}
	sent, _ := model.Decode(strings.NewReader(obj))
	if d := model.Diff(sent, getSnapshot(t, c, "2026-11-21")); d != "" {
		t.Errorf("get differs from the object: %s", d)
	}
	// verify --input and --dry-run read gs:// too.
	if code, out, errs := c.run("", "verify", "--date", day, "--input", "gs://exports/snapshots/"+day); code != exitOK {
		t.Errorf("verify --input gs://: exit %d\n%s\n%s", code, out, errs)
	}
	if code, out, errs := c.run("", "write", "--dry-run", "--input", "gs://exports/snapshots/"+day+"/"); code != exitOK || !strings.Contains(out, day) {
		t.Errorf("write --dry-run gs://: exit %d\n%s\n%s", code, out, errs)
	}
}

// A folder whose upload has not finished is not written: exit 7, the
// folder named, nothing stored; once the manifest says writeComplete:
// true, the same command writes it.
func TestGCSNotReady(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	g.folder(t, day, 5)
	g.unfinish(day)
	for _, args := range [][]string{
		{"write", "--input", "gs://exports/snapshots/" + day + "/"},
		{"repair", "--date", day, "--input", "gs://exports/snapshots/" + day + "/"},
		{"write", "--dry-run", "--input", "gs://exports/snapshots/" + day + "/"},
	} {
		code, _, errs := c.run("", args...)
		if code != exitNotReady || !strings.Contains(errs, "gs://exports/snapshots/"+day+"/") || !strings.Contains(errs, "writeComplete: true") {
			t.Errorf("%v: exit %d, want %d naming the folder\n%s", args, code, exitNotReady, errs)
		}
	}
	noneStored(t, c)
}

// --wait-for-input waits for an upload to finish (and for a folder not
// there yet); one that does not finish in time is not ready, exit 7.
func TestWaitForInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, nil)
	cmd, stderr, logs := startWaiting(t, c, g, "write", "--input", "gs://exports/snapshots/"+day+"/", "--wait-for-input", "2m")
	g.folder(t, day, 8) // the upload lands, manifest last
	if code := waitExit(t, cmd, stderr, logs); code != exitOK {
		t.Fatalf("exit %d after the upload landed\n%s", code, logs)
	}
	if st := stateOf(t, c.project); st[day].State != "complete" || st[day].Districts != 8 {
		t.Errorf("stored %+v", st[day])
	}

	// An upload that never finishes: exit 7 once the wait is over.
	g.folder(t, "2026-11-21", 3)
	g.unfinish("2026-11-21")
	t0 := time.Now()
	never := exec.Command(binary(t), "write", "--input", "gs://exports/snapshots/2026-11-21/", "--wait-for-input", "3s")
	never.Env = cmd.Env
	expectExit(t, never, exitNotReady, "waited", t0, 30*time.Second)
}

// expectExit runs cmd and checks that it exits code within the time since
// t0, saying want.
func expectExit(t *testing.T, cmd *exec.Cmd, code int, want string, t0 time.Time, within time.Duration) {
	t.Helper()
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != code || !strings.Contains(string(out), want) {
		t.Errorf("%v: %v; want exit %d saying %q\n%s", cmd.Args[1:], err, code, want, out)
	}
	if d := time.Since(t0); d > within {
		t.Errorf("%v took %s, over %s", cmd.Args[1:], d, within)
	}
}

// Bad Cloud Storage input is exit 2 with a message naming what is wrong,
// and nothing is written.
func TestGCSBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	local := g.folder(t, day, 4)
	g.srv.Put(gcsBucket, "bad/truncated.json", []byte(`{"snapshot_id": "x", "payload": {"districts": [`))
	g.srv.Put(gcsBucket, "bad/html.json", []byte(`<html>403</html>`))
	snap, err := model.LoadDir(local)
	if err != nil {
		t.Fatal(err)
	}
	lost := "district_" + snap.Payload.Districts[1].DistrictID + ".json"
	snap.Close()
	if err := g.srv.PutDir(gcsBucket, "lacking/"+day+"/", local, "manifest.json"); err != nil {
		t.Fatal(err)
	}
	if err := g.srv.Delete(gcsBucket, "lacking/"+day+"/"+lost); err != nil {
		t.Fatal(err)
	}
	for input, want := range map[string]string{
		"gs:/exports/x":                        "is not a Cloud Storage URL",
		"gs://Exports/x/":                      "not a valid bucket name",
		"gs://nobucket/snapshots/" + day + "/": "bucket nobucket does not exist",
		"gs://exports/snapshots/2026-01-01/":   "does not exist",
		"gs://exports/snapshots/":              "holds no snapshot",
		"gs://exports/bad/truncated.json":      "gs://exports/bad/truncated.json",
		"gs://exports/bad/html.json":           "gs://exports/bad/html.json",
		"gs://exports/lacking/" + day + "/":    lost,
	} {
		code, _, errs := c.run("", "write", "--input", input)
		if code != exitUsage || !strings.Contains(errs, want) {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s", input, code, want, errs)
		}
	}
	noneStored(t, c)
}

// Cloud Storage that does not answer fails the command with exit 1
// within --request-timeout of silence (30 s by default: within 90 s), naming it;
// nothing is written.
func TestGCSUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // refused from now on
	project := newProject(t)
	t0 := time.Now()
	cmd := exec.Command(binary(t), "write", "--input", "gs://exports/snapshots/"+day+"/")
	cmd.Env = binaryEnv(project, "STORAGE_EMULATOR_HOST=http://"+addr)
	expectExit(t, cmd, exitError, "no answer from the Cloud Storage emulator at "+addr+" within 30s (--request-timeout)", t0, 90*time.Second)
}

// backfill --input-dir gs:// writes the YYYY-MM-DD.json objects and
// YYYY-MM-DD/ folders under it, lists a folder whose upload has not
// finished as not ready, and exits 7.
func TestBackfillGCS(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	g.srv.Put(gcsBucket, "snapshots/2026-11-18.json", []byte(genJSON(t, "2026-11-18", 3)))
	g.folder(t, "2026-11-19", 4)
	g.folder(t, "2026-11-20", 5)
	g.unfinish("2026-11-20")
	g.srv.Put(gcsBucket, "snapshots/notes.txt", []byte("not an input"))
	code, out, errs := c.run("", "backfill", "--input-dir", "gs://exports/snapshots", "--json")
	var s backfillSummary
	if code != exitNotReady || json.Unmarshal([]byte(out), &s) != nil || s.Complete != 2 || s.NotReady != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	st := stateOf(t, c.project)
	if st["2026-11-18"].State != "complete" || st["2026-11-19"].State != "complete" {
		t.Errorf("stored %+v", st)
	}
	if _, ok := st["2026-11-20"]; ok {
		t.Errorf("a folder not ready was written: %+v", st["2026-11-20"])
	}
	if s.Dates[2].Outcome != "not-ready" || s.Dates[2].ExitCode != exitNotReady || !strings.Contains(s.Dates[2].Error, "gs://exports/snapshots/2026-11-20/") {
		t.Errorf("not-ready date: %+v", s.Dates[2])
	}
}

// Finding nothing to write is not success: exit 7, saying where it
// looked; --allow-empty exits 0.
func TestBackfillNothingToDo(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	g.srv.Put(gcsBucket, "snapshots/2026-01-01.json", []byte(genJSON(t, "2026-01-01", 2)))
	empty := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--input-dir", empty}, exitNotReady, "no dated input in " + empty + " for any date"},
		{[]string{"--input-dir", empty, "--allow-empty"}, exitOK, ""},
		{[]string{"--input-dir", "gs://exports/snapshots", "--from", "today", "--to", "today"}, exitNotReady,
			"no dated input in gs://exports/snapshots for " + time.Now().UTC().Format(time.DateOnly)},
		{[]string{"--input-dir", "gs://exports/snapshots", "--from", "2026-02-01"}, exitNotReady, "(1 lies outside it, 2026-01-01 to 2026-01-01)"},
		{[]string{"--input-dir", "gs://exports/nothing/"}, exitNotReady, "looked for YYYY-MM-DD.json files and YYYY-MM-DD/ folders"},
		{[]string{"--input-dir", "gs://nobucket/x"}, exitUsage, "bucket nobucket does not exist"},
		{[]string{"--input-dir", "gs://exports/snapshots", "--from", "today-x"}, exitUsage, `--from "today-x"`},
	}
	for _, tc := range cases {
		code, out, errs := c.run("", append([]string{"backfill"}, tc.args...)...)
		if code != tc.code || !strings.Contains(errs+out, tc.want) {
			t.Errorf("%v: exit %d, want %d saying %q\n%s%s", tc.args, code, tc.code, tc.want, out, errs)
		}
	}
	noneStored(t, c)
}

// A backfill whose window holds no input yet waits for it with
// --wait-for-input, as a daily job that fires before the upload needs.
func TestBackfillWaitsForWindow(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, nil)
	today := time.Now().UTC().Format(time.DateOnly)
	cmd, stderr, logs := startWaiting(t, c, g, "backfill", "--input-dir", "gs://exports/snapshots", "--from", "today", "--to", "today",
		"--skip-complete", "--wait-for-input", "2m")
	g.folder(t, today, 6)
	if code := waitExit(t, cmd, stderr, logs); code != exitOK {
		t.Fatalf("exit %d\n%s", code, logs)
	}
	if st := stateOf(t, c.project); st[today].State != "complete" {
		t.Errorf("stored %+v", st)
	}
}

// waitExit waits at most two minutes for cmd to exit by itself (signal 0
// sends nothing) and returns its exit code.
func waitExit(t *testing.T, cmd *exec.Cmd, stderr io.Reader, logs *bytes.Buffer) int {
	t.Helper()
	return stop(t, cmd, 0, 2*time.Minute, stderr, logs)
}

// generate --folder writes the application's snapshot folder, manifest
// complete, which write reads back as the same snapshot; it will not
// write into a folder that holds something.
func TestGenerateFolder(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := filepath.Join(t.TempDir(), day)
	if code, _, errs := c.run("", "generate", "--date", day, "--districts", "9", "--folder", dir); code != exitOK {
		t.Fatalf("generate --folder: exit %d\n%s", code, errs)
	}
	if code, _, errs := c.run("", "generate", "--date", day, "--folder", dir); code != exitUsage || !strings.Contains(errs, "not empty") {
		t.Errorf("generate into a full folder: exit %d\n%s", code, errs)
	}
	if code, _, errs := c.run("", "write", "--input", dir); code != exitOK {
		t.Fatalf("write: exit %d\n%s", code, errs)
	}
	want := model.Generate(day, 9, 1)
	got := getSnapshot(t, c, day)
	for i, d := range want.Payload.Districts {
		if a, b := memData(d), memData(got.Payload.Districts[i]); mustJSON(t, a) != mustJSON(t, b) {
			t.Errorf("district %s differs", d.DistrictID)
		}
	}
}

// schedule --input-dir gs:// writes the tick's date from the bucket; a
// tick whose date has no input is a failed run with its exit code, or
// with --allow-empty nothing to write; a missing bucket is refused at
// start.
func TestScheduleGCS(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	g := newGCS(t, c)
	today := time.Now().UTC().Format(time.DateOnly)
	if code, _, errs := c.run("", "schedule", "--cron", "@every 1s", "--input-dir", "gs://nobucket/snapshots"); code != exitUsage || !strings.Contains(errs, "bucket nobucket does not exist") {
		t.Errorf("missing bucket: exit %d\n%s", code, errs)
	}

	logs, stop := startSchedule(t, c, "--cron", "@every 1s", "--input-dir", "gs://exports/snapshots")
	waitFor(t, 60*time.Second, "a run without input", func() bool { return strings.Contains(logs.String(), `"message":"run failed: no usable input"`) })
	if !strings.Contains(logs.String(), `"exitCode":2`) || !strings.Contains(logs.String(), "no input for "+today) {
		t.Errorf("a run without input: %s", logs)
	}
	g.folder(t, today, 5)
	waitFor(t, 60*time.Second, "today written", func() bool { return completeIn(t, c.project, today) })
	if code := stop(); code != exitOK {
		t.Errorf("stop: exit %d", code)
	}

	c2 := newCLI(t)
	c2.env["STORAGE_EMULATOR_HOST"] = g.srv.Host
	logs, stop = startSchedule(t, c2, "--cron", "@every 1s", "--input-dir", "gs://exports/elsewhere", "--allow-empty")
	waitFor(t, 60*time.Second, "a run skipped", func() bool { return strings.Contains(logs.String(), "nothing to write (allow-empty)") })
	if code := stop(); code != exitOK || strings.Contains(logs.String(), `"run failed`) {
		t.Errorf("--allow-empty: exit %d\n%s", code, logs)
	}
}
