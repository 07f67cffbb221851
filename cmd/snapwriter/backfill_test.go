package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/backfill"
	"github.com/snapwriter/snapwriter/internal/signals"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
)

// dates returns n consecutive dates from first.
func dates(first string, n int) []string {
	t, _ := time.Parse(time.DateOnly, first)
	out := make([]string, n)
	for i := range out {
		out[i] = t.AddDate(0, 0, i).Format(time.DateOnly)
	}
	return out
}

// inputDir writes one generated snapshot per date into a fresh directory.
func inputDir(t *testing.T, ds []string, districts int) string {
	t.Helper()
	dir := t.TempDir()
	for i, d := range ds {
		b, err := json.Marshal(model.Generate(d, districts, int64(i+1)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d+".json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// proc is a snapwriter process's outcome.
type proc struct {
	code           int
	stdout, stderr string
}

// runProcs starts every command line at once and waits for all of them.
func runProcs(t *testing.T, env [][]string, args [][]string) []proc {
	t.Helper()
	bin := binary(t)
	out := make([]proc, len(args))
	var wg sync.WaitGroup
	for i := range args {
		cmd := exec.Command(bin, args[i]...)
		cmd.Env = env[i]
		var so, se bytes.Buffer
		cmd.Stdout, cmd.Stderr = &so, &se
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = cmd.Wait()
			out[i] = proc{cmd.ProcessState.ExitCode(), so.String(), se.String()}
		}()
	}
	wg.Wait()
	return out
}

// backfillSummary is backfill's --json summary; backfill's TestReport
// pins its JSON form byte for byte.
type backfillSummary = backfill.Report

func summaryOf(t *testing.T, p proc) backfillSummary {
	t.Helper()
	var s backfillSummary
	if err := json.Unmarshal([]byte(p.stdout), &s); err != nil {
		t.Fatalf("summary: %v\nstdout: %s\nstderr: %s", err, p.stdout, p.stderr)
	}
	return s
}

// stateOf reads every snapshot's summary.
func stateOf(t *testing.T, project string) map[string]snapshot.Summary {
	t.Helper()
	list, err := snapshot.NewReader(emu.TestClientFor(t, project), "").List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]snapshot.Summary{}
	for _, s := range list {
		m[s.SnapshotID] = s
	}
	return m
}

// 30 dates over 4 Cloud Run tasks (4 processes at once): every date is
// written exactly once and complete; a rerun with --skip-complete writes
// nothing at all.
func TestBackfillAcrossTasks(t *testing.T) {
	t.Parallel()
	project := newProject(t)
	ds := dates("2026-10-01", 30)
	dir := inputDir(t, ds, 12)
	const tasks = 4
	run := func(extra ...string) []proc {
		env, args := make([][]string, tasks), make([][]string, tasks)
		for i := range tasks {
			env[i] = binaryEnv(project, fmt.Sprintf("CLOUD_RUN_TASK_INDEX=%d", i), fmt.Sprintf("CLOUD_RUN_TASK_COUNT=%d", tasks))
			args[i] = append([]string{"backfill", "--input-dir", dir, "--json"}, extra...)
		}
		return runProcs(t, env, args)
	}

	seen := map[string]int{}
	for i, p := range run() {
		if p.code != exitOK {
			t.Fatalf("task %d: exit %d\n%s", i, p.code, p.stderr)
		}
		s := summaryOf(t, p)
		if s.TaskIndex != i || s.TaskCount != tasks || s.Complete != len(s.Dates) || s.Complete < 7 || s.Complete > 8 {
			t.Errorf("task %d summary: %+v", i, s)
		}
		for _, d := range s.Dates {
			seen[d.Date]++
			if d.Outcome != outcome.Complete || d.Fence != "000000000000001" {
				t.Errorf("task %d, %s: %+v", i, d.Date, d)
			}
		}
		if got := strings.Count(p.stderr, `"message":"date done"`); got != len(s.Dates) {
			t.Errorf("task %d: %d 'date done' log lines for %d dates", i, got, len(s.Dates))
		}
	}
	for _, d := range ds {
		if seen[d] != 1 {
			t.Errorf("%s written by %d tasks", d, seen[d])
		}
	}
	state := stateOf(t, project)
	if len(state) != 30 {
		t.Fatalf("%d snapshots stored, want 30", len(state))
	}
	for d, s := range state {
		if s.State != "complete" || s.WriterFence != "000000000000001" || s.Districts != 12 {
			t.Errorf("%s: %+v", d, s)
		}
	}

	docsBefore := allDocs(t, project)
	for i, p := range run("--skip-complete") {
		s := summaryOf(t, p)
		if p.code != exitOK || s.Skipped != len(s.Dates) || s.Complete != 0 {
			t.Errorf("rerun task %d: exit %d, %+v\n%s", i, p.code, s, p.stderr)
		}
	}
	if after := allDocs(t, project); after != docsBefore {
		t.Errorf("the --skip-complete rerun changed the database:\nbefore %s\nafter  %s", docsBefore, after)
	}
}

// allDocs renders every document of the project (snapshots, districts,
// locks, fence counters) with its update time, to detect any write.
func allDocs(t *testing.T, project string) string {
	t.Helper()
	return renderDocs(t, project, "snapshots", "locks", "fence_counters")
}

// snapshotDocs is allDocs without the lock collections.
func snapshotDocs(t *testing.T, project string) string {
	t.Helper()
	return renderDocs(t, project, "snapshots")
}

// renderDocs renders the documents of colls and of every districts
// subcollection, with their update times.
func renderDocs(t *testing.T, project string, colls ...string) string {
	t.Helper()
	ctx := context.Background()
	cl := emu.TestClientFor(t, project)
	var lines []string
	for _, coll := range colls {
		docs, err := cl.Collection(coll).Documents(ctx).GetAll()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			lines = append(lines, d.Ref.Path+"@"+d.UpdateTime.String())
		}
	}
	docs, err := cl.CollectionGroup("districts").Documents(ctx).GetAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range docs {
		lines = append(lines, d.Ref.Path+"@"+d.UpdateTime.String())
	}
	sort.Strings(lines)
	return fmt.Sprintf("%d docs, %x", len(lines), strings.Join(lines, "\n"))
}

// Two backfills over the same dates at once: they take turns on each
// date's lock, every date ends complete, and the second writer of each date
// has the higher fence.
func TestTwoBackfillsAtOnce(t *testing.T) {
	t.Parallel()
	project := newProject(t)
	ds := dates("2026-06-01", 10)
	dir := inputDir(t, ds, 30)
	env := [][]string{binaryEnv(project), binaryEnv(project)}
	args := [][]string{{"backfill", "--input-dir", dir, "--json"}, {"backfill", "--input-dir", dir, "--json"}}
	ps := runProcs(t, env, args)
	fences := map[string][]string{}
	for i, p := range ps {
		if p.code != exitOK {
			t.Fatalf("backfill %d: exit %d\n%s\n%s", i, p.code, p.stdout, p.stderr)
		}
		for _, d := range summaryOf(t, p).Dates {
			if d.Outcome != outcome.Complete {
				t.Errorf("backfill %d, %s: %+v", i, d.Date, d)
			}
			fences[d.Date] = append(fences[d.Date], d.Fence)
		}
	}
	state := stateOf(t, project)
	for _, d := range ds {
		f := fences[d]
		sort.Strings(f)
		if len(f) != 2 || f[0] != "000000000000001" || f[1] != "000000000000002" {
			t.Errorf("%s: fences %v, want 1 and 2", d, f)
		}
		if s := state[d]; s.State != "complete" || s.WriterFence != "000000000000002" {
			t.Errorf("%s: %+v, want complete under the newest fence", d, s)
		}
	}
}

func TestBackfillFlagsAndBadInput(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	ds := dates("2026-02-26", 5) // across the end of February
	dir := inputDir(t, ds, 4)

	code, out, errs := c.run("", "backfill", "--input-dir", dir, "--from", "2026-02-27", "--to", "2026-03-01", "--json")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	var s backfillSummary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range s.Dates {
		got = append(got, d.Date)
	}
	if want := []string{"2026-02-27", "2026-02-28", "2026-03-01"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("--from/--to wrote %v, want %v oldest first", got, want)
	}
	// Complete dates are skipped without being read again: a broken file
	// of a finished date does not stop a --skip-complete rerun.
	if err := os.WriteFile(filepath.Join(dir, "2026-02-27.json"), []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The table form names every date and the totals.
	if code, out, _ := c.run("", "backfill", "--input-dir", dir, "--skip-complete"); code != exitOK ||
		!strings.Contains(out, "3 skipped") || !strings.Contains(out, "2 complete") {
		t.Errorf("table summary: exit %d\n%s", code, out)
	}
	// The starting line counts the complete dates among the run's own,
	// not every complete snapshot stored (five by now).
	if code, _, errs := c.run("", "backfill", "--input-dir", dir, "--from", "2026-03-01", "--skip-complete"); code != exitOK ||
		!strings.Contains(errs, `"dates":2,"alreadyComplete":2,`) {
		t.Errorf("--from 2026-03-01: exit %d, want the starting line to count 2 dates, 2 complete\n%s", code, errs)
	}

	for name, args := range map[string][]string{
		"from after to":  {"--from", "2026-03-02", "--to", "2026-03-01"},
		"bad from":       {"--from", "2026-02-30"},
		"task too big":   {"--task-index", "4", "--task-count", "4"},
		"bad progress":   {"--progress", "fancy"},
		"missing dir":    {"--input-dir", filepath.Join(dir, "nope")},
		"bad batch size": {"--batch-size", "0"},
	} {
		base := []string{"backfill", "--input-dir", dir}
		if code, _, errs := c.run("", append(base, args...)...); code != exitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, errs)
		}
	}
	c.env["CLOUD_RUN_TASK_INDEX"] = "x"
	if code, _, errs := c.run("", "backfill", "--input-dir", dir); code != exitUsage || !strings.Contains(errs, "CLOUD_RUN_TASK_INDEX") {
		t.Errorf("bad CLOUD_RUN_TASK_INDEX: exit %d\n%s", code, errs)
	}
	delete(c.env, "CLOUD_RUN_TASK_INDEX")

	// One bad file among good ones: exit 2 before any write.
	c2 := newCLI(t)
	bad := inputDir(t, dates("2026-05-01", 3), 4)
	if err := os.WriteFile(filepath.Join(bad, "2026-05-02.json"), []byte(`{"snapshot_id": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c2.run("", "backfill", "--input-dir", bad); code != exitUsage || !strings.Contains(errs, "2026-05-02.json") {
		t.Errorf("bad file: exit %d, want 2\n%s", code, errs)
	}
	// A file whose own date differs from its name is refused too.
	misnamed := inputDir(t, nil, 0)
	if err := os.WriteFile(filepath.Join(misnamed, "2026-05-09.json"), []byte(genJSON(t, "2026-05-08", 3)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c2.run("", "backfill", "--input-dir", misnamed); code != exitUsage || !strings.Contains(errs, "dataAsOfDate") {
		t.Errorf("misnamed file: exit %d, want 2\n%s", code, errs)
	}
	if n := c2.docCount(); n != 0 {
		t.Errorf("bad input wrote %d documents", n)
	}
}

// cancelOn is a stderr that cancels when a log line contains marker.
type cancelOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	cancel func()
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if bytes.Contains(p, []byte(w.marker)) {
		w.cancel()
	}
	return w.buf.Write(p)
}

// A signal during a backfill stops it after the current date; the dates
// not started are reported and the exit code is 143 (SIGTERM), not 0, so
// the task is retried.
func TestBackfillStopsOnSignal(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := inputDir(t, dates("2026-04-01", 4), 10)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	stderr := &cancelOn{marker: `"message":"date done"`, cancel: func() { cancel(signals.Stopped{Signal: syscall.SIGTERM}) }}
	var stdout bytes.Buffer
	a := newApp(strings.NewReader(""), &stdout, stderr, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
	a.newClient = func(ctx context.Context, project, _ string) (*firestore.Client, error) {
		return emu.Client(ctx, project)
	}
	code := a.run(ctx, []string{"backfill", "--input-dir", dir, "--json"})
	if code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, stderr.buf.String())
	}
	var s backfillSummary
	if err := json.Unmarshal(stdout.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Complete != 1 || s.NotStarted != 3 || s.ExitCode != 143 || s.Dates[0].Outcome != outcome.Complete || s.Dates[3].Outcome != outcome.NotStarted {
		t.Errorf("summary after the stop: %+v", s)
	}
	if state := stateOf(t, c.project); len(state) != 1 || state["2026-04-01"].State != "complete" {
		t.Errorf("stored after the stop: %+v", state)
	}
}

// Per-district snapshot directories named by date are inputs too, beside
// files; a date given both ways is refused.
func TestBackfillSnapshotDirectories(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	root := inputDir(t, []string{"2026-11-20"}, 5)
	sub := filepath.Join(root, "2026-11-21")
	snapshotDir(t, sub, "2026-11-21", 4)
	code, out, errs := c.run("", "backfill", "--input-dir", root, "--json")
	var s backfillSummary
	if code != exitOK || json.Unmarshal([]byte(out), &s) != nil || s.Complete != 2 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	if st := stateOf(t, c.project); st["2026-11-21"].Districts != 4 || st["2026-11-20"].Districts != 5 {
		t.Errorf("stored: %+v", st)
	}
	if err := os.WriteFile(filepath.Join(root, "2026-11-21.json"), []byte(genJSON(t, "2026-11-21", 2)), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := c.run("", "backfill", "--input-dir", root); code != exitUsage || !strings.Contains(errs, "given twice") {
		t.Errorf("date given twice: exit %d\n%s", code, errs)
	}
}
