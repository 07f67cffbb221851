package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/snapwriter/snapwriter/snapshot"
)

// syncBuffer is a stderr the test can read while the app writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startSchedule runs `schedule args…` in process until the returned stop
// function cancels it; stop returns the exit code.
func startSchedule(t *testing.T, c *cli, args ...string) (logs *syncBuffer, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs = &syncBuffer{}
	a := newApp(strings.NewReader(""), io.Discard, logs, func(k string) (string, bool) { v, ok := c.env[k]; return v, ok })
	a.newClient = func(ctx context.Context, project, _ string) (*firestore.Client, error) {
		return c.dial(ctx, project)
	}
	a.newAPIClient = c.dialAPI
	done := make(chan int, 1)
	go func() { done <- a.run(ctx, append([]string{"schedule"}, args...)) }()
	return logs, func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(30 * time.Second):
			t.Fatal("schedule did not stop within 30 s")
			return -1
		}
	}
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func completeIn(t *testing.T, project, date string) bool {
	s, err := snapshot.NewReader(emu.TestClientFor(t, project), "").Summary(context.Background(), date)
	return err == nil && s.State == "complete"
}

// waitForToday waits until today's (or tomorrow's) snapshot is complete.
func waitForToday(t *testing.T, project string) {
	t.Helper()
	waitFor(t, 20*time.Second, "the snapshot", func() bool {
		for _, d := range todayUTC() {
			if completeIn(t, project, d) {
				return true
			}
		}
		return false
	})
}

// today (and tomorrow, should the test cross midnight) in UTC.
func todayUTC() []string {
	now := time.Now().UTC()
	return []string{now.Format(time.DateOnly), now.Add(24 * time.Hour).Format(time.DateOnly)}
}

// A seconds-level schedule runs, writes the day's file, and stops with
// exit 0; a missing input is logged and the worker carries on.
func TestScheduleFromDirectory(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	logs, stop := startSchedule(t, c, "--cron", "* * * * * *", "--input-dir", dir, "--log-level", "debug")
	// No file yet: runs fail, the worker keeps going.
	waitFor(t, 10*time.Second, "a failed run", func() bool { return strings.Contains(logs.String(), "run failed: no usable input") })
	for _, d := range todayUTC() {
		if err := os.WriteFile(filepath.Join(dir, d+".json"), []byte(genJSON(t, d, 12)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	waitForToday(t, c.project)
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d\n%s", code, logs.String())
	}
	for _, want := range []string{`"message":"schedule started"`, `"message":"run finished"`, `"message":"schedule stopped"`, `"fence":"000000000000001"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %s", want)
		}
	}
}

// --input-url fetches the day's snapshot; the query string (a token) is
// never logged.
func TestScheduleFromURL(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	var hits sync.Map
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		date := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/snap/"), ".json")
		hits.Store(date, true)
		if r.URL.Query().Get("token") != "s3cret" {
			http.Error(w, "no", http.StatusForbidden)
			return
		}
		_, _ = io.WriteString(w, genJSON(t, date, 8))
	}))
	defer srv.Close()
	logs, stop := startSchedule(t, c, "--cron", "*/1 * * * * *", "--input-url", srv.URL+"/snap/{date}.json?token=s3cret")
	waitForToday(t, c.project)
	if code := stop(); code != exitOK {
		t.Fatalf("exit %d\n%s", code, logs.String())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Error("the URL's token was logged")
	}

	// A failing download is logged without the token, and the worker runs on.
	c2 := newCLI(t)
	logs, stop = startSchedule(t, c2, "--cron", "* * * * * *", "--input-url", srv.URL+"/snap/{date}.json?token=wrong")
	waitFor(t, 10*time.Second, "two failed runs", func() bool { return strings.Count(logs.String(), "run failed") >= 2 })
	if code := stop(); code != exitOK || !strings.Contains(logs.String(), "403") || strings.Contains(logs.String(), "token=wrong") {
		t.Errorf("exit %d\n%s", code, logs.String())
	}
}

func TestScheduleUsageErrors(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no cron":        {"--input-dir", dir},
		"bad cron":       {"--cron", "61 * * * *", "--input-dir", dir},
		"bad timezone":   {"--cron", "@daily", "--timezone", "Mars/Olympus", "--input-dir", dir},
		"no input":       {"--cron", "@daily"},
		"both inputs":    {"--cron", "@daily", "--input-dir", dir, "--input-url", "https://x/{date}"},
		"missing dir":    {"--cron", "@daily", "--input-dir", filepath.Join(dir, "nope")},
		"ftp url":        {"--cron", "@daily", "--input-url", "ftp://x/{date}"},
		"bad grace":      {"--cron", "@daily", "--input-dir", dir, "--grace-period", "-1s"},
		"huge offset":    {"--cron", "@daily", "--input-dir", dir, "--date-offset", "1000"},
		"bad batch size": {"--cron", "@daily", "--input-dir", dir, "--batch-size", "501"},
	} {
		if code, _, errs := c.run("", append([]string{"schedule"}, args...)...); code != exitUsage {
			t.Errorf("%s: exit %d, want 2\n%s", name, code, errs)
		}
	}
	if n := c.docCount(); n != 0 {
		t.Errorf("usage errors wrote %d documents", n)
	}
}

// The worker as Cloud Run or systemd runs it: SIGTERM in the middle of a
// write stops it cleanly (exit 143, SIGTERM's), the lock is released, the manifest says
// what was written, and ticks that came during the write were logged as
// missed runs.
func TestScheduleSIGTERM(t *testing.T) {
	t.Parallel()
	c := newCLI(t)
	dir := t.TempDir()
	for _, d := range todayUTC() {
		if err := os.WriteFile(filepath.Join(dir, d+".json"), []byte(genJSON(t, d, 1000)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(binary(t), "schedule", "--cron", "* * * * * *", "--input-dir", dir, "--concurrency", "1")
	cmd.Env = binaryEnv(c.project)
	stderr, sc, logs := startLogged(t, cmd)
	committed, missed := 0, false
	for (committed < 3 || !missed) && sc.Scan() {
		committed += strings.Count(sc.Text(), `"message":"batch committed"`)
		missed = missed || strings.Contains(sc.Text(), `"message":"missed run`)
	}
	if committed < 3 || !missed {
		_ = cmd.Process.Kill()
		t.Fatalf("no write in progress with a missed tick:\n%s", logs.String())
	}
	if code := sigterm(t, cmd, stderr, logs); code != 143 {
		t.Fatalf("exit %d, want 143\n%s", code, logs.String())
	}
	if !strings.Contains(logs.String(), `"message":"schedule stopped"`) {
		t.Errorf("logs lack 'schedule stopped'")
	}
	if locks := docsIn(t, c, "locks"); len(locks) != 0 {
		t.Errorf("lock left behind: %v", locks)
	}
	list, err := snapshot.NewReader(c.client(), "").List(context.Background())
	if err != nil || len(list) != 1 || (list[0].State != snapshot.StateComplete && list[0].State != snapshot.StatePartial) {
		t.Fatalf("stored: %+v, %v", list, err)
	}
	if list[0].State == "partial" {
		if w, f := manifestExact(t, c, list[0].SnapshotID); w+f != 1000 || f == 0 {
			t.Errorf("manifest: %d written, %d failed", w, f)
		}
	}
}
