package backfill

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapwriter/snapwriter/emulator"
	"github.com/snapwriter/snapwriter/internal/ending"
	"github.com/snapwriter/snapwriter/locking/firestorelock"
	"github.com/snapwriter/snapwriter/model"
	"github.com/snapwriter/snapwriter/outcome"
	"github.com/snapwriter/snapwriter/snapshot"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

var emu *emulator.Emulator

func TestMain(m *testing.M) { os.Exit(emulator.Main(m, &emu)) }

// answer is what the fake store does with one date.
type answer struct {
	res     *snapshot.Result
	err     error
	summary *snapshot.Summary // SkipComplete's read
	readErr error
	hook    func() // runs inside the write
}

// fake is a Writer and Reader whose answers the test sets per date.
type fake struct {
	mu      sync.Mutex
	dates   map[string]answer
	written []string
	read    []string
}

func (f *fake) Write(_ context.Context, id string, snap *model.Snapshot) (*snapshot.Result, error) {
	f.mu.Lock()
	o := f.dates[id]
	f.written = append(f.written, id)
	f.mu.Unlock()
	if snap.Payload.Metadata.DataAsOfDate != id {
		return nil, fmt.Errorf("wrote %s's input as %s", snap.Payload.Metadata.DataAsOfDate, id)
	}
	if o.hook != nil {
		o.hook()
	}
	return o.res, o.err
}

func (f *fake) Summary(ctx context.Context, id string) (*snapshot.Summary, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("read without a deadline")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.read = append(f.read, id)
	o := f.dates[id]
	if o.summary == nil && o.readErr == nil {
		return nil, snapshot.ErrNotFound
	}
	return o.summary, o.readErr
}

func (f *fake) List(context.Context) ([]snapshot.Summary, error) {
	return []snapshot.Summary{
		{SnapshotID: "2026-11-02", State: snapshot.StateComplete, WriterFence: "000000000000007"},
		{SnapshotID: "2026-11-01", State: snapshot.StatePartial, WriterFence: "000000000000003"},
	}, nil
}

func written(n int) *snapshot.Result {
	return &snapshot.Result{Outcome: snapshot.OutcomeComplete, Fence: "000000000000002", DistrictsWritten: n, FailedDistricts: []string{}}
}

func partly(n int, failed ...string) *snapshot.Result {
	return &snapshot.Result{Fence: "000000000000002", DistrictsWritten: n, FailedDistricts: failed}
}

func inputsOf(t *testing.T, ds ...string) []Input {
	t.Helper()
	in, err := List(context.Background(), nil, inputDir(t, ds...))
	if err != nil {
		t.Fatal(err)
	}
	return in
}

// Every way a write can end has its outcome; a partial write is told from
// a failed one whatever error it carries.
func TestRunOutcomes(t *testing.T) {
	t.Parallel()
	manifestLost := fmt.Errorf("%w (%w)", snapshot.ErrManifestNotRecorded, snapshot.ErrLockLost)
	cases := []struct {
		name    string
		o       answer
		want    outcome.Outcome
		wantErr string // a substring; "" wants no error
	}{
		{"complete", answer{res: written(3)}, outcome.Complete, ""},
		{"skipped under the lock", answer{res: &snapshot.Result{Outcome: snapshot.OutcomeSkipped}}, outcome.Skipped, ""},
		{"chunks failed", answer{res: partly(2, "3"), err: fmt.Errorf("%w: 1 of 2 chunks failed", snapshot.ErrPartial)}, outcome.Partial, "snapshot written partially: 1 of 2 chunks failed"},
		{"stopped by a signal", answer{res: partly(1, "2", "3"), err: fmt.Errorf("%w: stopped: %w", snapshot.ErrPartial, context.Canceled)}, outcome.Partial, "context canceled"},
		{"lock lost", answer{res: partly(1, "2", "3"), err: fmt.Errorf("%w: %w", snapshot.ErrPartial, snapshot.ErrLockLost)}, outcome.Partial, snapshot.ErrLockLost.Error()},
		{"lock held", answer{err: snapshot.ErrLockHeld}, outcome.LockHeld, snapshot.ErrLockHeld.Error()},
		{"fenced out", answer{res: partly(1), err: snapshot.ErrFencedOut}, outcome.FencedOut, snapshot.ErrFencedOut.Error()},
		{"manifest not recorded", answer{res: partly(1), err: manifestLost}, outcome.Failed, snapshot.ErrManifestNotRecorded.Error()},
		{"root failed", answer{res: partly(0), err: snapshot.ErrRootFailed}, outcome.Failed, snapshot.ErrRootFailed.Error()},
		{"invalid", answer{err: fmt.Errorf("%w: too big", model.ErrInvalid)}, outcome.Failed, "too big"},
		{"timed out before the root", answer{res: partly(0), err: context.DeadlineExceeded}, outcome.Failed, "deadline exceeded"},
		{"other", answer{err: errors.New("boom")}, outcome.Failed, "boom"},
	}
	f := &fake{dates: map[string]answer{}}
	ds := dates("2026-11-01", len(cases))
	for i, c := range cases {
		f.dates[ds[i]] = c.o
	}
	p := &recorder{}
	core, logs := observer.New(zap.InfoLevel)
	sum := Run(context.Background(), inputsOf(t, ds...), Options{Writer: f, Progress: p, Log: zap.New(core)})
	started, done := p.started, p.done
	if len(sum.Dates) != len(cases) {
		t.Fatalf("%d results for %d dates", len(sum.Dates), len(cases))
	}
	for i, c := range cases {
		r := sum.Dates[i]
		gotErr := ""
		if r.Err != nil {
			gotErr = r.Err.Error()
		}
		if r.Date != ds[i] || r.Outcome != c.want || (c.wantErr == "") != (r.Err == nil) || !strings.Contains(gotErr, c.wantErr) {
			t.Errorf("%s: %s %s %v, want %s %q", c.name, r.Date, r.Outcome, r.Err, c.want, c.wantErr)
		}
		if c.o.res != nil && (r.Fence != c.o.res.Fence || r.DistrictsWritten != c.o.res.DistrictsWritten || len(r.FailedDistricts) != len(c.o.res.FailedDistricts)) {
			t.Errorf("%s: %+v, from %+v", c.name, r, c.o.res)
		}
	}
	if errors.Is(sum.Dates[3].Err, context.Canceled) != true {
		t.Errorf("a partial write stopped by a signal hides the cancellation: %v", sum.Dates[3].Err)
	}
	if sum.Complete != 1 || sum.Skipped != 1 || sum.Partial != 3 || sum.Failed != 7 || sum.NotStarted != 0 || sum.Stopped != nil {
		t.Errorf("counts: %+v", sum)
	}
	if w, _ := sum.Worst(); w.Date != ds[7] {
		t.Errorf("worst: %+v, want the first failed date %s", w, ds[7])
	}
	if strings.Join(started, " ") != strings.Join(ds, " ") || done != len(ds) {
		t.Errorf("started %v, done %d", started, done)
	}
	// One line per date, a warning unless the date is complete or skipped.
	lines := logs.FilterMessage("date done").All()
	if len(lines) != len(ds) {
		t.Fatalf("%d 'date done' lines for %d dates", len(lines), len(ds))
	}
	for i, l := range lines {
		r := sum.Dates[i]
		want := zap.InfoLevel
		if r.Outcome.Severity() > 0 {
			want = zap.WarnLevel
		}
		if l.Level != want || l.ContextMap()["date"] != r.Date || l.ContextMap()["outcome"] != string(r.Outcome) {
			t.Errorf("line %d: %s %v, want %s for %s %s", i, l.Level, l.ContextMap(), want, r.Date, r.Outcome)
		}
	}
}

// The worst date is the first of the highest Severity.
func TestWorst(t *testing.T) {
	t.Parallel()
	var s Summary
	if _, ok := s.Worst(); ok {
		t.Error("an empty summary has a worst date")
	}
	for i, o := range []outcome.Outcome{outcome.Skipped, outcome.Partial, outcome.LockHeld, outcome.Partial, outcome.FencedOut, outcome.LockHeld} {
		s.Add(DateResult{Date: fmt.Sprint(i), Outcome: o})
	}
	if w, _ := s.Worst(); w.Date != "4" {
		t.Errorf("worst: %+v", w)
	}
	s.Add(DateResult{Date: "6", Outcome: outcome.NotStarted})
	s.Add(DateResult{Date: "7", Outcome: outcome.Failed})
	if w, _ := s.Worst(); w.Date != "6" {
		t.Errorf("worst: %+v, want the first of the worst", w)
	}
}

// Dates known complete are skipped unread; with SkipComplete every other
// date is read first, and a complete one skipped without a write.
func TestRunSkipsComplete(t *testing.T) {
	t.Parallel()
	ds := dates("2026-11-01", 4)
	f := &fake{dates: map[string]answer{
		ds[1]: {summary: &snapshot.Summary{State: snapshot.StateComplete, WriterFence: "000000000000004"}},
		ds[2]: {summary: &snapshot.Summary{State: snapshot.StatePartial}, res: written(3)},
		ds[3]: {readErr: errors.New("permission denied"), res: written(3)},
	}}
	complete, err := Completed(context.Background(), f)
	if err != nil || len(complete) != 1 || complete["2026-11-02"] != "000000000000007" {
		t.Fatalf("Completed: %v, %v", complete, err)
	}
	complete = map[string]string{ds[0]: "000000000000009"}
	p := &recorder{}
	sum := Run(context.Background(), inputsOf(t, ds...), Options{
		Writer: f, Reader: f, SkipComplete: true, ReadTimeout: time.Minute, Complete: complete, Progress: p,
	})
	started := p.started
	var got []string
	for _, r := range sum.Dates {
		got = append(got, fmt.Sprintf("%s %s %s %v", r.Date, r.Outcome, r.Fence, r.Err))
	}
	want := []string{
		ds[0] + " skipped 000000000000009 <nil>",
		ds[1] + " skipped 000000000000004 <nil>",
		ds[2] + " complete 000000000000002 <nil>",
		ds[3] + " complete 000000000000002 <nil>", // a failed read is left to the write
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("results:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if fmt.Sprint(f.read) != fmt.Sprint(ds[1:]) || fmt.Sprint(f.written) != fmt.Sprint(ds[2:]) || fmt.Sprint(started) != fmt.Sprint(ds[1:]) {
		t.Errorf("read %v, wrote %v, started %v", f.read, f.written, started)
	}
	if sum.Skipped != 2 || sum.Complete != 2 {
		t.Errorf("counts: %+v", sum)
	}
}

// unanswered is an Unanswered policy that stops on errors saying "no
// answer" and rewords them.
func unanswered(err error) (string, error) {
	if strings.Contains(err.Error(), "no answer") {
		return "no answer from the store at x", fmt.Errorf("the store at x: %w", err)
	}
	return "", err
}

// A store that does not answer stops the backfill, whether on a write or
// on SkipComplete's read; the dates after it are not started, except those
// known complete.
func TestRunStopsWhenUnanswered(t *testing.T) {
	t.Parallel()
	ds := dates("2026-11-01", 5)
	for _, c := range []struct {
		name string
		o    answer
	}{
		{"write", answer{summary: &snapshot.Summary{State: snapshot.StatePartial}, err: errors.New("no answer")}},
		{"read", answer{readErr: errors.New("no answer")}},
	} {
		f := &fake{dates: map[string]answer{ds[0]: {res: written(3)}, ds[1]: {err: errors.New("refused")}, ds[2]: c.o, ds[3]: {res: written(3)}}}
		sum := Run(context.Background(), inputsOf(t, ds...), Options{
			Writer: f, Reader: f, SkipComplete: true, ReadTimeout: time.Minute,
			Complete: map[string]string{ds[4]: "000000000000001"}, Unanswered: unanswered,
		})
		stop := "the backfill stopped at " + ds[2] + ": no answer from the store at x"
		if sum.Stopped == nil || sum.Stopped.Error() != stop {
			t.Errorf("%s: stopped: %v", c.name, sum.Stopped)
		}
		var got []string
		for _, r := range sum.Dates {
			got = append(got, fmt.Sprintf("%s %v", r.Outcome, r.Err))
		}
		want := []string{"complete <nil>", "failed refused", "failed the store at x: no answer", "not-started not started: " + stop, "skipped <nil>"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: results:\n%s\nwant:\n%s", c.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if fmt.Sprint(f.written) != fmt.Sprint(ds[:len(f.written)]) || len(f.written) != map[string]int{"write": 3, "read": 2}[c.name] {
			t.Errorf("%s: wrote %v", c.name, f.written)
		}
		if sum.NotStarted != 1 || sum.Failed != 2 {
			t.Errorf("%s: counts %+v", c.name, sum)
		}
	}
}

// Cancelling the context (a signal) lets the date in progress end and
// starts no other.
func TestRunCancelled(t *testing.T) {
	t.Parallel()
	ds := dates("2026-11-01", 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{dates: map[string]answer{ds[0]: {res: written(3), hook: cancel}}}
	sum := Run(ctx, inputsOf(t, ds...), Options{Writer: f, Complete: map[string]string{ds[3]: "000000000000001"}})
	var got []string
	for _, r := range sum.Dates {
		got = append(got, fmt.Sprintf("%s %v", r.Outcome, r.Err))
	}
	want := []string{"complete <nil>", "not-started not started: context canceled", "not-started not started: context canceled", "skipped <nil>"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") || len(f.written) != 1 || sum.Stopped != nil {
		t.Errorf("results:\n%s\nwant:\n%s\nwrote %v", strings.Join(got, "\n"), strings.Join(want, "\n"), f.written)
	}
	if !errors.Is(sum.Dates[1].Err, context.Canceled) {
		t.Errorf("a date not started hides the cause: %v", sum.Dates[1].Err)
	}
}

// An input that changed after Check fails its date only.
func TestRunInputChanged(t *testing.T) {
	t.Parallel()
	in := inputsOf(t, dates("2026-11-01", 2)...)
	if err := os.WriteFile(in[0].Path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := &fake{dates: map[string]answer{in[1].Date: {res: written(3)}}}
	sum := Run(context.Background(), in, Options{Writer: f, Unanswered: unanswered})
	if r := sum.Dates[0]; r.Outcome != outcome.Failed || !errors.Is(r.Err, model.ErrInvalid) || !strings.Contains(r.Err.Error(), in[0].Path) {
		t.Errorf("changed input: %+v", r)
	}
	if sum.Dates[1].Outcome != outcome.Complete || fmt.Sprint(f.written) != fmt.Sprint([]string{in[1].Date}) {
		t.Errorf("the next date: %+v, wrote %v", sum.Dates[1], f.written)
	}
}

// Against the emulator: a backfill writes every date complete, and a
// rerun with SkipComplete writes nothing.
func TestRunEmulator(t *testing.T) {
	t.Parallel()
	client := emu.TestClient(t)
	locker, err := firestorelock.New(client)
	if err != nil {
		t.Fatal(err)
	}
	w, err := snapshot.NewWriter(client, locker, snapshot.WithSkipComplete(true), snapshot.WithLockWait(0))
	if err != nil {
		t.Fatal(err)
	}
	r := snapshot.NewReader(client, "")
	ds := dates("2026-10-30", 3)
	dir := inputDir(t, ds...)
	in, err := List(context.Background(), nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	sum := Run(ctx, in, Options{Writer: w})
	if sum.Complete != 3 || len(sum.Dates) != 3 {
		t.Fatalf("first run: %+v", sum)
	}
	for _, d := range sum.Dates {
		if d.Outcome != outcome.Complete || d.Fence != "000000000000001" || d.DistrictsWritten != 3 || d.Duration <= 0 {
			t.Errorf("%+v", d)
		}
	}
	complete, err := Completed(ctx, r)
	if err != nil || len(complete) != 3 || complete[ds[0]] != "000000000000001" {
		t.Fatalf("Completed: %v, %v", complete, err)
	}
	// One more date: the rerun skips the listed ones unread and writes it.
	writeSnapshot(t, filepath.Join(dir, "2026-11-02.json"), "2026-11-02", 9)
	if in, err = List(context.Background(), nil, dir); err != nil {
		t.Fatal(err)
	}
	sum = Run(ctx, in, Options{Writer: w, Reader: r, SkipComplete: true, ReadTimeout: time.Minute, Complete: complete})
	if sum.Skipped != 3 || sum.Complete != 1 || sum.Dates[3].Date != "2026-11-02" || sum.Dates[3].Outcome != outcome.Complete {
		t.Errorf("rerun: %+v", sum)
	}
	// Written again without the listing, every date is read and skipped.
	sum = Run(ctx, in, Options{Writer: w, Reader: r, SkipComplete: true, ReadTimeout: time.Minute})
	if sum.Skipped != 4 {
		t.Errorf("second rerun: %+v", sum)
	}
}

// recorder is a Progress that records the dates begun and how many were
// done.
type recorder struct {
	started []string
	done    int
}

func (r *recorder) Describe(date string) { r.started = append(r.started, date) }
func (r *recorder) Add(n int) error      { r.done += n; return nil }

// A date's outcome is the table of endings' word for its error (through
// outcome.Of), but for a snapshot that was already complete.
func TestClassifyReadsEndings(t *testing.T) {
	t.Parallel()
	for _, e := range ending.All() {
		err := fmt.Errorf("snapshot d: %w", e.Err)
		if o, got := classify(nil, err); o != outcome.Outcome(e.Outcome) || got != err {
			t.Errorf("classify(%v) = %s, %v; table %s", e.Err, o, got, e.Outcome)
		}
	}
	if o, _ := classify(&snapshot.Result{Outcome: snapshot.OutcomeSkipped}, nil); o != outcome.Skipped {
		t.Errorf("skipped: %s", o)
	}
	if o, _ := classify(&snapshot.Result{Outcome: snapshot.OutcomeComplete}, nil); o != outcome.Complete {
		t.Errorf("complete: %s", o)
	}
}
